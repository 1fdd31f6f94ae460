"""mini-swe-agent recordings, in both of its formats.

* ``mini-swe-agent-1``   – ``{instance_id, info, messages}``; linear ``{role, content}`` list; the
  action is the single ```` ```bash ```` block in the assistant text (mini-swe-agent's own regex);
  each observation is the following ``user`` message. Text protocol. An assistant message with
  exactly one bash block gets a synthetic tool call ``call-<turn index>`` (tool ``bash``,
  arguments ``{"command": <block, stripped>}``) and the next ``user`` message, byte for byte, as
  its result (``render_role="user"``). A message with zero or several blocks was rejected by
  mini-swe-agent (format error, nothing ran): that turn has no tool call and the format-error
  message lands in ``user_after``.
* ``mini-swe-agent-1.1`` – OpenAI chat layout; assistant ``tool_calls`` (function ``bash``),
  ``role: "tool"`` results, final ``role: "exit"`` message. Tool-calls protocol. When the run ends
  (``role: "exit"``) while tool calls of the last turn have no ``tool`` message – the submit
  command, whose output mini-swe-agent turns into the exit message – those calls get the exit
  message content as their output. This matches mini-swe-agent-1, where the same submission text
  is recorded as the last observation, and keeps "every tool call has exactly one result" true
  for every file. ``reasoning_content`` and ``extra`` are dropped.
"""

from __future__ import annotations

import json
import re

from recordings.model import (
    FORMAT_MSWEA_1,
    FORMAT_MSWEA_1_1,
    ToolResultRec,
    Trajectory,
    TrajectoryError,
    Turn,
    parse_returncode,
    require,
    text_of,
)
from workflows.context import ToolCall

# mini-swe-agent's own action regex (``AgentConfig.action_regex``), used with re.DOTALL.
_BASH_BLOCK_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


def _messages(obj: dict, source: str) -> list[dict]:
    messages = require(obj, "messages", "top level", source)
    if not isinstance(messages, list):
        raise TrajectoryError(source, "field 'messages' is not a list")
    for i, m in enumerate(messages):
        require(m, "role", f"message {i}", source)
        if m["role"] != "exit" and m["role"] != "assistant":
            require(m, "content", f"message {i} ({m['role']})", source)
    return messages


def _system_and_task(messages: list[dict], source: str) -> tuple[str | None, str, int]:
    """Return (system, task, index of the first message after the task)."""
    system: str | None = None
    i = 0
    if messages and messages[0]["role"] == "system":
        system = text_of(messages[0]["content"], "message 0", source)
        i = 1
    while i < len(messages) and messages[i]["role"] != "user":
        if messages[i]["role"] in ("assistant", "tool"):
            raise TrajectoryError(source, f"message {i}: {messages[i]['role']} before the task")
        i += 1
    if i >= len(messages):
        raise TrajectoryError(source, "no user message (task) found")
    task = text_of(messages[i]["content"], f"message {i}", source)
    return system, task, i + 1


def parse_mswea_1(obj: dict, traj_id: str, source: str) -> Trajectory:
    messages = _messages(obj, source)
    system, task, start = _system_and_task(messages, source)
    turns: list[Turn] = []
    for i in range(start, len(messages)):
        m = messages[i]
        role = m["role"]
        where = f"message {i} ({role})"
        if role == "assistant":
            text = text_of(m.get("content"), where, source)
            actions = _BASH_BLOCK_RE.findall(text)
            calls: list[ToolCall] = []
            if len(actions) == 1:  # mini-swe-agent runs the action only when there is exactly one
                calls.append(ToolCall(
                    id=f"call-{len(turns)}",
                    name="bash",
                    arguments=json.dumps({"command": actions[0].strip()}, ensure_ascii=False),
                ))
            turns.append(Turn(assistant_text=text, tool_calls=calls, results=[]))
        elif role == "user":
            content = text_of(m["content"], where, source)
            if not turns:
                task = f"{task}\n\n{content}"
                continue
            turn = turns[-1]
            if turn.tool_calls and not turn.results and not turn.user_after:
                turn.results.append(ToolResultRec(
                    tool_call_id=turn.tool_calls[0].id,
                    tool_name="bash",
                    output=content,
                    exit_code=parse_returncode(content),
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


def parse_mswea_1_1(obj: dict, traj_id: str, source: str) -> Trajectory:
    messages = _messages(obj, source)
    system, task, start = _system_and_task(messages, source)
    turns: list[Turn] = []
    owner: dict[str, tuple[Turn, str]] = {}
    for i in range(start, len(messages)):
        m = messages[i]
        role = m["role"]
        where = f"message {i} ({role})"
        if role == "assistant":
            calls: list[ToolCall] = []
            for j, tc in enumerate(m.get("tool_calls") or []):
                tc_where = f"{where} tool_calls[{j}]"
                fn = require(tc, "function", tc_where, source)
                name = require(fn, "name", tc_where + ".function", source)
                args = fn.get("arguments", "")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
                call = ToolCall(id=str(require(tc, "id", tc_where, source)), name=str(name),
                                   arguments=args)
                calls.append(call)
            turn = Turn(assistant_text=text_of(m.get("content"), where, source),
                        tool_calls=calls, results=[])
            for call in calls:
                owner[call.id] = (turn, call.name)
            turns.append(turn)
        elif role == "tool":
            call_id = str(require(m, "tool_call_id", where, source))
            if call_id not in owner:
                raise TrajectoryError(source, f"{where}: tool_call_id {call_id!r} matches no call")
            turn, name = owner[call_id]
            output = text_of(m["content"], where, source)
            turn.results.append(ToolResultRec(tool_call_id=call_id, tool_name=name, output=output,
                                              exit_code=parse_returncode(output),
                                              render_role="tool"))
        elif role == "user":
            content = text_of(m["content"], where, source)
            if turns:
                turns[-1].user_after.append(content)
            else:
                task = f"{task}\n\n{content}"
        elif role == "exit":
            # The submit command's output becomes the exit message; give it to unanswered calls.
            if turns:
                last = turns[-1]
                answered = {r.tool_call_id for r in last.results}
                content = text_of(m.get("content"), where, source)
                for call in last.tool_calls:
                    if call.id not in answered:
                        last.results.append(ToolResultRec(
                            tool_call_id=call.id, tool_name=call.name, output=content,
                            exit_code=parse_returncode(content), render_role="tool"))
            break
        elif role == "system":
            continue
        else:
            raise TrajectoryError(source, f"{where}: unexpected role {role!r} in mini-swe-agent-1.1")
    return Trajectory(id=traj_id, source_format=FORMAT_MSWEA_1_1, system=system, task=task,
                      turns=turns, tool_protocol="tool_calls")
