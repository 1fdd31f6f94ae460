"""The live workspace tools: ``read_file``, ``write_file``, ``list_files`` and ``bash``.

``bash`` runs in the bubblewrap sandbox (``activities/sandbox.py``): only the session's
workspace is visible and writable, no network unless the session allows it, no ancestor's
environment, resource limits, output capped while it streams. The file tools run in the
worker, on paths resolved inside the workspace (no escape through ``..`` or symlinks),
reading and listing only as much as they return.

Whatever is wrong with a call's input or its execution is an answer for the model (a
result with a non-zero exit code), never an activity failure: a malformed call cannot
wedge a session. Only a missing sandbox fails the task, naming what is missing.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from temporalio.exceptions import ApplicationError

from activities.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    run_sandboxed,
    run_unconfined,
    sandbox_problem,
    workspace_problem,
)
from workflows.tools import BASH_TOOL, LIST_FILES_TOOL, READ_FILE_TOOL, WRITE_FILE_TOOL

MAX_FILE_CHARS = 400_000  # read_file returns at most this much of a file
MAX_WRITE_CHARS = 4_000_000
MAX_LISTED = 2_000
MAX_SCANNED = 100_000  # list_files stops counting beyond this many entries
MAX_PATH_CHARS = 1_024
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)
INPUT_ERROR_EXIT = 2
FAILURE_EXIT = 1
# The task fails (non-retryable) when bash cannot be confined and the operator did not
# explicitly allow unconfined tools (LANES_UNSAFE_NO_SANDBOX=1).
SANDBOX_UNAVAILABLE = "ToolSandboxUnavailable"


@dataclass(frozen=True)
class ToolOutput:
    text: str
    exit_code: int


class ToolInputError(ValueError):
    """The model called a tool with arguments it cannot run with."""


def parse_arguments(arguments: str) -> dict:
    try:
        value = json.loads(arguments or "{}")
    except (json.JSONDecodeError, RecursionError) as error:
        raise ToolInputError(f"tool arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolInputError("tool arguments must be a JSON object")
    return value


def _text_argument(args: dict, key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ToolInputError(f"'{key}' must be a {'' if allow_empty else 'non-empty '}string")
    if "\0" in value:
        raise ToolInputError(f"'{key}' contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError(f"'{key}' is not valid Unicode text (it holds a lone surrogate)") from None
    return value


class Workspace:
    def __init__(self, root: Path, policy: SandboxPolicy | None = None, *, unsafe_unconfined: bool = False) -> None:
        self.root = root.resolve()
        self.policy = policy or SandboxPolicy()
        self.unsafe_unconfined = unsafe_unconfined

    def path(self, relative: object, *, may_be_root: bool = True) -> Path:
        if not isinstance(relative, str) or not relative.strip():
            raise ToolInputError("path must be a non-empty workspace-relative string")
        relative = _text_argument({"path": relative}, "path")
        if len(relative) > MAX_PATH_CHARS:
            raise ToolInputError(f"path has {len(relative)} characters; at most {MAX_PATH_CHARS}")
        long_names = [part for part in Path(relative).parts if len(part.encode()) > MAX_NAME_BYTES]
        if long_names:
            raise ToolInputError(f"a path component is longer than {MAX_NAME_BYTES} bytes: {long_names[0][:40]}...")
        candidate = (self.root / relative).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise ToolInputError(f"path {relative!r} is outside the workspace")
        if candidate == self.root and not may_be_root:
            raise ToolInputError(f"path {relative!r} is the workspace directory itself")
        return candidate

    async def run(self, name: str, arguments: str) -> ToolOutput:
        """The tool's answer; input problems and failed file operations are answers too."""
        try:
            args = parse_arguments(arguments)
            self.root.mkdir(parents=True, exist_ok=True)
            if name == READ_FILE_TOOL:
                return self._read_file(args)
            if name == WRITE_FILE_TOOL:
                return self._write_file(args)
            if name == LIST_FILES_TOOL:
                return self._list_files(args)
            if name == BASH_TOOL:
                return await self._bash(args)
            raise ToolInputError(f"unknown tool {name!r}")
        except ToolInputError as error:
            return ToolOutput(f"{name} error: {error}", INPUT_ERROR_EXIT)
        except OSError as error:  # the file system said no: permissions, a file as a directory...
            return ToolOutput(f"{name} failed: {error.strerror or error}"
                              + (f" ({Path(error.filename).name})" if error.filename else ""), FAILURE_EXIT)

    def _shown(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    def _read_file(self, args: dict) -> ToolOutput:
        path = self.path(args.get("path"))
        if not path.is_file():
            return ToolOutput(f"no such file: {self._shown(path)}", FAILURE_EXIT)
        with path.open("rb") as handle:  # read only what is returned: UTF-8 takes at most 4 bytes a character
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(MAX_FILE_CHARS * 4)
        text = data.decode("utf-8", errors="replace")
        if len(text) > MAX_FILE_CHARS or size > len(data):
            kept = text[:MAX_FILE_CHARS]
            return ToolOutput(f"{kept}\n[file truncated: showing {len(kept)} characters of a {size}-byte file]", 0)
        return ToolOutput(text, 0)

    def _write_file(self, args: dict) -> ToolOutput:
        path = self.path(args.get("path"), may_be_root=False)
        content = _text_argument(args, "content", allow_empty=True)
        if len(content) > MAX_WRITE_CHARS:
            raise ToolInputError(f"content has {len(content)} characters; at most {MAX_WRITE_CHARS}")
        for parent in reversed(path.relative_to(self.root).parents[:-1]):
            existing = self.root / parent
            if existing.exists() and not existing.is_dir():
                raise ToolInputError(f"{parent.as_posix()} is a file, not a directory")
        if path.is_dir():
            raise ToolInputError(f"{self._shown(path)} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return ToolOutput(f"wrote {len(content)} characters to {self._shown(path)}", 0)

    def _list_files(self, args: dict) -> ToolOutput:
        base = self.path(args.get("path") or ".")
        if not base.is_dir():
            return ToolOutput(f"no such directory: {self._shown(base)}", FAILURE_EXIT)
        listed: list[str] = []
        found = scanned = 0
        for directory, dirs, files in os.walk(base):  # never follows symlinked directories
            dirs.sort()
            for name in sorted(files):
                scanned += 1
                path = Path(directory) / name
                if not stat.S_ISREG(path.lstat().st_mode):
                    continue
                found += 1
                if len(listed) < MAX_LISTED:
                    listed.append(path.relative_to(self.root).as_posix())
            scanned += len(dirs)
            if scanned >= MAX_SCANNED:
                break
        more = found - len(listed)
        note = f"\n[{more} more files{' (counting stopped)' if scanned >= MAX_SCANNED else ''}]" if more > 0 else ""
        return ToolOutput("\n".join(sorted(listed)) + note, 0)

    async def _bash(self, args: dict) -> ToolOutput:
        command = _text_argument(args, "command")
        try:
            if self.unsafe_unconfined:
                result = await run_unconfined(self.root, command, self.policy)
            else:
                result = await run_sandboxed(self.root, command, self.policy)
        except SandboxUnavailable as error:
            raise ApplicationError(f"bash cannot run confined on this worker: {error}", type=SANDBOX_UNAVAILABLE,
                                   non_retryable=True) from None
        except ValueError as error:  # a command too long for one exec argument
            raise ToolInputError(str(error)) from None
        return ToolOutput(result.text, result.exit_code)


def sandbox_status(unsafe_unconfined: bool, workspace_root: Path) -> tuple[bool, str]:
    """(usable, one line for the worker's start-up log): how bash will run here."""
    if unsafe_unconfined:
        return False, "tool sandbox OFF (LANES_UNSAFE_NO_SANDBOX=1): bash runs unconfined as the worker's user"
    problem = sandbox_problem() or workspace_problem(workspace_root)
    if problem is not None:
        return False, f"tool sandbox UNAVAILABLE, live bash calls fail their task: {problem}"
    return True, f"tool sandbox: bubblewrap, workspaces under {workspace_root}"
