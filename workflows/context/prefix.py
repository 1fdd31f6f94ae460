"""Where a compaction first changes the request: the prompt-cache boundary of a draft.

Providers cache the leading messages of a request that are byte-identical to the previous
one (DESIGN §7). A compaction that changes the request at position ``p`` (an entry removed
or re-projected, a regenerated checkpoint or summary, a pinned message moving into the
stable segment at the re-layout) re-bills everything from ``p`` on at the full price,
whatever else it changes there. This module predicts ``p`` for a draft by comparing the
visible entries of the current request with those of the first request after the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from .draft import Draft
from .items import Item, Kind, Lifecycle, Projection
from .layout import HISTORY_KINDS, layout_key
from .request_plan import in_key_order

Entry = tuple[str, Projection]  # what one request entry renders from: (item id, projection)
PlannedKey = tuple[int, int, float, str]  # layout key (segment, rank, seq, id) of a planned entry
_HISTORY = 2  # layout_key()[0] of the history segment (after stable and memory)


@dataclass(frozen=True)
class Rebilled:
    """The part of the first request after a draft that the prompt cache cannot serve: the
    planned entries from the first change on, i.e. those whose layout key is at least
    ``from_key`` (None: nothing changes)."""

    from_key: PlannedKey | None
    from_history_start: bool  # the first change is at or before the start of history
    draft: Draft

    @property
    def ids(self) -> frozenset[str]:
        """The ids of the entries from the first change on (of the draft's planned request as
        it is when read: read it before the draft changes further)."""
        if self.from_key is None:
            return frozenset()
        return frozenset([key[3] for key in _planned_keys(self.draft) if key >= self.from_key])

    def covered(self, outputs: list[Item]) -> list[Item]:
        """Those of ``outputs``, tool outputs shown in the planned request, that it re-bills.
        (A tool output's layout key does not depend on its lifecycle: the current one is the
        planned one; ``layout_key`` written out for history items.)"""
        start, history = self.from_key, HISTORY_KINDS
        if start is None:
            return []
        return [item for item in outputs if ((2, 1, item.seq, item.id) if item.kind in history else layout_key(item)) >= start]


def _visible(lifecycle: Lifecycle, projection: Projection) -> bool:
    return lifecycle != Lifecycle.ARCHIVED and projection != Projection.OMITTED


def current_entries(draft: Draft) -> list[Entry]:
    """The entries of the request as it is now: the layout plus everything appended since."""
    items, archived, omitted = draft.state.items, Lifecycle.ARCHIVED, Projection.OMITTED
    entries = []
    for item_id in draft.state.order:  # _visible written out: one pass over the working set
        item = items[item_id]
        projection = item.projection
        if item.lifecycle != archived and projection != omitted:
            entries.append((item_id, projection))
    return entries


def planned_entries(draft: Draft) -> tuple[list[Entry], int]:
    """The entries of the first request after the draft is applied and re-laid out (as
    ``apply_plan`` does), and the index where its history segment starts.

    A generated text the draft rewrites becomes a new item (ids are immutable content), so
    it is a change at its position. The history segment opens with the checkpoint, which a
    draft that archives anything rewrites.
    """
    keyed = _planned_keys(draft)
    return [(key[3], _planned_projection(draft, key[3])) for key in keyed], _history_start(keyed)


def _planned_projection(draft: Draft, item_id: str) -> Projection:
    """The projection of a planned entry: a regenerated text's is full."""
    item = draft.state.items.get(item_id)
    return draft.view(item)[1] if item is not None else Projection.FULL


def _planned_keys(draft: Draft) -> list[PlannedKey]:
    """The items of ``planned_entries`` as their sorted layout keys (tuples of ints and a
    string: untracked by the garbage collector, unlike the pairs, which hold enum members)."""
    state = draft.state
    regenerated = _regenerated(draft)
    keyed: list[PlannedKey] = []
    changes, archived, omitted, capability = draft.changes, Lifecycle.ARCHIVED, Projection.OMITTED, Kind.CAPABILITY.value
    history_kinds = HISTORY_KINDS
    for item in state.items.values():
        kind = item.kind  # is_step_capability written out
        if (kind == capability and item.scope == "step") or (kind in regenerated and state.generated_id(kind) == item.id):
            continue  # step context is not laid out; a replaced generated item is added below
        change = changes.get(item.id)  # Draft.view and _visible written out: one pass over the working set
        lifecycle, projection = (change.lifecycle, change.projection) if change else (item.lifecycle, item.projection)
        if lifecycle != archived and projection != omitted:
            # layout_key written out for history items (most of them)
            keyed.append((2, 1, item.seq, item.id) if kind in history_kinds else layout_key(item))
    for kind in sorted(regenerated):
        if draft.new_texts.get(kind) == "":
            continue  # retired: nothing replaces it
        keyed.append(regenerated_key(draft, kind))
    keyed.sort()
    return keyed


