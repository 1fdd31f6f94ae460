"""The pairing rule of a chat request: where each entry's message goes and which calls it keeps.

Chat APIs require a tool message to follow the assistant message that made its call, and
every call an assistant message makes to be answered. A request plan may omit either side of
an exchange, so the rule decides, for the entries ``zip(ids, projections)``:

- an assistant message keeps only the calls that a shown tool entry answers before the next
  shown assistant entry (the first answer of each); an emptied one is dropped when rendered;
- a tool entry is sent as a tool message only right after its call; any other (orphaned)
  result becomes a user message, so its text is not lost;
- a message met while calls still await their results waits until the results are out.

The rule reads only each entry's role and call (``Fact``), never a text: ``render.py`` turns
its ``Layout`` into messages, with the memoisation around it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from .content import ToolCall
from .items import Projection

# An item's static facts as rendering needs them: its role; the call it answers (a tool
# result) or its only call (an assistant turn with exactly one; else None); and the message of
# an addressed tool output's reference projection, when made (render.py).
Fact = tuple[str, str | None, dict | None]

# How a placed entry is sent (``Layout.placements``): PAIRED, a tool message right after its
# call; ORPHAN, a tool result sent as a user message; ALL_CALLS, an assistant message keeping
# every call; a tuple, the ids of the calls it keeps (() for none); None, any other message.
PAIRED = None
ORPHAN = "orphan"
ALL_CALLS = True
Placement = tuple[str, ...] | bool | str | None


class Layout(NamedTuple):
    """Parallel lists, in the order the messages are sent: a compaction lays out a whole
    request, and no record is built per entry."""

    order: list[int]  # the index of each placed entry
    placements: list[Placement]  # how it is sent
    # Segments: one starts at entry 0 and at every shown assistant entry, where no call awaits
    # its result and nothing waits, so a segment lays out the same on its own (render_cache.py).
    segment_starts: list[int]


def lay_out(ids: Sequence[str], projections: Sequence[Projection], facts: dict[str, Fact],
            calls_of: Callable[[str], list[ToolCall]]) -> Layout:
    """The ``Layout`` of the entries ``zip(ids, projections)``. ``facts`` holds every item's
    ``Fact``; ``calls_of(item_id)`` gives an assistant item's calls."""
    order: list[int] = []
    placements: list[Placement] = []
    waiting: list[int] = []  # entries met while calls await their results
    waiting_placements: list[Placement] = []
    pending: set[str] = set()  # calls sent whose tool message has not been sent yet
    segment_starts = [0]
    omitted, end = Projection.OMITTED, len(ids)
    skip = -1  # an entry already placed with the turn before it

    for index, projection in enumerate(projections):
        if projection == omitted or index == skip:
            continue
        item_id = ids[index]
        role, call, _ = facts[item_id]
        if role == "tool":
            if call in pending:
                order.append(index)
                placements.append(PAIRED)
                pending.discard(call)
                if not pending and waiting:
                    order.extend(waiting)
                    placements.extend(waiting_placements)
                    waiting.clear()
                    waiting_placements.clear()
            elif pending:
                waiting.append(index)
                waiting_placements.append(ORPHAN)
            else:
                order.append(index)
                placements.append(ORPHAN)
            continue
        if role != "assistant":
            if pending:
                waiting.append(index)
                waiting_placements.append(None)
            else:
                order.append(index)
                placements.append(None)
            continue
        # an assistant entry: nothing is pending here (a call is paired only with a result
        # before the next assistant turn), so a segment starts
        if index:
            segment_starts.append(index)
        if call is not None and index + 1 < end and projections[index + 1] != omitted:
            answer = facts[ids[index + 1]]
            if answer[0] == "tool" and answer[1] == call:  # the usual exchange: one call, answered next
                order.extend((index, index + 1))
                placements.extend((ALL_CALLS, PAIRED))
                skip = index + 1
                continue
        tool_calls = calls_of(item_id)
        answered = _answered_calls(index, tool_calls, ids, projections, facts) if tool_calls else None
        placement: Placement
        if not answered:
            placement = ()
        elif len(answered) == len(tool_calls) or all(c.id in answered for c in tool_calls):
            placement = ALL_CALLS
            pending.update([c.id for c in tool_calls])
        else:
            placement = tuple([c.id for c in tool_calls if c.id in answered])
            pending.update(placement)
        order.append(index)
        placements.append(placement)
    order.extend(waiting)
    placements.extend(waiting_placements)
    return Layout(order, placements, segment_starts)


def _answered_calls(index: int, calls: list[ToolCall], ids: Sequence[str], projections: Sequence[Projection],
                    facts: dict[str, Fact]) -> set[str]:
    """The ids of the ``calls`` of the assistant entry at ``index`` that a shown tool entry
    answers before the next shown assistant entry (the first answer of each). The scan stops
    as soon as every call is answered: usually at the next entry."""
    waiting = {c.id for c in calls}
    answered: set[str] = set()
    omitted, end = Projection.OMITTED, len(ids)
    position = index + 1
    while waiting and position < end:
        if projections[position] != omitted:
            role, call_id, _ = facts[ids[position]]
            if role == "assistant":
                break
            if role == "tool" and call_id in waiting:
                waiting.discard(call_id)
                answered.add(call_id)
        position += 1
    return answered
