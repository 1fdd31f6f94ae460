"""Responses API input items -> the items a session stores.

A Responses conversation is a flat list of items; a session stores turns. Every maximal run
of assistant-side items (``reasoning``, an assistant ``message``, ``function_call``) becomes
one assistant item: its text the messages' text, its tool calls the function calls, and the
run itself kept verbatim (``responses_items``) so that a kept turn is passed back exactly as
it came, reasoning first. A reasoning item thus belongs to the turn it precedes or
accompanies. Every other item becomes one item of its own: ``message`` of role user ->
user, system or developer -> system, ``function_call_output`` -> tool_result.

Items are dicts already checked against the API's schema; what cannot be stored as a turn
(an image, an unknown item type) raises :class:`FormatError` naming the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..content import ToolCall

ASSISTANT_SIDE = frozenset({"reasoning", "function_call"})
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


class FormatError(ValueError):
    """An input item that cannot be stored; ``index`` is its position in the list."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"responses_items[{index}]: {problem}")
        self.index = index


@dataclass
class ConvertedItem:
    """One item to store, made from ``source`` (the input items, verbatim)."""

    kind: str  # user / system / assistant / tool_result
    first: int  # index of its first input item
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    source: list[dict[str, Any]] = field(default_factory=list)


def item_type(item: dict[str, Any]) -> str:
    """An item's type; the easy input message ``{role, content}`` has none and is a message."""
    return str(item.get("type") or "message")


def _is_assistant_side(item: dict[str, Any]) -> bool:
    kind = item_type(item)
    return kind in ASSISTANT_SIDE or (kind == "message" and item.get("role") == "assistant")


def content_text(index: int, content: Any) -> str:
    """A message's or output's text: a string, or its text parts joined (a refusal counts as text)."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or ():
        kind = part.get("type")
        if kind in TEXT_PARTS:
            parts.append(str(part.get("text", "")))
        elif kind == "refusal":
            parts.append(str(part.get("refusal", "")))
        else:
            raise FormatError(index, f"content part of type {kind!r} is not supported (text parts only)")
    return "".join(parts)


def from_responses_items(items: list[dict[str, Any]]) -> list[ConvertedItem]:
    """The items to store for ``items``, in order."""
    converted: list[ConvertedItem] = []
    names: dict[str, str] = {}  # call id -> tool name, for the outputs that answer them
    turn: ConvertedItem | None = None  # the assistant turn being gathered
    texts: list[str] = []
    for index, item in enumerate(items):
        kind = item_type(item)
        if _is_assistant_side(item):
            if turn is None:
                turn, texts = ConvertedItem(kind="assistant", first=index), []
                converted.append(turn)
            turn.source.append(item)
            if kind == "message":
                texts.append(content_text(index, item.get("content")))
                turn.text = "\n\n".join(t for t in texts if t)
            elif kind == "function_call":
                call = ToolCall(id=str(item["call_id"]), name=str(item["name"]),
                                arguments=str(item.get("arguments") or "{}"))
                turn.tool_calls.append(call)
                names[call.id] = call.name
            continue
        turn = None
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise FormatError(index, f"a message of role {role!r} cannot be stored")
            converted.append(ConvertedItem(kind="user" if role == "user" else "system", first=index,
                                           text=content_text(index, item.get("content")), source=[item]))
        elif kind == "function_call_output":
            call_id = str(item["call_id"])
            converted.append(ConvertedItem(kind="tool_result", first=index, text=content_text(index, item.get("output")),
                                           tool_call_id=call_id, tool_name=names.get(call_id), source=[item]))
        else:
            raise FormatError(index, f"items of type {kind!r} are not supported (message, reasoning, "
                                     "function_call and function_call_output are)")
    return converted
