"""The live workspace tools: ``read_file``, ``write_file``, ``list_files`` and ``bash``.

``bash`` runs in the bubblewrap sandbox (``activities/sandbox.py``): only the session's
workspace is visible and writable, no network unless the session allows it, no ancestor's
environment, resource limits, output capped while it streams. The file tools run in the
worker, off its event loop and within a deadline, opening every path beneath the workspace
one component at a time without following links (``activities/beneath.py``), only regular
files and directories, reading and listing only as much as they return. A workspace has a
size limit (``quota_bytes``): a write past it is refused, a command growing it past it is
stopped.

Whatever is wrong with a call's input or its execution is an answer for the model (a
result with a non-zero exit code), never an activity failure: a malformed call cannot
wedge a session. Only a missing sandbox fails the task, naming what is missing.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from temporalio.exceptions import ApplicationError

from activities.beneath import Beneath, PathRefused, parts_of
from activities.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    run_sandboxed,
    run_unconfined,
    sandbox_problem,
    workspace_problem,
)
from workflows.contract.failures import SANDBOX_UNAVAILABLE
from workflows.contract.tools import BASH_TOOL, LIST_FILES_TOOL, READ_FILE_TOOL, WRITE_FILE_TOOL

DEFAULT_QUOTA_BYTES = 1 << 30  # what a workspace may take on disk (LANES_WORKSPACE_QUOTA_BYTES)
FILE_TOOL_SECONDS = 30.0  # a file tool call's deadline
# File tools run here, not on the event loop: a call that blocks in the kernel holds one of
# these threads, never the worker (nor the default executor other work uses).
_FILE_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lanes-file-tools")
USAGE_TTL = 5.0  # seconds a workspace's measured size is reused by the file tools
_measured: dict[str, tuple[float, int]] = {}  # workspace -> (when measured, bytes): this process's writes
MAX_FILE_CHARS = 400_000  # read_file returns at most this much of a file
MAX_WRITE_CHARS = 4_000_000
MAX_LISTED = 2_000
MAX_SCANNED = 100_000  # list_files stops counting beyond this many entries
MAX_PATH_CHARS = 1_024
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)
INPUT_ERROR_EXIT = 2
FAILURE_EXIT = 1


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
    """The live tools of one session's workspace. ``quota_bytes``: what the workspace may take
    on disk; ``host_uid``: the host uid its sandbox runs as when the worker is root (one per
    session, so that one session's processes never count against another's limit)."""

    def __init__(self, root: Path, policy: SandboxPolicy | None = None, *, unsafe_unconfined: bool = False,
                 quota_bytes: int = DEFAULT_QUOTA_BYTES) -> None:
        self.root = root.resolve()
        self.policy = policy or SandboxPolicy()
        self.unsafe_unconfined = unsafe_unconfined
        self.quota_bytes = quota_bytes
        self.files = Beneath(str(self.root))

    def path(self, value: object) -> str:
        """A workspace path argument, checked for what the model can get wrong."""
        if not isinstance(value, str) or not value.strip():
            raise ToolInputError("path must be a non-empty workspace-relative string")
        relative = _text_argument({"path": value}, "path")
        if len(relative) > MAX_PATH_CHARS:
            raise ToolInputError(f"path has {len(relative)} characters; at most {MAX_PATH_CHARS}")
        long_names = [part for part in relative.split("/") if len(part.encode()) > MAX_NAME_BYTES]
        if long_names:
            raise ToolInputError(f"a path component is longer than {MAX_NAME_BYTES} bytes: {long_names[0][:40]}...")
        return relative

    async def run(self, name: str, arguments: str) -> ToolOutput:
        """The tool's answer; input problems and failed file operations are answers too."""
        try:
            args = parse_arguments(arguments)
            if name == BASH_TOOL:
                await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
                return await self._bash(args)
            operation = {READ_FILE_TOOL: self._read_file, WRITE_FILE_TOOL: self._write_file,
                         LIST_FILES_TOOL: self._list_files}.get(name)
            if operation is None:
                raise ToolInputError(f"unknown tool {name!r}")
            return await self._off_loop(name, operation, args)
        except (ToolInputError, PathRefused) as error:
            return ToolOutput(f"{name} error: {error}", INPUT_ERROR_EXIT)
        except OSError as error:  # the file system said no: permissions, a missing file...
            return ToolOutput(f"{name} failed: {error.strerror or error}"
                              + (f" ({Path(error.filename).name})" if error.filename else ""), FAILURE_EXIT)

    async def _off_loop(self, name: str, operation, args: dict) -> ToolOutput:
        """A file tool on the file tools' threads, never the event loop, within its deadline."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(_FILE_THREADS, operation, args), FILE_TOOL_SECONDS)
        except TimeoutError:
            return ToolOutput(f"{name} failed: it did not finish within {FILE_TOOL_SECONDS:g} s", FAILURE_EXIT)

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def _read_file(self, args: dict) -> ToolOutput:
        self._prepare()
        data, size = self.files.read(self.path(args.get("path")), MAX_FILE_CHARS * 4)  # UTF-8: at most 4 bytes a char
        text = data.decode("utf-8", errors="replace")
        if len(text) > MAX_FILE_CHARS or size > len(data):
            kept = text[:MAX_FILE_CHARS]
            return ToolOutput(f"{kept}\n[file truncated: showing {len(kept)} characters of a {size}-byte file]", 0)
        return ToolOutput(text, 0)

    def _write_file(self, args: dict) -> ToolOutput:
        self._prepare()
        path = self.path(args.get("path"))
        content = _text_argument(args, "content", allow_empty=True)
        if len(content) > MAX_WRITE_CHARS:
            raise ToolInputError(f"content has {len(content)} characters; at most {MAX_WRITE_CHARS}")
        if not parts_of(path):
            raise ToolInputError(f"path {path!r} is the workspace directory itself; name a file in it")
        data = content.encode("utf-8")
        used = self._usage()
        replaced = self.files.size_of(path) or 0
        if used - replaced + len(data) > self.quota_bytes:
            return ToolOutput(quota_note(self.quota_bytes, used, len(data)), FAILURE_EXIT)
        self.files.write(path, data)
        _measured[str(self.root)] = (time.monotonic(), used - replaced + len(data))
        return ToolOutput(f"wrote {len(content)} characters to {'/'.join(parts_of(path))}", 0)

    def _usage(self) -> int:
        """Bytes the workspace takes: measured (a walk of the tree) at most every USAGE_TTL
        seconds, and kept up to date by the writes in between (bash calls measure anew)."""
        when, used = _measured.get(str(self.root), (0.0, 0))
        if time.monotonic() - when >= USAGE_TTL:
            if len(_measured) > 10_000:  # a long-lived worker's old sessions
                _measured.clear()
            used = self.files.usage(MAX_SCANNED)
            _measured[str(self.root)] = (time.monotonic(), used)
        return used

    def _list_files(self, args: dict) -> ToolOutput:
        self._prepare()
        listing = self.files.listing(self.path(args.get("path") or "."), MAX_LISTED, MAX_SCANNED)
        more = listing.found - len(listing.files)
        note = f"\n[{more} more files{'' if listing.complete else ' (counting stopped)'}]" if more > 0 else ""
        return ToolOutput("\n".join(listing.files) + note, 0)

    async def _bash(self, args: dict) -> ToolOutput:
        command = _text_argument(args, "command")
        try:
            if self.unsafe_unconfined:
                result = await run_unconfined(self.root, command, self.policy)
            else:
                result = await run_sandboxed(self.root, command, self.policy, quota_bytes=self.quota_bytes)
            _measured.pop(str(self.root), None)  # the command may have changed anything
        except SandboxUnavailable as error:
            raise ApplicationError(f"bash cannot run confined on this worker: {error}", type=SANDBOX_UNAVAILABLE,
                                   non_retryable=True) from None
        except ValueError as error:  # a command too long for one exec argument
            raise ToolInputError(str(error)) from None
        return ToolOutput(result.text, result.exit_code)


def quota_note(quota: int, used: int, adding: int) -> str:
    return (f"the workspace is limited to {quota / 2**20:.0f} MiB and holds {used / 2**20:.1f} MiB; writing "
            f"{adding / 2**20:.1f} MiB more would pass the limit: delete files first")


def sandbox_status(unsafe_unconfined: bool, workspace_root: Path) -> tuple[bool, str]:
    """(usable, one line for the worker's start-up log): how bash will run here."""
    if unsafe_unconfined:
        return False, "tool sandbox OFF (LANES_UNSAFE_NO_SANDBOX=1): bash runs unconfined as the worker's user"
    problem = sandbox_problem() or workspace_problem(workspace_root)
    if problem is not None:
        return False, f"tool sandbox UNAVAILABLE, live bash calls fail their task: {problem}"
    return True, f"tool sandbox: bubblewrap, workspaces under {workspace_root}"
