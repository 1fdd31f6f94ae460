"""The request layout: stable semantics, one live memory, then history.

Re-laid out only at a compaction, a condensation or a task end. Between those, new items
are appended to ``order`` (even pinned ones), so request k+1 starts with request k byte
for byte and the provider prompt cache keeps hitting. Step-scoped capability context is
never in ``order``: the planner puts it after everything, since it is gone next step.
"""

from __future__ import annotations

from weakref import ref

from .items import Item, Kind, Lifecycle
from .ledger import ContextState

# Stable-segment order: system rules, the rolling summary of older instructions, pinned
# instructions/notes/decisions, task capability context, then the active-episode markers
# (last, because they change most often of the stable parts).
_STABLE_RANK = {Kind.SYSTEM.value: 0, Kind.SUMMARY.value: 1, Kind.CAPABILITY.value: 3, Kind.EPISODES.value: 4}
# Pinned items of these kinds stay in history: moving them would split an exchange group.
HISTORY_KINDS = frozenset({Kind.ASSISTANT.value, Kind.TOOL_RESULT.value, Kind.HANDOFF.value})
# plain strings: these run once per item at every layout, and Enum.value is a property call
_MEMORY, _CHECKPOINT, _CAPABILITY = Kind.MEMORY.value, Kind.CHECKPOINT.value, Kind.CAPABILITY.value
_NOTICE = Kind.NOTICE.value


def segment(item: Item) -> tuple[str, int]:
    """(segment, rank within the segment) of one working-set item."""
    if item.kind == _MEMORY:
        return "memory", 0
    if item.kind == _CHECKPOINT:
        return "history", 0
    if item.kind == _NOTICE:
        return "history", 1
    if item.kind in _STABLE_RANK:
        return "stable", _STABLE_RANK[item.kind]
    if item.lifecycle == Lifecycle.PINNED and item.kind not in HISTORY_KINDS and item.role != "tool":
        return "stable", 2
    return "history", 1


def is_step_capability(item: Item) -> bool:
    return item.kind == _CAPABILITY and item.scope == "step"


LayoutKey = tuple[int, int, float, str]  # (segment, rank, seq, id)


def layout_key(item: Item) -> LayoutKey:
    """Sort key of a laid-out item: segment (stable, memory, history), rank, seq, id
    (``segment`` as numbers; written out because it runs for every item at every layout)."""
    kind = item.kind
    if kind in HISTORY_KINDS:  # most items: never stable, whatever their lifecycle
        return 2, 1, item.seq, item.id
    if kind in _STABLE_RANK:
        return 0, _STABLE_RANK[kind], item.seq, item.id
    if kind == _MEMORY:
        return 1, 0, item.seq, item.id
    if kind == _CHECKPOINT:
        return 2, 0, item.seq, item.id
    if kind == _NOTICE:  # generated with the seq of the newest item: it goes right after that item
        return 2, 1, item.seq + 0.5, item.id
    if item.lifecycle == Lifecycle.PINNED and kind not in HISTORY_KINDS and item.role != "tool":
        return 0, 2, item.seq, item.id
    return 2, 1, item.seq, item.id


def rebuild_layout(state: ContextState) -> None:
    """Recompute ``order`` from the working set; marks a new layout epoch.

    (``keep_layout`` does the same in place when ``layout_unchanged`` says the result would
    be the current order.)"""
    archived, capability, history = Lifecycle.ARCHIVED, _CAPABILITY, HISTORY_KINDS
    laid_out = sorted([(2, 1, item.seq, item.id) if item.kind in history else layout_key(item)  # the usual key in place
                       for item in state.items.values()
                       if item.lifecycle != archived and not (item.kind == capability and item.scope == "step")])
    state.order = [key[3] for key in laid_out]
    stable = memory = 0
    for key in laid_out:
        if key[0] == 2:
            break  # history comes last
        if key[0] == 0:
            stable += 1
        else:
            memory += 1
    state.stable_len, state.memory_len = stable, memory
    state.laid_out_len = len(state.order)
    state.layout_epoch += 1
    _note_laid_out(state)


