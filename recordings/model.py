"""The normalised shape of a recorded agent session, whatever format it was recorded in.

* One :class:`Turn` per recorded model answer. ``results`` are the tool outputs that followed it,
  in file order; ``user_after`` any further model-visible user text before the next answer.
* Exit codes: ``<returncode>N</returncode>`` at the start of the output (after an optional
  ``<exception>…</exception>``); for claude-code ``Exit code N`` at the start of an error result,
  else 1 for ``is_error: true``, 0 for ``is_error: false`` and ``None`` when not stated.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, Field

from workflows.context import ToolCall

FORMAT_MSWEA_1 = "mini-swe-agent-1"
FORMAT_MSWEA_1_1 = "mini-swe-agent-1.1"
FORMAT_CLAUDE_CODE = "claude-code"
FORMAT_SYNTHETIC = "synthetic"
FORMAT_NORMALISED = "context-lanes-trajectory"  # a Trajectory dumped by dump_trajectory

_RETURNCODE_RE = re.compile(
    r"\A\s*(?:<exception>.*?</exception>\s*)?<returncode>(-?\d+)</returncode>", re.DOTALL
)


class ToolResultRec(BaseModel):
    tool_call_id: str
    tool_name: str
    output: str
    exit_code: int | None
    render_role: str  # "tool" or "user"


class Turn(BaseModel):
    """One recorded model call's answer and what followed it."""

    assistant_text: str
    tool_calls: list[ToolCall]  # arguments: JSON text
    results: list[ToolResultRec]  # the tool outputs that came back after this turn, in order
    user_after: list[str] = Field(default_factory=list)  # further user text after the results


class Trajectory(BaseModel):
    id: str  # stable id from path (relative file name without .gz/.json/.jsonl)
    source_format: str  # "mini-swe-agent-1" | "mini-swe-agent-1.1" | "claude-code" | "synthetic"
    system: str | None
    task: str  # the first user message
    turns: list[Turn]
    tool_protocol: str  # "tool_calls" or "text" (observations arrive as user messages)


class TrajectoryError(ValueError):
    """A trajectory file could not be read; the message names the file and the problem."""

    def __init__(self, source: str | os.PathLike[str], reason: str) -> None:
        self.source = str(source)
        self.reason = reason
        super().__init__(f"{self.source}: {reason}")


def recorded_outputs(traj: Trajectory) -> dict[str, ToolResultRec]:
    """Recorded tool output by tool call id, for a replay tool executor."""
    out: dict[str, ToolResultRec] = {}
    for turn in traj.turns:
        for res in turn.results:
            out.setdefault(res.tool_call_id, res)
    return out


# --- parsing helpers shared by the format readers --------------------------------------------

def text_of(content: Any, where: str, source: str) -> str:
    """Plain text of a message ``content`` (string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                btype = block.get("type")
                if btype == "text" or (btype is None and "text" in block):
                    parts.append(str(block.get("text", "")))
                elif btype in ("image", "image_url"):
                    parts.append("[image]")
                elif btype == "tool_result":
                    parts.append(text_of(block.get("content"), where, source))
            # other block kinds carry nothing model-visible as text
        return "\n\n".join(parts)
    raise TrajectoryError(source, f"{where}: content is {type(content).__name__}, not text")


def require(obj: Any, key: str, where: str, source: str) -> Any:
    if not isinstance(obj, dict):
        raise TrajectoryError(source, f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise TrajectoryError(source, f"{where}: missing field {key!r}")
    return obj[key]


def parse_returncode(output: str) -> int | None:
    m = _RETURNCODE_RE.match(output)
    return int(m.group(1)) if m else None
