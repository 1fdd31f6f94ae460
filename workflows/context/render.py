"""Requests as OpenAI chat messages, rendered identically everywhere.

The model activity, the token counter and the offline replay all call these functions,
so a projection costs exactly what the caller measured and a request is byte-stable:
the same plan and contents always give the same messages. (One item's text and message:
``render_item.py``; consecutive requests of one lane: ``render_cache.py``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .content import ItemContent, ToolCall
from .items import Item, Projection
from .observations import (  # noqa: F401  (parse_observation_uri: re-exported)
    RecallStyle,
    observation_address,
    parse_observation_uri,
)
from .render_item import _REFERENCE, _output_reference, item_message, projection_text

Entries = Sequence[tuple[str, Projection]]  # (item id, projection): what a request is made of


def _answered_calls(index: int, calls: list[ToolCall], ids: Sequence[str], projections: Sequence[Projection],
                    items: dict[str, Item], contents: dict[str, ItemContent]) -> set[str]:
    """The ids of the ``calls`` of the assistant entry at ``index`` that a shown tool entry
    answers before the next shown assistant entry (the first answer of each). The scan stops
    as soon as every call is answered: usually at the next entry."""
    waiting = {calls[0].id} if len(calls) == 1 else {c.id for c in calls}
    answered: set[str] = set()
    omitted, end = Projection.OMITTED, len(ids)
    position = index + 1
    while waiting and position < end:
        if projections[position] != omitted:
            item_id = ids[position]
            item = items[item_id]
            role = item.role
            if role == "assistant":
                break
            if role == "tool":
                content = contents[item_id]  # _call_id written out
                call_id = content.tool_call_id or (item.tool_call_ids[0] if item.tool_call_ids else None)
                if call_id in waiting:
                    waiting.discard(call_id)
                    answered.add(call_id)
        position += 1
    return answered


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


# item id -> (projection, the calls kept, message): its last rendering; the calls kept are
# None for an item that is no assistant turn, True when all of a turn's calls are kept, else
# their ids
MessageMemo = dict[str, tuple[Projection, tuple[str, ...] | bool | None, dict | None]]


# item id -> what rendering needs of an item besides its projection, all static (an item's
# content and rendering fields never change): its role; the call it answers (a tool result) or
# its only call (an assistant turn with exactly one; else None); and the message of an addressed
# tool output's reference projection sent right after its call (render_item._output_reference),
# made when first met by a renderer that keeps these (render_cache.py), so that a compaction
# referencing thousands of outputs has them
Facts = dict[str, tuple[str, str | None, dict | None]]


def _facts(item: Item, content: ItemContent, with_reference: bool) -> tuple[str, str | None, dict | None]:
    role = item.role
    if role == "assistant":
        calls = content.tool_calls
        return role, calls[0].id if len(calls) == 1 else None, None
    if role == "tool":
        call_id = content.tool_call_id or (item.tool_call_ids[0] if item.tool_call_ids else None)
        reference = None
        if with_reference and item.observation_id:
            try:
                reference = {"role": "tool", "tool_call_id": call_id, "content": _output_reference(
                    item, content, observation_address(item.observation_id))}
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
    """The chat messages of the entries ``zip(ids, projections)`` (see ``Rendering``).

    Pairing invariant: an assistant message keeps only the calls whose tool message is
    also sent, and a tool message is sent only right after its call; an orphaned result
    becomes a user message (its text is not lost), an emptied assistant message is dropped.
    Messages met while calls await their results are deferred until the results are out,
    because chat APIs require tool messages to follow their call directly.

    ``memo`` (kept by a caller that renders consecutive requests of one lane with the same
    preview and recall style) reuses an item's last message when its projection and kept
    calls are the same again: an item's content never changes, so neither does that message.
    ``facts`` (kept by the same caller) holds each item's ``Facts``, so that an entry whose
    message is remembered is not read again. (The loop is written out, helpers inlined: after
    a compaction it runs over the whole request.)
    """
    use_memo = memo is not None
    if memo is None:
        memo = {}  # written to, never read: without a memo every message is rendered anew
    kept = facts is not None  # else each entry is read from the item and its content, as it comes
    if facts is None:
        facts = {}
    messages: list[dict] = []
    sources: list[int] = []
    deferred: list[dict] = []
    deferred_sources: list[int] = []
    pending: set[str] = set()  # calls sent whose tool message has not been sent yet
    segment_starts, segment_offsets = [0], [0]
    omitted, remembered, known, end = Projection.OMITTED, memo.get, facts.get, len(ids)
    skip = -1  # an entry already rendered with the turn before it

    message: dict | None
    for index, item_id in enumerate(ids):
        if index == skip:
            continue
        projection = projections[index]
        if kept:
            fact = known(item_id)
            if fact is None:
                fact = facts[item_id] = _facts(items[item_id], contents[item_id], True)
            if projection == omitted:
                continue
            role, call = fact[0], fact[1]
        else:
            item, content = items[item_id], contents[item_id]
            if projection == omitted:
                continue
            role, call = item.role, None
        if role == "tool":
            call_id = call if kept else content.tool_call_id or (item.tool_call_ids[0] if item.tool_call_ids else None)
            if call_id not in pending:
                message = _orphan_result(items[item_id], contents[item_id], projection, preview_chars, recall)
                if pending:
                    deferred.append(message)
                    deferred_sources.append(index)
                else:
                    messages.append(message)
                    sources.append(index)
                continue
            last = remembered(item_id) if use_memo else None
            if last is not None and last[0] is projection and last[1] is None:  # members are singletons
                message = last[2]
            else:  # item_message written out for a tool result
                message = {"role": "tool", "tool_call_id": call_id, "content": projection_text(
                    items[item_id], contents[item_id], projection, preview_chars, recall)}
                if use_memo:
                    memo[item_id] = (projection, None, message)
            assert message is not None  # a tool message always renders, empty or not
            messages.append(message)
            sources.append(index)
            pending.discard(call_id)
            if not pending and deferred:
                messages.extend(deferred)
                sources.extend(deferred_sources)
                deferred.clear()
                deferred_sources.clear()
            continue
        keep: list[ToolCall] | None = None
        calls: tuple[str, ...] | bool | None = None
        if role == "assistant":
            # pending is empty here: a call is paired only with a result before the next assistant turn
            if index:
                segment_starts.append(index)
                segment_offsets.append(len(messages))
            single = call if kept else (content.tool_calls[0].id if len(content.tool_calls) == 1 else None)
            if single is not None and index + 1 < end and projections[index + 1] != omitted:
                follower_id = ids[index + 1]
                if kept:
                    answer = known(follower_id)
                    if answer is None:
                        answer = facts[follower_id] = _facts(items[follower_id], contents[follower_id], True)
                else:  # _facts written out, without the reference
                    follower = items[follower_id]
                    answer = (follower.role, contents[follower_id].tool_call_id or (
                        follower.tool_call_ids[0] if follower.tool_call_ids else None), None)
                if answer[0] == "tool" and answer[1] == single:
                    # The usual exchange, a turn whose one call the next entry answers: both
                    # rendered here as the general path renders them (the call kept, the
                    # result sent right after it; nothing pending before or after).
                    last = remembered(item_id) if use_memo else None
                    if last is not None and last[0] is projection and last[1] is True:
                        message = last[2]
                    else:
                        content = contents[item_id]
                        message = item_message(items[item_id], content, projection, preview_chars,
                                               content.tool_calls, recall)
                        if use_memo:
                            memo[item_id] = (projection, True, message)
                    answer_projection = projections[index + 1]
                    answer_message: dict | None
                    if answer_projection is _REFERENCE and answer[2] is not None:
                        answer_message = answer[2]  # the usual case after a compaction
                    elif use_memo and (last := remembered(follower_id)) is not None and (
                            last[0] is answer_projection and last[1] is None):
                        answer_message = last[2]
                    else:  # item_message written out for a tool result (and the usual projection_text)
                        follower, follower_content = items[follower_id], contents[follower_id]
                        obs_id = follower.observation_id
                        text = _output_reference(follower, follower_content, observation_address(obs_id)) if (
                            answer_projection is _REFERENCE and obs_id) else projection_text(
                            follower, follower_content, answer_projection, preview_chars, recall)
                        answer_message = {"role": "tool", "tool_call_id": single, "content": text}
                        if use_memo:
                            memo[follower_id] = (answer_projection, None, answer_message)
                    assert message is not None and answer_message is not None  # a turn with a call renders
                    messages.append(message)
                    messages.append(answer_message)
                    sources.append(index)
                    sources.append(index + 1)
                    skip = index + 1
                    continue
            tool_calls = contents[item_id].tool_calls
            answered = _answered_calls(index, tool_calls, ids, projections, items, contents) if tool_calls else None
            if not answered:
                keep, calls = [], ()
            elif len(answered) == len(tool_calls) or all(c.id in answered for c in tool_calls):
                keep, calls = tool_calls, True  # every call answered (the usual case)
            else:
                keep = [c for c in tool_calls if c.id in answered]
                calls = tuple([c.id for c in keep])
        last = remembered(item_id) if use_memo else None
        if last is not None and last[0] is projection and last[1] == calls:
            message = last[2]
        else:
            message = item_message(items[item_id], contents[item_id], projection, preview_chars, keep, recall)
            if use_memo:
                memo[item_id] = (projection, calls, message)
        if message is not None:
            if pending and message["role"] != "tool":
                deferred.append(message)
                deferred_sources.append(index)
            else:
                messages.append(message)
                sources.append(index)
        if keep:
            if len(keep) == 1:
                pending.add(keep[0].id)
            else:
                pending.update([c.id for c in keep])
    messages.extend(deferred)
    sources.extend(deferred_sources)
    return Rendering(messages, sources, segment_starts, segment_offsets)


def _orphan_result(item: Item, content: ItemContent, projection: Projection, preview_chars: int,
                   recall: RecallStyle) -> dict:
    tool = item.tool_name or content.tool_name or "tool"
    text = projection_text(item, content, projection, preview_chars, recall)
    return {"role": "user", "content": f"[Output of an earlier {tool} call]\n{text}"}

