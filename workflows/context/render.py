"""Requests as OpenAI chat messages, rendered identically everywhere.

The model activity, the token counter and the offline replay all call these functions,
so a projection costs exactly what the caller measured and a request is byte-stable:
the same plan and contents always give the same messages. (One item's text and message:
``render_item.py``; consecutive requests of one lane: ``render_cache.py``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .content import ItemContent
from .items import Item, Projection
from .observations import (  # noqa: F401  (parse_observation_uri: re-exported)
    RecallStyle,
    observation_address,
    parse_observation_uri,
)
from .pairing import ALL_CALLS, ORPHAN, PAIRED, Fact, Placement, lay_out
from .render_item import _REFERENCE, _output_reference, item_message, projection_text, with_images

Entries = Sequence[tuple[str, Projection]]  # (item id, projection): what a request is made of


class Rendered(NamedTuple):
    """One chat message of a request and the entry it renders (other formats start from these)."""

    message: dict
    item_id: str
    projection: Projection


def render_messages(
    entries: Entries,
    items: dict[str, Item],
    contents: dict[str, ItemContent],
    preview_chars: int,
    recall: RecallStyle = "tool",
) -> list[dict]:
    """OpenAI chat messages for a request plan's (item id, projection) entries (see render_turns)."""
    ids, projections = _split(entries)
    return render_entries(ids, projections, items, contents, preview_chars, recall)[0]


def render_turns(
    entries: Entries,
    items: dict[str, Item],
    contents: dict[str, ItemContent],
    preview_chars: int,
    recall: RecallStyle = "tool",
) -> list[Rendered]:
    """OpenAI chat messages for a request plan's (item id, projection) entries, each with its
    entry (see ``render_entries``)."""
    ids, projections = _split(entries)
    messages, sources, _, _ = render_entries(ids, projections, items, contents, preview_chars, recall)
    return [Rendered(message, ids[index], projections[index]) for message, index in zip(messages, sources, strict=True)]


def _split(entries: Entries) -> tuple[list[str], list[Projection]]:
    return [item_id for item_id, _ in entries], [projection for _, projection in entries]


class Rendering(NamedTuple):
    """What ``render_entries`` returns: parallel lists, since a compaction re-renders a whole
    request and no per-entry record is built for it."""

    messages: list[dict]
    sources: list[int]  # for each message, the index of the entry it renders
    # Segments: one starts at entry 0 and at every shown assistant entry, where no call awaits
    # its result, so a segment renders the same on its own (render_cache.py). For each, the
    # entry index where it starts and the index of its first message (or, without messages,
    # of the next segment's).
    segment_starts: list[int]
    segment_offsets: list[int]


# item id -> (projection, placement, message): its last rendering (placement: pairing.Layout)
MessageMemo = dict[str, tuple[Projection, Placement, dict | None]]

# item id -> its Fact (pairing.py), made when first met by a renderer that keeps these
# (render_cache.py), with the message of an addressed tool output's reference projection sent
# right after its call, so that a compaction referencing thousands of outputs has them
Facts = dict[str, Fact]


def _facts(item: Item, content: ItemContent, with_reference: bool) -> Fact:
    role = item.role
    if role == "assistant":
        calls = content.tool_calls
        return role, calls[0].id if len(calls) == 1 else None, None
    if role == "tool":
        call_id = content.tool_call_id or (item.tool_call_ids[0] if item.tool_call_ids else None)
        reference = None
        if with_reference and item.observation_id:
            try:
                reference = with_images({"role": "tool", "tool_call_id": call_id, "content": _output_reference(
                    item, content, observation_address(item.observation_id))}, content, _REFERENCE)
            except ValueError:
                pass  # rendered by projection_text when needed, which says what is wrong
        return role, call_id, reference
    return role, None, None


def render_entries(
    ids: Sequence[str],
    projections: Sequence[Projection],
    items: dict[str, Item],
    contents: dict[str, ItemContent],
    preview_chars: int,
    recall: RecallStyle = "tool",
    memo: MessageMemo | None = None,
    facts: Facts | None = None,
) -> Rendering:
    """The chat messages of the entries ``zip(ids, projections)`` (see ``Rendering``), laid
    out by the pairing rule (``pairing.lay_out``).

    ``memo`` (kept by a caller that renders consecutive requests of one lane with the same
    preview and recall style) reuses an item's last message when its projection and placement
    are the same again: an item's content never changes, so neither does that message.
    ``facts`` (kept by the same caller) holds each item's ``Fact``, so that an entry whose
    message is remembered is not read again.
    """
    use_memo = memo is not None
    memory: MessageMemo = {} if memo is None else memo
    known: Facts
    if facts is None:
        known = {item_id: _facts(items[item_id], contents[item_id], False) for item_id in ids}
    else:  # kept facts also hold their reference message
        known = facts
        for item_id in [item_id for item_id in ids if item_id not in facts]:
            facts[item_id] = _facts(items[item_id], contents[item_id], True)

    layout = lay_out(ids, projections, known, lambda item_id: contents[item_id].tool_calls)
    messages: list[dict] = []
    sources: list[int] = []
    starts = layout.segment_starts
    offsets = [0]
    next_start = starts[1] if len(starts) > 1 else -1
    remembered = memory.get
    message: dict | None
    for index, placement in zip(layout.order, layout.placements, strict=True):
        if index == next_start:  # an assistant entry, where a segment starts
            offsets.append(len(messages))
            next_start = starts[len(offsets)] if len(offsets) < len(starts) else -1
        item_id, projection = ids[index], projections[index]
        fact = known[item_id]
        paired = placement is PAIRED and fact[0] == "tool"
        if paired and projection is _REFERENCE and fact[2] is not None:
            message = fact[2]  # the usual tool message after a compaction, made once
        elif use_memo and (last := remembered(item_id)) is not None and (
                last[0] is projection and last[1] == placement):  # members are singletons
            message = last[2]
        else:
            if paired:  # the usual tool message, written out (projection_text's reference case first)
                item, content = items[item_id], contents[item_id]
                text = _output_reference(item, content, observation_address(item.observation_id)) if (
                    projection is _REFERENCE and item.observation_id) else projection_text(
                    item, content, projection, preview_chars, recall)
                message = with_images({"role": "tool", "tool_call_id": fact[1], "content": text}, content, projection)
            else:
                message = _message(items[item_id], contents[item_id], projection, placement, preview_chars, recall)
            if use_memo:
                memory[item_id] = (projection, placement, message)
        if message is not None:
            messages.append(message)
            sources.append(index)
    return Rendering(messages, sources, starts, offsets)


def _message(item: Item, content: ItemContent, projection: Projection, placement: Placement,
             preview_chars: int, recall: RecallStyle) -> dict | None:
    """The message of a placed entry that is no paired tool result (None for an assistant
    message left empty)."""
    if placement is ORPHAN:
        return _orphan_result(item, content, projection, preview_chars, recall)
    if item.role != "assistant":
        return item_message(item, content, projection, preview_chars, None, recall)
    calls = content.tool_calls
    if placement is ALL_CALLS:
        keep = calls
    else:
        assert isinstance(placement, tuple)  # the ids of the calls kept
        keep = [c for c in calls if c.id in placement]
    return item_message(item, content, projection, preview_chars, keep, recall)


def _orphan_result(item: Item, content: ItemContent, projection: Projection, preview_chars: int,
                   recall: RecallStyle) -> dict:
    tool = item.tool_name or content.tool_name or "tool"
    text = projection_text(item, content, projection, preview_chars, recall)
    return {"role": "user", "content": f"[Output of an earlier {tool} call]\n{text}"}