# Derived, never stored (like plan_cache): id(state) -> (weak reference, layout_epoch of the
# last rebuild_layout in this process). While the epoch is unchanged, ``order[:laid_out_len]``
# is sorted by layout key: the keys of laid-out items change only where the epoch is bumped
# (a compaction, a task end, a capability cleared). A state restored from a checkpoint has
# no entry until its first layout here.
_LAID_OUT: dict[int, tuple[ref[ContextState], int]] = {}


def _note_laid_out(state: ContextState) -> None:
    key = id(state)

    def forget(dead: ref[ContextState]) -> None:
        entry = _LAID_OUT.get(key)
        if entry is not None and entry[0] is dead:
            del _LAID_OUT[key]

    _LAID_OUT[key] = (ref(state, forget), state.layout_epoch)


# Kinds whose layout key does not depend on the lifecycle (pinned or not); nor does that of
# an item with the role "tool", whatever its kind
LIFECYCLE_FREE_KINDS = HISTORY_KINDS | frozenset(_STABLE_RANK) | {_MEMORY, _CHECKPOINT}


def layout_unchanged(state: ContextState) -> bool:
    """``rebuild_layout`` would keep ``order`` as it is: it is sorted since the last layout in
    this process, nothing left it (no archived item in it: the caller's part), and everything
    appended since belongs at the end of history (an exchange: a larger seq than any laid-out
    item). The caller also guarantees that no laid-out item changed its layout key."""
    entry = _LAID_OUT.get(id(state))
    if entry is None or entry[0]() is not state or entry[1] != state.layout_epoch:
        return False
    items = state.items
    for item_id in state.order[state.laid_out_len:]:
        key = layout_key(items[item_id])
        if key[0] != 2 or key[1] != 1:
            return False
    return True


def keep_layout(state: ContextState) -> None:
    """``rebuild_layout`` when the order is already what it would make (``layout_unchanged``,
    or a plan cache that found it in key order): the same order, all of it laid out now, a new
    epoch, the segments counted (they lead the order; a lane never laid out has none counted)."""
    items, stable, memory = state.items, 0, 0
    for item_id in state.order:
        segment = layout_key(items[item_id])[0]
        if segment == 2:
            break  # history comes last
        if segment == 0:
            stable += 1
        else:
            memory += 1
    state.stable_len, state.memory_len = stable, memory
    state.laid_out_len = len(state.order)
    state.layout_epoch += 1
    _note_laid_out(state)


def key_order(state: ContextState, laid_out: int) -> tuple[bool, LayoutKey | None]:
    """Is ``order`` what ``rebuild_layout`` would make of it, given that it lays out ``laid_out``
    items (sorted by layout key, none archived or step-scoped in it)? And the key of its last
    item. (For the plan cache, at its full scan: the part laid out since the last layout in this
    process is sorted already (``_LAID_OUT``), so only the items appended since are read.)"""
    order, items = state.order, state.items
    if len(order) != laid_out:
        return False, None
    entry = _LAID_OUT.get(id(state))
    start = state.laid_out_len if entry is not None and entry[0]() is state and entry[1] == state.layout_epoch else 0
    last = layout_key(items[order[start - 1]]) if start else None
    archived, capability, history = Lifecycle.ARCHIVED, _CAPABILITY, HISTORY_KINDS
    for position in range(start, len(order)):
        item = items[order[position]]
        kind = item.kind
        if item.lifecycle == archived or (kind == capability and item.scope == "step"):
            return False, None
        key = (2, 1, item.seq, item.id) if kind in history else layout_key(item)  # the usual key in place
        if last is not None and key < last:
            return False, None
        last = key
    return True, last


def remove_from_order(state: ContextState, item_ids: set[str]) -> None:
    """Drop ids from ``order`` keeping the segment boundaries exact (no re-layout)."""
    kept: list[str] = []
    stable = memory = laid_out = 0
    for position, item_id in enumerate(state.order):
        if item_id in item_ids:
            continue
        kept.append(item_id)
        stable += position < state.stable_len
        memory += state.stable_len <= position < state.stable_len + state.memory_len
        laid_out += position < state.laid_out_len
    state.order, state.stable_len, state.memory_len, state.laid_out_len = kept, stable, memory, laid_out
