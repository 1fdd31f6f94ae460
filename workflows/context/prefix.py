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
from .layout import is_step_capability, layout_key

Entry = tuple[str, Projection]  # what one request entry renders from: (item id, projection)
_HISTORY = 2  # layout_key()[0] of the history segment (after stable and memory)


@dataclass(frozen=True)
class Rebilled:
    """The part of the first request after a draft that the prompt cache cannot serve."""

    ids: frozenset[str]  # entries from the first change on
    from_history_start: bool  # the first change is at or before the start of history


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
    state = draft.state
    regenerated = set(draft.new_texts)
    if draft.checkpoint_changed:
        regenerated.add(Kind.CHECKPOINT.value)
    if draft.summary_changed:
        regenerated.add(Kind.SUMMARY.value)
    # (layout key..., projection): sorted as they are, since (seq, id) alone already orders two items
    keyed: list[tuple[int, int, int, str, Projection]] = []
    changes, archived, omitted = draft.changes, Lifecycle.ARCHIVED, Projection.OMITTED
    for item in state.items.values():
        if is_step_capability(item) or (item.kind in regenerated and state.generated_id(item.kind) == item.id):
            continue  # step context is not laid out; a replaced generated item is added below
        change = changes.get(item.id)  # Draft.view and _visible written out: one pass over the working set
        lifecycle, projection = (change.lifecycle, change.projection) if change else (item.lifecycle, item.projection)
        if lifecycle != archived and projection != omitted:
            keyed.append((*layout_key(item), projection))
    for kind in sorted(regenerated):
        if draft.new_texts.get(kind) == "":
            continue  # retired: nothing replaces it
        new = Item(id=f"(new {kind})", seq=state.last_seq, kind=kind, role="user", lifecycle=Lifecycle.PINNED)
        keyed.append((*layout_key(new), Projection.FULL))
    keyed.sort()
    history_start = 0
    for key in keyed:
        if key[0] >= _HISTORY:
            break
        history_start += 1
    return [(key[3], key[4]) for key in keyed], history_start


def first_change(before: list[Entry], after: list[Entry]) -> int:
    """Index in ``after`` of the first entry that differs from ``before`` (its length if none)."""
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old != new:
            return index
    return min(len(before), len(after))


def rebilled(draft: Draft) -> Rebilled:
    """What the first request after ``draft`` re-bills: every entry from its first change on."""
    after, history_start = planned_entries(draft)
    changed = first_change(current_entries(draft), after)
    if changed == len(after):  # nothing changes: the cache serves the whole request
        return Rebilled(ids=frozenset(), from_history_start=False)
    return Rebilled(ids=frozenset([item_id for item_id, _ in after[changed:]]),
                    from_history_start=changed <= history_start)
