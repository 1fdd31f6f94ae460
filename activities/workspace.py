"""Real workspace tools for live sessions, confined to one directory per session.

Every path is resolved inside the session's workspace (no escape through ``..`` or
symlinks); shell commands run there with a timeout; every output is capped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_CHARS = 200_000
MAX_FILE_CHARS = 400_000
SHELL_TIMEOUT_SECONDS = 120.0
MAX_LISTED = 2_000


@dataclass(frozen=True)
class ToolOutput:
    text: str
    exit_code: int


class ToolInputError(ValueError):
    """The model called a tool with arguments it cannot run with."""


def parse_arguments(arguments: str) -> dict:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as error:
        raise ToolInputError(f"tool arguments are not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolInputError("tool arguments must be a JSON object")
    return value


def _cap(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output capped: {len(text) - limit} more characters not kept]"


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def path(self, relative: object) -> Path:
        if not isinstance(relative, str) or not relative.strip():
            raise ToolInputError("path must be a non-empty workspace-relative string")
        candidate = (self.root / relative).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise ToolInputError(f"path {relative!r} is outside the workspace")
        return candidate

    async def run(self, name: str, arguments: str) -> ToolOutput:
        args = parse_arguments(arguments)
        self.root.mkdir(parents=True, exist_ok=True)
        if name == "read_file":
            return self._read_file(args)
        if name == "write_file":
            return self._write_file(args)
        if name == "list_files":
            return self._list_files(args)
        if name == "bash":
            return await self._bash(args)
        raise ToolInputError(f"unknown tool {name!r}")

    def _read_file(self, args: dict) -> ToolOutput:
        path = self.path(args.get("path"))
        if not path.is_file():
            return ToolOutput(f"no such file: {args.get('path')}", 1)
        text = path.read_text(encoding="utf-8", errors="replace")
        return ToolOutput(_cap(text, MAX_FILE_CHARS), 0)

    def _write_file(self, args: dict) -> ToolOutput:
        path = self.path(args.get("path"))
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolInputError("write_file needs a string 'content'")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return ToolOutput(f"wrote {len(content)} characters to {args['path']}", 0)

    def _list_files(self, args: dict) -> ToolOutput:
        base = self.path(args.get("path") or ".")
        if not base.is_dir():
            return ToolOutput(f"no such directory: {args.get('path')}", 1)
        names = sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())
        more = len(names) - MAX_LISTED
        listing = "\n".join(names[:MAX_LISTED]) + (f"\n[{more} more files]" if more > 0 else "")
        return ToolOutput(listing, 0)

    async def _bash(self, args: dict) -> ToolOutput:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolInputError("bash needs a non-empty string 'command'")
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command,
            cwd=self.root,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills the whole command tree
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8"},
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), SHELL_TIMEOUT_SECONDS)
        except (asyncio.TimeoutError, asyncio.CancelledError) as stop:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(stop, asyncio.CancelledError):
                raise
            return ToolOutput(f"command timed out after {SHELL_TIMEOUT_SECONDS:.0f} s", 124)
        text = out.decode("utf-8", errors="replace")
        return ToolOutput(_cap(text), proc.returncode or 0)
