"""One item under one projection: its text and its chat message.

Shared by the request renderer (``render.py``), the token counter (which measures each
projection of an item with ``item_message``) and the activities, so a projection costs
exactly what the caller measured.
"""

from __future__ import annotations

import json

from .content import ItemContent, ToolCall
from .items import Item, Projection, is_tool_output
from .observations import RecallStyle, observation_address, range_address, recall_hint
from .preview import LINES_INTRO, lines_room, omitted_lines
from .text import REFERENCE_EXCERPT_CHARS, SOURCE_HEAD_MAX

# Longest tool-call argument string kept verbatim per projection of an assistant message.
_ARGUMENT_LIMITS = {Projection.REFERENCE: 400, Projection.MINIMAL_REFERENCE: 120}
_MIN_ARGUMENT_SHARE = 200
# plain constants: an enum member read as a class attribute costs a lookup through the enum
# machinery, and these run for every message of a request
_FULL, _COMPACT, _REFERENCE, _MINIMAL_REFERENCE, _OMITTED = (
    Projection.FULL, Projection.COMPACT, Projection.REFERENCE, Projection.MINIMAL_REFERENCE, Projection.OMITTED)


def projection_text(item: Item, content: ItemContent, projection: Projection, preview_chars: int,
                    recall: RecallStyle = "tool") -> str:
    """The text of ``item`` under ``projection``; bounded for every projection but FULL.
    ``recall``: how placeholders say to read the omitted text back."""
    text = content.text
    if projection == _FULL:
        return text
    if projection == _OMITTED:
        return ""
    address = observation_address(item.observation_id) if item.observation_id else None
    if projection == _COMPACT:
        return _head_tail(text, preview_chars, item.observation_id, recall, item.preview_lines)
    if address is None:
        return _without_address(item, text, projection)
    if projection == _MINIMAL_REFERENCE:
        return f"Full output: {address}"
    if is_tool_output(item):
        return _output_reference(item, content, address)
    return _source_reference(text, address, preview_chars, recall)


def _output_reference(item: Item, content: ItemContent, address: str) -> str:
    """The reference projection of an addressed tool output (what pass 1 makes of it)."""
    return f"Earlier {item.tool_name or content.tool_name or 'tool'} output was compacted.\nFull output: {address}"


def _head_tail(text: str, preview_chars: int, obs_id: str | None, recall: RecallStyle, lines: bool = False) -> str:
    """Beginning and end (together at most ``preview_chars``) with the omitted range between;
    ``lines`` (Item.preview_lines): a quarter each, and lines of the omitted part in the marker."""
    if len(text) <= preview_chars:
        return text
    if lines:
        head_n, tail_n, room = lines_room(preview_chars)
    else:
        head_n, room = preview_chars // 2, 0
        tail_n = preview_chars - head_n
    omitted = len(text) - head_n - tail_n
    if obs_id is None:
        marker = f"[... {omitted} characters omitted ...]"
    else:
        address = observation_address(obs_id)
        example = range_address(obs_id, head_n, min(omitted, 16000))
        marker = (
            f"[... {omitted} characters omitted (offset {head_n} to {head_n + omitted}). "
            f"Full output: {address} — {recall_hint(recall)}, e.g. {example} ...]"
        )
    shown = omitted_lines(text, head_n, head_n + omitted, room)
    if shown:
        marker = f"{marker[:-1]}{LINES_INTRO}" + "\n".join(shown) + "\n]"
    tail = text[len(text) - tail_n:] if tail_n else ""
    return f"{text[:head_n]}\n{marker}\n{tail}"


def _source_reference(text: str, address: str, preview_chars: int, recall: RecallStyle) -> str:
    """Oversized input: a bounded, authoritative pointer to the exact stored text, with its
    beginning and its end."""
    shown = min(SOURCE_HEAD_MAX, preview_chars // 2)
    head_n = shown - shown // 4
    tail_n = min(shown // 4, max(0, len(text) - head_n))
    head, tail = text[:head_n], text[len(text) - tail_n:] if tail_n else ""
    return (
        f"Authoritative source: {address} ({len(text)} characters, stored exactly; only the "
        f"beginning and the end are shown).\nBefore relying on any other part, {recall_hint(recall)}, e.g. "
        f"{address}?offset={len(head)}&limit=16000\nBeginning:\n{head}\nEnd (from offset {len(text) - tail_n}):\n{tail}"
    )


def _without_address(item: Item, text: str, projection: Projection) -> str:
    if projection == Projection.REFERENCE:
        if len(text) <= REFERENCE_EXCERPT_CHARS:
            return text
        omitted = len(text) - REFERENCE_EXCERPT_CHARS
        return f"{text[:REFERENCE_EXCERPT_CHARS]} [... {omitted} characters omitted]"
    # MINIMAL_REFERENCE: an assistant turn that made calls keeps only the calls
    if item.role == "assistant" and item.tool_call_ids:
        return ""
    return f"[earlier {item.kind} message minimised]"


def _bounded_arguments(arguments: str, projection: Projection, preview_chars: int) -> str:
    """Tool-call arguments bounded by projection; a cut is still valid JSON."""
    limit = _ARGUMENT_LIMITS.get(projection, preview_chars)
    if projection == _FULL or len(arguments) <= limit:
        return arguments
    head = arguments[: max(0, limit - 60)]
    return json.dumps({"truncated_arguments": head, "omitted_chars": len(arguments) - len(head)}, ensure_ascii=False)


def _tool_call_dict(call: ToolCall, projection: Projection, preview_chars: int) -> dict:
    arguments = _bounded_arguments(call.arguments, projection, preview_chars)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def item_message(
    item: Item,
    content: ItemContent,
    projection: Projection,
    preview_chars: int,
    keep_calls: list[ToolCall] | None = None,
    recall: RecallStyle = "tool",
) -> dict | None:
    """One item as one chat message (None when it would be empty).

    The token counter renders each projection of an item with this function (all its
    calls kept), so measured costs match what ``render_messages`` sends.
    """
    text = projection_text(item, content, projection, preview_chars, recall)
    if item.role == "assistant":
        calls = content.tool_calls if keep_calls is None else keep_calls
        message: dict
        if not calls:
            if not text:
                return None
            message = {"role": "assistant", "content": text}
        else:
            # under COMPACT the arguments of all the calls share the preview (a runaway answer may
            # make many calls); the share counts every call, so a subset never renders larger
            share = preview_chars // max(1, len(content.tool_calls))
            tool_calls = [_tool_call_dict(c, projection, max(share, _MIN_ARGUMENT_SHARE)) for c in calls]
            message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
        if projection == _FULL and content.reasoning_content:
            # passed back in the form it came in, while the turn is kept whole
            message["reasoning_content"] = content.reasoning_content
        return message
    if item.role == "tool":
        call_id = content.tool_call_id or (item.tool_call_ids[0] if item.tool_call_ids else None)
        return with_images({"role": "tool", "tool_call_id": call_id, "content": text}, content, projection)
    if not text and not content.images:
        return None
    return with_images({"role": item.role, "content": text}, content, projection)


def with_images(message: dict, content: ItemContent, projection: Projection) -> dict:
    """The message with its images beside the text while it is kept whole (``images``: each
    request format places them, ``count_message_tokens`` charges them); a bounded projection
    says what it leaves out (images are not recallable as text)."""
    if not content.images:
        return message
    if projection == _FULL:
        message["images"] = content.images
    else:
        count = len(content.images)
        note = f"[{count} image{'s' if count > 1 else ''} not shown: sent only while this message is kept whole]"
        message["content"] = f"{message['content']}\n{note}" if message["content"] else note
    return message
