"""Claude Code session recordings (JSONL, one event per line). Tool-calls protocol.

Sidechain events, compact-summary user messages (Claude Code's own compaction),
``system``/``progress``/``summary``/snapshot/queue events and synthetic API-error messages are
skipped. ``isMeta`` user messages (expanded skill bodies, local-command caveats) *are* sent to
the model by Claude Code, so they are kept as user text. Assistant events sharing one
``message.id`` are one API message and are merged into one turn, even when tool results were
logged between them (Claude Code runs tools while the answer is still streaming). Thinking blocks
and whitespace-only text blocks are dropped; remaining text blocks are joined with a blank
line. Tool arguments are ``json.dumps(input, ensure_ascii=False)``. A tool result given as a list
of blocks is rendered as its text blocks joined with a blank line (``[image]`` for images).
User text that arrives before the first model answer (e.g. an expanded slash command) is
appended to ``task`` with a blank line.
"""

from __future__ import annotations

import json
import re
from typing import Any

from recordings.model import FORMAT_CLAUDE_CODE, ToolResultRec, Trajectory, TrajectoryError, Turn, require, text_of
from workflows.context import ToolCall

_CC_EXIT_RE = re.compile(r"\A(?:Error: )?Exit code (-?\d+)")
_CC_EVENT_TYPES = {"user", "assistant", "system", "summary", "progress", "file-history-snapshot",
                   "queue-operation", "attachment", "result"}


def is_claude_event(e: Any) -> bool:
    return (
        isinstance(e, dict)
        and e.get("type") in _CC_EVENT_TYPES
        and ("message" in e or "sessionId" in e or "uuid" in e or "leafUuid" in e)
    )


def _cc_exit_code(output: str, is_error: Any) -> int | None:
    if is_error is True:
        m = _CC_EXIT_RE.match(output)
        return int(m.group(1)) if m else 1
    if is_error is False:
        return 0
    return None


def parse_claude_code(events: list[Any], traj_id: str, source: str) -> Trajectory:
    task: str | None = None
    turns: list[Turn] = []
    turn_msg_ids: list[str] = []
    owner: dict[str, tuple[Turn, str]] = {}
    for lineno, e in enumerate(events, start=1):
        where = f"line {lineno}"
        if not isinstance(e, dict):
            raise TrajectoryError(source, f"{where}: event is {type(e).__name__}, not an object")
        etype = e.get("type")
        if etype not in ("user", "assistant") or e.get("isSidechain"):
            continue
        msg = require(e, "message", f"{where} ({etype})", source)
        if not isinstance(msg, dict):
            raise TrajectoryError(source, f"{where}: 'message' is not an object")
        content = require(msg, "content", f"{where} ({etype}) message", source)
        if etype == "assistant":
            if e.get("isApiErrorMessage") or msg.get("model") == "<synthetic>":
                continue  # Claude Code's own error placeholder, not a model answer
            msg_id = str(msg.get("id") or e.get("uuid") or f"line-{lineno}")
            if turns and turn_msg_ids[-1] == msg_id:
                turn = turns[-1]
            else:
                turn = Turn(assistant_text="", tool_calls=[], results=[])
                turns.append(turn)
                turn_msg_ids.append(msg_id)
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                raise TrajectoryError(source, f"{where}: assistant content is not a list")
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text":
                    text = str(block.get("text", ""))
                    if text.strip():
                        turn.assistant_text = (
                            f"{turn.assistant_text}\n\n{text}" if turn.assistant_text else text)
                elif btype == "tool_use":
                    call = ToolCall(
                        id=str(require(block, "id", f"{where} tool_use", source)),
                        name=str(require(block, "name", f"{where} tool_use", source)),
                        arguments=json.dumps(block.get("input", {}), ensure_ascii=False),
                    )
                    turn.tool_calls.append(call)
                    owner[call.id] = (turn, call.name)
                # thinking / redacted_thinking / server tool blocks: not replayed as text
            continue
        # user event
        if e.get("isCompactSummary") or e.get("isVisibleInTranscriptOnly"):
            continue  # Claude Code's own compaction summary, not the agent's history
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for k, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    bwhere = f"{where} content[{k}]"
                    call_id = str(require(block, "tool_use_id", bwhere, source))
                    output = text_of(block.get("content"), f"{bwhere} tool_result", source)
                    if call_id in owner:
                        turn, name = owner[call_id]
                    elif turns:
                        turn, name = turns[-1], "unknown"
                    else:
                        raise TrajectoryError(source, f"{bwhere}: tool_result before any tool_use")
                    turn.results.append(ToolResultRec(
                        tool_call_id=call_id, tool_name=name, output=output,
                        exit_code=_cc_exit_code(output, block.get("is_error")),
                        render_role="tool"))
                else:
                    text = text_of([block], f"{where} content[{k}]", source)
                    if text:
                        texts.append(text)
        else:
            raise TrajectoryError(source, f"{where}: user content is {type(content).__name__}")
        if not texts:
            continue
        text = "\n\n".join(texts)
        if not turns:
            task = text if task is None else f"{task}\n\n{text}"
        else:
            turns[-1].user_after.append(text)
    if task is None:
        raise TrajectoryError(source, "no user message (task) found in the main chain")
    return Trajectory(id=traj_id, source_format=FORMAT_CLAUDE_CODE, system=None, task=task,
                      turns=turns, tool_protocol="tool_calls")
