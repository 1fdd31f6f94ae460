"""Load recorded agent sessions (trajectories) into one normalised shape.

Three recorded formats are understood, detected from content (never from the file name):

* ``mini-swe-agent-1``   – ``{instance_id, info, messages}``; linear ``{role, content}`` list; the
  action is the single ```` ```bash ```` block in the assistant text (mini-swe-agent's own regex);
  each observation is the following ``user`` message. Text protocol.
* ``mini-swe-agent-1.1`` – OpenAI chat layout; assistant ``tool_calls`` (function ``bash``),
  ``role: "tool"`` results, final ``role: "exit"`` message. Tool-calls protocol.
* ``claude-code``        – Claude Code session JSONL (one event per line). Tool-calls protocol.

Files may be gzip-compressed or plain (detected by the gzip magic bytes).

Normalisation rules (decisions worth knowing; see also the tests in ``tests/trajectories``):

* One :class:`Turn` per recorded model answer. ``results`` are the tool outputs that followed it,
  in file order; ``user_after`` any further model-visible user text before the next answer.
* mini-swe-agent-1: an assistant message with exactly one bash block gets a synthetic tool call
  ``call-<turn index>`` (tool ``bash``, arguments ``{"command": <block, stripped>}``) and the next
  ``user`` message, byte for byte, as its result (``render_role="user"``). A message with zero or
  several blocks was rejected by mini-swe-agent (format error, nothing ran): that turn has no tool
  call and the format-error message lands in ``user_after``.
* mini-swe-agent-1.1: when the run ends (``role: "exit"``) while tool calls of the last turn have
  no ``tool`` message – the submit command, whose output mini-swe-agent turns into the exit
  message – those calls get the exit message content as their output. This matches
  mini-swe-agent-1, where the same submission text is recorded as the last observation, and keeps
  "every tool call has exactly one result" true for every file. ``reasoning_content`` and
  ``extra`` are dropped.
* claude-code: sidechain events, compact-summary user messages (Claude Code's own compaction),
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
* Exit codes: ``<returncode>N</returncode>`` at the start of the output (after an optional
  ``<exception>…</exception>``); for claude-code ``Exit code N`` at the start of an error result,
  else 1 for ``is_error: true``, 0 for ``is_error: false`` and ``None`` when not stated.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

__all__ = [
    "DEFAULT_TRAJECTORY_ROOT",
    "FORMAT_CLAUDE_CODE",
    "FORMAT_MSWEA_1",
    "FORMAT_MSWEA_1_1",
    "FORMAT_NORMALISED",
    "FORMAT_SYNTHETIC",
    "ToolCallRec",
    "ToolResultRec",
    "Trajectory",
    "TrajectoryError",
    "Turn",
    "detect_format",
    "dump_trajectory",
    "iter_trajectories",
    "load_trajectory",
    "parse_trajectory",
    "recorded_outputs",
    "trajectory_files",
]

FORMAT_MSWEA_1 = "mini-swe-agent-1"
FORMAT_MSWEA_1_1 = "mini-swe-agent-1.1"
FORMAT_CLAUDE_CODE = "claude-code"
FORMAT_SYNTHETIC = "synthetic"
FORMAT_NORMALISED = "context-lanes-trajectory"  # a Trajectory dumped by dump_trajectory

#: Ids of files under this folder are their path relative to it (``folder/sub/file``), whatever
#: path the caller used to reach them. Override with ``LANES_TRAJECTORY_ROOT``.
def _default_root() -> Path:
    """``LANES_TRAJECTORY_ROOT``, else ``../shared/data/trajectories`` beside the checkout."""
    if configured := os.environ.get("LANES_TRAJECTORY_ROOT"):
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


DEFAULT_TRAJECTORY_ROOT = _default_root()

# mini-swe-agent's own action regex (``AgentConfig.action_regex``), used with re.DOTALL.
_BASH_BLOCK_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE_RE = re.compile(
    r"\A\s*(?:<exception>.*?</exception>\s*)?<returncode>(-?\d+)</returncode>", re.DOTALL
)
_CC_EXIT_RE = re.compile(r"\A(?:Error: )?Exit code (-?\d+)")
_SKIP_NAMES = ("license", "readme", "copying", "notice")


# --------------------------------------------------------------------------- models


class ToolCallRec(BaseModel):
    id: str
    name: str
    arguments: str  # JSON text


class ToolResultRec(BaseModel):
    tool_call_id: str
    tool_name: str
    output: str
    exit_code: int | None
    render_role: str  # "tool" or "user"


class Turn(BaseModel):
    """One recorded model call's answer and what followed it."""

    assistant_text: str
    tool_calls: list[ToolCallRec]
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


# --------------------------------------------------------------------------- helpers


