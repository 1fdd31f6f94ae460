"""A rendered request as a Responses API request: ``instructions`` and ``input`` items.

Built from the chat rendering (:func:`workflows.context.render.render_turns`), so the plan,
the projections and the pairing invariant are the chat request's: every ``function_call``
sent has its ``function_call_output`` right after it, and no output is sent without its call.

- The leading system messages (the session's system prompt) become ``instructions``; a later
  system message stays an input message of role system.
- An assistant turn kept at full fidelity that came in as Responses items is passed back as
  those items, verbatim: its reasoning items (ids, ``encrypted_content``, summaries) right
  before the message and calls they accompany, its calls limited to those the chat rendering
  keeps (and its reasoning to what accompanies a kept message or call). A turn that is
  compacted (any other projection) or omitted is rendered from its stored text without ids
  and drops its reasoning: a reasoning item must precede the very output it produced, which
  a compacted turn no longer is.
- Chat-style ``reasoning_content`` has no Responses form and is not sent in this format.
"""

from __future__ import annotations

from typing import Any

from ..content import ItemContent
from ..items import Projection
from ..render import Rendered
from .images import responses_image
from .responses_input import item_type


def responses_input(turns: list[Rendered], contents: dict[str, ItemContent]) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items) for a rendered request; instructions None without a system prompt."""
    lead = 0
    while lead < len(turns) and turns[lead].message["role"] == "system":
        lead += 1
    instructions = "\n\n".join(str(t.message.get("content") or "") for t in turns[:lead]) or None
    items: list[dict[str, Any]] = []
    for turn in turns[lead:]:
        items.extend(turn_items(turn, contents[turn.item_id]))
    return instructions, items


def turn_items(turn: Rendered, content: ItemContent) -> list[dict[str, Any]]:
    """The input items one chat message becomes."""
    message = turn.message
    role = message["role"]
    if role == "assistant":
        kept = [c["id"] for c in message.get("tool_calls") or ()]
        if turn.projection == Projection.FULL and content.responses_items:
            return _verbatim(content.responses_items, set(kept))
        items: list[dict[str, Any]] = []
        if message.get("content"):
            items.append(assistant_message(str(message["content"])))
        for call in message.get("tool_calls") or ():
            fn = call["function"]
            items.append({"type": "function_call", "call_id": call["id"], "name": fn["name"],
                          "arguments": fn["arguments"]})
        return items
    images = [responses_image(image) for image in message.get("images") or ()]
    if role == "tool":
        output: str | list[dict[str, Any]] = str(message.get("content") or "")
        if images:  # a function call's output may be a list of input parts
            output = [*([{"type": "input_text", "text": output}] if output else []), *images]
        return [{"type": "function_call_output", "call_id": message["tool_call_id"], "output": output}]
    text = [{"type": "input_text", "text": str(message.get("content") or "")}] if message.get("content") or not images else []
    return [{"type": "message", "role": role, "content": [*text, *images]}]


def assistant_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text,
                                                                  "annotations": []}]}


def _verbatim(source: list[dict[str, Any]], kept_calls: set[str]) -> list[dict[str, Any]]:
    """A kept turn's own items: everything but the calls the chat rendering dropped and the
    reasoning that accompanied only those. (Reasoning precedes the output it produced: a
    dropped call's reasoning would dangle at the end, or precede another output, which the
    Responses API refuses.)"""
    kept: list[dict[str, Any]] = []
    accompanies = False  # the nearest output after this point is kept
    for item in reversed(source):
        kind = item_type(item)
        if kind != "reasoning":
            accompanies = kind != "function_call" or str(item.get("call_id")) in kept_calls
        if accompanies:
            kept.append(item)
    kept.reverse()
    return kept


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat function tools as Responses function tools (flat). ``strict`` is explicit: the
    Responses API defaults it to true, which a schema not written for strict mode fails."""
    flat = []
    for tool in tools:
        fn = tool.get("function", tool)
        entry: dict[str, Any] = {"type": "function", "name": fn["name"]}
        if "description" in fn:
            entry["description"] = fn["description"]
        entry["parameters"] = fn.get("parameters", {"type": "object", "properties": {}})
        entry["strict"] = bool(fn.get("strict", False))
        flat.append(entry)
    return flat
