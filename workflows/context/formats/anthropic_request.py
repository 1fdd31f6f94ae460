"""A rendered request as an Anthropic Messages request: ``system``, ``messages``, ``tools``,
with prompt-cache breakpoints.

Built from the chat rendering, so the pairing invariant is the chat request's: every
``tool_use`` block is answered by its ``tool_result`` in the next user message, and no
result is sent without its call. Anthropic wants alternating turns, so consecutive
messages of one role are merged into one message (a turn's tool results come first in the
user message that follows it, as the chat rendering already orders them).

- Every system message becomes a ``system`` text block, in order: the Messages API has no
  system turns, and the texts the engine writes in the middle of a request (the checkpoint
  that opens the history, the memory, episode markers) must not read as the user's words.
- An assistant answer is a text block and one ``tool_use`` block per call, its ``input``
  the parsed arguments (arguments that are not a JSON object are passed as
  ``{"arguments": <the raw string>}``, so nothing is lost).
- A tool message is a ``tool_result`` block; an empty text block is never sent. Images kept
  with a message (full fidelity) are ``image`` blocks after its text, in a tool result too.
- Reasoning is not sent: Anthropic's thinking blocks carry its own signatures, which no
  other provider's reasoning has.
- When the first turn is the assistant's (history before it was compacted away), a user
  turn saying so is put first, since the Messages API starts with a user turn.

Cache breakpoints (``cache_control: {"type": "ephemeral"}``, at most 4 per request), each on
the last content block of a chat message, so the prefix up to that message is cached:

1. the end of the stable segment (``stable_prefix_messages``: the leading messages that stay
   byte-identical until the next compaction; on the last system block when it ends there);
2. the end of the unchanged history prefix: the last message before the newest turn, the
   newest turn being the last assistant answer and everything after it. Between compactions
   the previous request is exactly this prefix (the agent sent it, appended the answer and
   what followed), so this breakpoint reads what the previous request's breakpoint 3 wrote,
   even when the newest turn spans more than the 20 blocks Anthropic looks back;
3. the end of the request, so that the next request can read all of it.

Breakpoints that fall on the same block are one; none is set in an empty request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .images import anthropic_image

CACHE_CONTROL = {"type": "ephemeral"}
FIRST_TURN_NOTE = "[The conversation before this point was compacted.]"


@dataclass
class AnthropicRequest:
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    breakpoints: list[int] = field(default_factory=list)  # chat message indices whose end is cached


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message["role"]
    text = message.get("content")
    images = [anthropic_image(image) for image in message.get("images") or ()]
    if role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
        if images:
            block["content"] = [*([{"type": "text", "text": str(text)}] if text else []), *images]
        elif text:
            block["content"] = str(text)
        return [block]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": str(text)}] if text else []
    blocks += images
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": tool_input(fn["arguments"])})
    return blocks


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's ``input``: its arguments when they are a JSON object, else the raw string kept."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


def breakpoint_messages(messages: list[dict[str, Any]], stable_prefix_messages: int) -> list[int]:
    """The chat message indices that end a cached prefix (see the module docstring), in order."""
    if not messages:
        return []
    points = set()
    if stable_prefix_messages > 0:
        points.add(min(stable_prefix_messages, len(messages)) - 1)
    last_answer = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last_answer is not None and last_answer > 0:
        points.add(last_answer - 1)
    points.add(len(messages) - 1)
    return sorted(points)


def anthropic_request(messages: list[dict[str, Any]], stable_prefix_messages: int) -> AnthropicRequest:
    """The Messages request for chat ``messages`` (as rendered, pairing invariant included)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    ends: dict[int, dict[str, Any]] = {}  # chat message index -> the last block it became
    for index, message in enumerate(messages):
        if message["role"] == "system":
            if message.get("content"):
                system.append({"type": "text", "text": str(message["content"])})
                ends[index] = system[-1]
            continue
        blocks = _blocks(message)
        if not blocks:
            continue
        role = "assistant" if message["role"] == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
        ends[index] = blocks[-1]
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": FIRST_TURN_NOTE}]})
    cached = []
    for index in breakpoint_messages(messages, stable_prefix_messages):
        block = _nearest_end(ends, index)
        if block is not None and "cache_control" not in block:
            block["cache_control"] = dict(CACHE_CONTROL)
            cached.append(index)
    return AnthropicRequest(system=system, messages=turns, breakpoints=cached)


def _nearest_end(ends: dict[int, dict[str, Any]], index: int) -> dict[str, Any] | None:
    """The last block of message ``index``, or of the nearest message before it that made one."""
    for i in range(index, -1, -1):
        if i in ends:
            return ends[i]
    return None


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat function tools as Anthropic tools: ``{name, description, input_schema}``."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        entry: dict[str, Any] = {"name": fn["name"]}
        if "description" in fn:
            entry["description"] = fn["description"]
        entry["input_schema"] = fn.get("parameters", {"type": "object", "properties": {}})
        out.append(entry)
    return out