def _text_of(content: Any, where: str, source: str) -> str:
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
                    parts.append(_text_of(block.get("content"), where, source))
            # other block kinds carry nothing model-visible as text
        return "\n\n".join(parts)
    raise TrajectoryError(source, f"{where}: content is {type(content).__name__}, not text")


def _parse_returncode(output: str) -> int | None:
    m = _RETURNCODE_RE.match(output)
    return int(m.group(1)) if m else None


def _require(obj: Any, key: str, where: str, source: str) -> Any:
    if not isinstance(obj, dict):
        raise TrajectoryError(source, f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise TrajectoryError(source, f"{where}: missing field {key!r}")
    return obj[key]


def _strip_suffixes(name: str) -> str:
    for suffix in (".gz",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name


def _trajectory_id(path: Path, root: Path | None, fallback_root: Path | None = None) -> str:
    """Relative to ``root`` if given, else to the default data root, else to ``fallback_root``."""
    resolved = path.resolve()
    for base in (root, DEFAULT_TRAJECTORY_ROOT, fallback_root):
        if base is None:
            continue
        try:
            rel = resolved.relative_to(Path(base).resolve())
        except ValueError:
            continue
        return _strip_suffixes(rel.as_posix())
    return _strip_suffixes(path.name)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrajectoryError(path, f"cannot read file: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TrajectoryError(path, f"truncated or corrupt gzip data ({exc})") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrajectoryError(path, f"not UTF-8 text ({exc})") from exc


def _parse_json_or_jsonl(text: str, source: str) -> Any:
    if not text.strip():
        raise TrajectoryError(source, "empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole_err:
        first_err = whole_err
    # JSON Lines: every non-blank line one JSON value.
    lines = text.splitlines()
    events: list[Any] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if first_err.msg == "Extra data" or events:
                raise TrajectoryError(
                    source, f"invalid JSON on line {lineno}: {exc.msg} (column {exc.colno})"
                ) from exc
            raise TrajectoryError(
                source,
                f"not JSON or JSON Lines: {first_err.msg} "
                f"(line {first_err.lineno}, column {first_err.colno})",
            ) from exc
    return events


# --------------------------------------------------------------------------- detection


_CC_EVENT_TYPES = {"user", "assistant", "system", "summary", "progress", "file-history-snapshot",
                   "queue-operation", "attachment", "result"}


def _is_claude_event(e: Any) -> bool:
    return (
        isinstance(e, dict)
        and e.get("type") in _CC_EVENT_TYPES
        and ("message" in e or "sessionId" in e or "uuid" in e or "leafUuid" in e)
    )


def detect_format(obj: Any, source: str = "<object>") -> str:
    """Return the recorded format of an already parsed file (dict for JSON, list for JSONL).

    Raises :class:`TrajectoryError` when the shape matches none of the known formats.
    """
    if isinstance(obj, dict) and "messages" in obj:
        declared = obj.get("trajectory_format")
        if declared in (FORMAT_MSWEA_1, FORMAT_MSWEA_1_1):
            return declared
        if declared is not None:
            raise TrajectoryError(source, f"unknown trajectory_format {declared!r}")
        messages = obj["messages"]
        if not isinstance(messages, list):
            raise TrajectoryError(source, "field 'messages' is not a list")
        for m in messages:
            if isinstance(m, dict) and (m.get("role") in ("tool", "exit") or m.get("tool_calls")):
                return FORMAT_MSWEA_1_1
        return FORMAT_MSWEA_1
    if _is_claude_event(obj):
        return FORMAT_CLAUDE_CODE
    if isinstance(obj, list) and obj and all(isinstance(e, dict) for e in obj):
        if any(_is_claude_event(e) and "message" in e for e in obj):
            return FORMAT_CLAUDE_CODE
    if isinstance(obj, dict):
        shape = "object with keys " + ", ".join(sorted(map(str, obj))[:8])
    elif isinstance(obj, list):
        shape = f"list of {len(obj)} values"
    else:
        shape = type(obj).__name__
    raise TrajectoryError(
        source,
        f"unknown trajectory format ({shape}); expected mini-swe-agent-1, "
        "mini-swe-agent-1.1 or Claude Code session JSONL",
    )


# --------------------------------------------------------------------------- mini-swe-agent


def _messages(obj: dict, source: str) -> list[dict]:
    messages = _require(obj, "messages", "top level", source)
    if not isinstance(messages, list):
        raise TrajectoryError(source, "field 'messages' is not a list")
    for i, m in enumerate(messages):
        _require(m, "role", f"message {i}", source)
        if m["role"] != "exit" and m["role"] != "assistant":
            _require(m, "content", f"message {i} ({m['role']})", source)
    return messages


def _system_and_task(messages: list[dict], source: str) -> tuple[str | None, str, int]:
    """Return (system, task, index of the first message after the task)."""
    system: str | None = None
    i = 0
    if messages and messages[0]["role"] == "system":
        system = _text_of(messages[0]["content"], "message 0", source)
        i = 1
    while i < len(messages) and messages[i]["role"] != "user":
        if messages[i]["role"] in ("assistant", "tool"):
            raise TrajectoryError(source, f"message {i}: {messages[i]['role']} before the task")
        i += 1
    if i >= len(messages):
        raise TrajectoryError(source, "no user message (task) found")
    task = _text_of(messages[i]["content"], f"message {i}", source)
    return system, task, i + 1


def _parse_mswea_1(obj: dict, traj_id: str, source: str) -> Trajectory:
    messages = _messages(obj, source)
    system, task, start = _system_and_task(messages, source)
    turns: list[Turn] = []
    for i in range(start, len(messages)):
        m = messages[i]
        role = m["role"]
        where = f"message {i} ({role})"
        if role == "assistant":
            text = _text_of(m.get("content"), where, source)
            actions = _BASH_BLOCK_RE.findall(text)
            calls: list[ToolCallRec] = []
            if len(actions) == 1:  # mini-swe-agent runs the action only when there is exactly one
                calls.append(ToolCallRec(
                    id=f"call-{len(turns)}",
                    name="bash",
                    arguments=json.dumps({"command": actions[0].strip()}, ensure_ascii=False),
                ))
            turns.append(Turn(assistant_text=text, tool_calls=calls, results=[]))
        elif role == "user":
            content = _text_of(m["content"], where, source)
            if not turns:
                task = f"{task}\n\n{content}"
                continue
            turn = turns[-1]
            if turn.tool_calls and not turn.results and not turn.user_after:
                turn.results.append(ToolResultRec(
                    tool_call_id=turn.tool_calls[0].id,
                    tool_name="bash",
                    output=content,
                    exit_code=_parse_returncode(content),
                    render_role="user",
                ))
            else:
                turn.user_after.append(content)
        elif role == "system":
            continue  # only the leading system message is meaningful
        else:
            raise TrajectoryError(source, f"{where}: unexpected role {role!r} in mini-swe-agent-1")
    return Trajectory(id=traj_id, source_format=FORMAT_MSWEA_1, system=system, task=task,
                      turns=turns, tool_protocol="text")


def _parse_mswea_1_1(obj: dict, traj_id: str, source: str) -> Trajectory:
    messages = _messages(obj, source)
    system, task, start = _system_and_task(messages, source)
    turns: list[Turn] = []
    owner: dict[str, tuple[Turn, str]] = {}
    for i in range(start, len(messages)):
        m = messages[i]
        role = m["role"]
        where = f"message {i} ({role})"
        if role == "assistant":
            calls: list[ToolCallRec] = []
            for j, tc in enumerate(m.get("tool_calls") or []):
                tc_where = f"{where} tool_calls[{j}]"
                fn = _require(tc, "function", tc_where, source)
                name = _require(fn, "name", tc_where + ".function", source)
                args = fn.get("arguments", "")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
                call = ToolCallRec(id=str(_require(tc, "id", tc_where, source)), name=str(name),
                                   arguments=args)
                calls.append(call)
            turn = Turn(assistant_text=_text_of(m.get("content"), where, source),
                        tool_calls=calls, results=[])
            for call in calls:
                owner[call.id] = (turn, call.name)
            turns.append(turn)
        elif role == "tool":
            call_id = str(_require(m, "tool_call_id", where, source))
            if call_id not in owner:
                raise TrajectoryError(source, f"{where}: tool_call_id {call_id!r} matches no call")
            turn, name = owner[call_id]
            output = _text_of(m["content"], where, source)
            turn.results.append(ToolResultRec(tool_call_id=call_id, tool_name=name, output=output,
                                              exit_code=_parse_returncode(output),
                                              render_role="tool"))
        elif role == "user":
            content = _text_of(m["content"], where, source)
            if turns:
                turns[-1].user_after.append(content)
            else:
                task = f"{task}\n\n{content}"
        elif role == "exit":
            # The submit command's output becomes the exit message; give it to unanswered calls.
            if turns:
                last = turns[-1]
                answered = {r.tool_call_id for r in last.results}
                content = _text_of(m.get("content"), where, source)
                for call in last.tool_calls:
                    if call.id not in answered:
                        last.results.append(ToolResultRec(
                            tool_call_id=call.id, tool_name=call.name, output=content,
                            exit_code=_parse_returncode(content), render_role="tool"))
            break
        elif role == "system":
            continue
        else:
            raise TrajectoryError(source, f"{where}: unexpected role {role!r} in mini-swe-agent-1.1")
    return Trajectory(id=traj_id, source_format=FORMAT_MSWEA_1_1, system=system, task=task,
                      turns=turns, tool_protocol="tool_calls")


# --------------------------------------------------------------------------- claude code


def _cc_exit_code(output: str, is_error: Any) -> int | None:
    if is_error is True:
        m = _CC_EXIT_RE.match(output)
        return int(m.group(1)) if m else 1
    if is_error is False:
        return 0
    return None


def _parse_claude_code(events: list[Any], traj_id: str, source: str) -> Trajectory:
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
        msg = _require(e, "message", f"{where} ({etype})", source)
        if not isinstance(msg, dict):
            raise TrajectoryError(source, f"{where}: 'message' is not an object")
        content = _require(msg, "content", f"{where} ({etype}) message", source)
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
                    call = ToolCallRec(
                        id=str(_require(block, "id", f"{where} tool_use", source)),
                        name=str(_require(block, "name", f"{where} tool_use", source)),
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
                    call_id = str(_require(block, "tool_use_id", bwhere, source))
                    output = _text_of(block.get("content"), f"{bwhere} tool_result", source)
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
                    text = _text_of([block], f"{where} content[{k}]", source)
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


# --------------------------------------------------------------------------- public API


def parse_trajectory(obj: Any, traj_id: str, source: str = "<object>") -> Trajectory:
    """Normalise an already parsed file (dict for JSON, list of events for JSONL)."""
    if isinstance(obj, dict) and obj.get("format") == FORMAT_NORMALISED:
        # our own normalised dump (``dump_trajectory``), e.g. a long synthetic session
        try:
            return Trajectory.model_validate(obj["trajectory"])
        except (KeyError, ValidationError) as error:
            raise TrajectoryError(source, f"not a valid normalised trajectory: {error}") from None
    fmt = detect_format(obj, source)
    if fmt == FORMAT_MSWEA_1:
        return _parse_mswea_1(obj, traj_id, source)
    if fmt == FORMAT_MSWEA_1_1:
        return _parse_mswea_1_1(obj, traj_id, source)
    events = obj if isinstance(obj, list) else [obj]
    return _parse_claude_code(events, traj_id, source)


def dump_trajectory(traj: Trajectory, path: str | os.PathLike[str]) -> Path:
    """Write ``traj`` in the normalised form ``load_trajectory`` reads back unchanged."""
    target = Path(path)
    target.write_text(json.dumps({"format": FORMAT_NORMALISED, "trajectory": traj.model_dump(mode="json")}))
    return target


def load_trajectory(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
                    ) -> Trajectory:
    """Load one trajectory file (gzip or plain; JSON or JSON Lines; format from content).

    The id is the path relative to ``root`` (or to :data:`DEFAULT_TRAJECTORY_ROOT` when the file
    lies under it, else just the file name), without ``.gz`` and ``.json``/``.jsonl``.
    """
    return _load_file(Path(path), Path(root) if root is not None else None, None)


def _load_file(p: Path, root: Path | None, fallback_root: Path | None) -> Trajectory:
    if p.is_dir():
        raise TrajectoryError(p, "is a directory; use iter_trajectories() for folders")
    text = _read_text(p)
    obj = _parse_json_or_jsonl(text, str(p))
    return parse_trajectory(obj, _trajectory_id(p, root, fallback_root), str(p))


def _skip(name: str) -> bool:
    low = name.lower()
    return low.startswith(".") or low.startswith(_SKIP_NAMES)


def trajectory_files(paths: list[str] | list[os.PathLike[str]]) -> list[tuple[Path, Path | None]]:
    """Expand files and folders (recursively, sorted) into ``(file, folder argument)`` pairs.

    Skips hidden files and LICENSE / README / COPYING / NOTICE files.
    """
    out: list[tuple[Path, Path | None]] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(
                (f for f in p.rglob("*")
                 if f.is_file() and not any(_skip(part) for part in f.relative_to(p).parts)),
                key=lambda f: f.relative_to(p).as_posix(),
            )
            pairs = [(f, p) for f in files]
        elif p.exists():
            pairs = [(p, None)]
        else:
            raise TrajectoryError(p, "no such file or directory")
        for f, root in pairs:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append((f, root))
    return out


def iter_trajectories(paths: list[str] | list[os.PathLike[str]]) -> Iterator[Trajectory]:
    """Yield every trajectory under the given files/folders, in a deterministic order.

    Files are taken in argument order; a folder's files sorted by relative path. Ids are as in
    :func:`load_trajectory`, except that a file outside the default data root gets its path
    relative to the folder argument that contained it.
    """
    for f, folder in trajectory_files(paths):
        yield _load_file(f, None, folder)


def recorded_outputs(traj: Trajectory) -> dict[str, ToolResultRec]:
    """Recorded tool output by tool call id, for a replay tool executor."""
    out: dict[str, ToolResultRec] = {}
    for turn in traj.turns:
        for res in turn.results:
            out.setdefault(res.tool_call_id, res)
    return out