def _regenerated(draft: Draft) -> set[str]:
    """The generated kinds the draft rewrites."""
    regenerated = set(draft.new_texts)
    if draft.checkpoint_changed:
        regenerated.add(Kind.CHECKPOINT.value)
    if draft.summary_changed:
        regenerated.add(Kind.SUMMARY.value)
    return regenerated


def regenerated_key(draft: Draft, kind: str) -> PlannedKey:
    """The layout key of the item that replaces generated text ``kind`` in the next request."""
    new = Item(id=f"(new {kind})", seq=draft.state.last_seq, kind=kind, role="user", lifecycle=Lifecycle.PINNED)
    return layout_key(new)


def _history_start(keyed: list[PlannedKey]) -> int:
    start = 0
    for key in keyed:
        if key[0] >= _HISTORY:
            break
        start += 1
    return start


def first_change(before: list[Entry], after: list[Entry]) -> int:
    """Index in ``after`` of the first entry that differs from ``before`` (its length if none)."""
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old != new:
            return index
    return min(len(before), len(after))


def _first_change_from_current(draft: Draft, after: list[PlannedKey]) -> int:
    """``first_change(current_entries(draft), planned_entries(draft)[0])`` without building either."""
    items, changes, archived, omitted = draft.state.items, draft.changes, Lifecycle.ARCHIVED, Projection.OMITTED
    index, end = 0, len(after)
    for item_id in draft.state.order:
        item = items[item_id]
        projection = item.projection
        if item.lifecycle == archived or projection == omitted:
            continue
        if index == end or after[index][3] != item_id:
            return index
        change = changes.get(item_id)  # the same item: planned with its projection in the draft
        if change is not None and change.projection != projection:
            return index
        index += 1
    return index


def rebilled(draft: Draft) -> Rebilled:
    """What the first request after ``draft`` re-bills: every entry from its first change on."""
    if not draft.moves_pinned and in_key_order(draft.state):
        return Rebilled(*_first_change_in_order(draft), draft)
    after = _planned_keys(draft)
    changed = _first_change_from_current(draft, after)
    if changed == len(after):  # nothing changes: the cache serves the whole request
        return Rebilled(from_key=None, from_history_start=False, draft=draft)
    return Rebilled(from_key=after[changed], from_history_start=changed <= _history_start(after), draft=draft)


def _first_change_in_order(draft: Draft) -> tuple[PlannedKey | None, bool]:
    """``rebilled``'s first change and whether it is at or before the start of history, by
    walking ``order`` up to it, when the order is what the re-layout makes of it and no item
    moves into or out of the pinned lifecycle (so no layout key changes): the planned request
    is then the current order without the entries that leave, plus the regenerated texts at
    their keys, and nothing needs sorting. Usually the walk ends within the first groups."""
    state = draft.state
    regenerated = _regenerated(draft)
    new = sorted([regenerated_key(draft, kind) for kind in regenerated if draft.new_texts.get(kind) != ""])
    first_new = new[0] if new else None
    replaced = {state.generated_id(kind) for kind in regenerated}
    items, changes, archived, omitted, history = (state.items, draft.changes, Lifecycle.ARCHIVED, Projection.OMITTED,
                                                  HISTORY_KINDS)
    history_seen = False  # a planned entry before the first change is in history
    left = False  # a current entry leaves: the first change is the next planned entry
    for item_id in state.order:
        item = items[item_id]
        projection = item.projection
        shown = item.lifecycle != archived and projection != omitted
        change = changes.get(item_id)
        planned, planned_projection = (shown, projection) if change is None else (
            change.lifecycle != archived and change.projection != omitted, change.projection)
        if planned and item_id in replaced:
            planned = False  # a regenerated text is a new item, added at its own key
        if not shown and not planned:
            continue
        key = (2, 1, item.seq, item_id) if item.kind in history else layout_key(item)
        if first_new is not None and first_new < key:
            return first_new, not history_seen
        if left or not shown or (planned and planned_projection != projection):
            if planned:
                return key, not history_seen
            continue
        if not planned:
            left = True
            continue
        history_seen = history_seen or key[0] >= _HISTORY
    if first_new is not None:
        return first_new, not history_seen
    return None, False  # nothing changes, or only trailing entries leave: the cache serves the rest
