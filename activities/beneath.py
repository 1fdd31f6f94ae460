"""File operations that cannot leave a directory: every path is opened beneath the workspace
root one component at a time, each relative to the directory already open and never through
a link, so a directory swapped for a symlink between a check and a use cannot redirect it.

The model is hostile here. A path is workspace-relative (or under ``/workspace``, the
sandbox's name for it); ``..``, links (at any component), and anything but regular files and
directories are refused: a FIFO, socket or device is never opened for reading or writing
(``O_NONBLOCK`` keeps the open itself from waiting on a FIFO), and a file with several hard
links is not read or written (it may be a host file linked in). Everything here is blocking
file I/O: callers run it on a thread, never on the event loop.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SANDBOX_ROOT = "/workspace"  # what the sandboxed shell calls the workspace
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class PathRefused(ValueError):
    """The path names something the file tools do not touch; the message says what."""


@dataclass(frozen=True)
class Listing:
    files: list[str]  # workspace-relative paths of regular files (one link each), sorted, at most ``limit``
    found: int  # regular files seen
    complete: bool  # every entry was scanned (False: the scan stopped at its bound)


def parts_of(path: str) -> list[str]:
    """The components of a workspace path ([] for the workspace itself); refused: ``..``,
    absolute paths outside ``/workspace``."""
    if path == SANDBOX_ROOT or path.startswith(SANDBOX_ROOT + "/"):
        path = path[len(SANDBOX_ROOT):]
    elif path.startswith("/"):
        raise PathRefused(f"path {path!r} is outside the workspace (use a workspace-relative path)")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathRefused(f"path {path!r} leads outside the workspace: '..' is not allowed (name files from the "
                          "workspace down)")
    return parts


_KINDS = ((stat.S_ISREG, "a file"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISDIR, "a directory"))


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file or directory")


class Beneath:
    """One directory tree, opened beneath ``root`` (which the model cannot replace: only
    what is inside it is writable by the sandbox)."""

    def __init__(self, root: str) -> None:
        self.root = root

    @contextmanager
    def directory(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """An open descriptor of the directory ``parts`` (made, with its parents, when
        ``create``); a link or a non-directory at any component is refused, naming it."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for depth, part in enumerate(parts):
                shown = "/".join(parts[: depth + 1])
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as error:
                    raise self._refusal(error, fd, part, shown, wanted="a directory") from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _refusal(self, error: OSError, dir_fd: int, name: str, shown: str, *, wanted: str) -> Exception:
        """What an open that failed ran into, as the model should read it."""
        if error.errno == errno.ENOENT:
            return FileNotFoundError(errno.ENOENT, f"no such file or directory: {shown}")
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR):
            try:
                found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                return error
            if stat.S_ISLNK(found.st_mode):
                return PathRefused(f"{shown} is a symbolic link; the file tools do not follow links")
            if wanted == "a regular file":
                return PathRefused(f"{shown} is {kind_of(found.st_mode)}; the file tools read and write regular "
                                   "files only")
            return PathRefused(f"{shown} is {kind_of(found.st_mode)}, not {wanted}")
        return error

    def _checked_file(self, fd: int, shown: str) -> os.stat_result:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise PathRefused(f"{shown} is {kind_of(found.st_mode)}; the file tools read and write regular files only")
        if found.st_nlink > 1:
            raise PathRefused(f"{shown} has {found.st_nlink} hard links; the file tools do not touch a file "
                              "linked from elsewhere (copy it instead)")
        return found

    def read(self, path: str, max_bytes: int) -> tuple[bytes, int]:
        """(up to ``max_bytes`` of the file, its size)."""
        parts = parts_of(path)
        if not parts:
            raise PathRefused("the workspace itself is a directory, not a file")
        shown = "/".join(parts)
        with self.directory(parts[:-1]) as parent:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | _FILE_FLAGS, dir_fd=parent)
            except OSError as error:
                raise self._refusal(error, parent, parts[-1], shown, wanted="a regular file") from None
        try:
            size = self._checked_file(fd, shown).st_size
            chunks, left = [], max_bytes
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks), size
        finally:
            os.close(fd)

    def write(self, path: str, data: bytes) -> None:
        """Replace the file's content with ``data`` (made, with its directories, if missing)."""
        parts = parts_of(path)
        if not parts:
            raise PathRefused("the workspace itself is a directory; name a file in it")
        shown = "/".join(parts)
        with self.directory(parts[:-1], create=True) as parent:
            try:
                fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | _FILE_FLAGS, 0o644, dir_fd=parent)
            except OSError as error:
                raise self._refusal(error, parent, parts[-1], shown, wanted="a regular file") from None
        try:
            self._checked_file(fd, shown)  # before anything changes: a FIFO or a linked file is left as it was
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def size_of(self, path: str) -> int | None:
        """The size of the regular file at ``path``; None when there is none (or not a file)."""
        parts = parts_of(path)
        if not parts:
            return None
        try:
            with self.directory(parts[:-1]) as parent:
                found = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except (OSError, PathRefused):
            return None
        return found.st_size if stat.S_ISREG(found.st_mode) else None

    def walk(self, path: str, max_entries: int) -> Iterator[tuple[str, os.stat_result]]:
        """Every entry under ``path`` (workspace-relative name, lstat), directories first
        opened beneath their parent without following links; at most ``max_entries``."""
        base = parts_of(path)
        seen = 0
        with self.directory(base) as top:
            pending: list[tuple[int, str]] = [(os.dup(top), "/".join(base))]
        try:
            while pending:
                fd, prefix = pending.pop()
                try:
                    names = []
                    with os.scandir(fd) as entries:
                        for entry in entries:  # bounded: a directory of millions stops here too
                            seen += 1
                            if seen > max_entries:
                                break
                            names.append((entry.name, entry.stat(follow_symlinks=False)))
                    for name, found in sorted(names):
                        shown = f"{prefix}/{name}" if prefix else name
                        yield shown, found
                        if stat.S_ISDIR(found.st_mode):
                            try:
                                pending.append((os.open(name, _DIR_FLAGS, dir_fd=fd), shown))
                            except OSError:
                                continue  # replaced by a link or removed meanwhile: not listed
                    if seen > max_entries:
                        return
                finally:
                    os.close(fd)
        finally:
            for fd, _ in pending:
                os.close(fd)

    def listing(self, path: str, limit: int, max_entries: int) -> Listing:
        files: list[str] = []
        found = scanned = 0
        for name, entry in self.walk(path, max_entries):
            scanned += 1
            if stat.S_ISREG(entry.st_mode) and entry.st_nlink == 1:  # what read_file reads
                found += 1
                if len(files) < limit:
                    files.append(name)
        return Listing(sorted(files), found, scanned < max_entries)

    def usage(self, max_entries: int) -> int:
        """Bytes the tree takes on disk (allocated blocks, so a sparse file counts what it uses)."""
        return sum(entry.st_blocks * 512 for _, entry in self.walk("", max_entries))
