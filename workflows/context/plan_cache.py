"""Derived state of the request planner: the last plan of the full rung and the token sums
behind ``budget`` and ``working_set_tokens``, kept so that a step costs what it added.

Between compactions a lane only grows: ``add_item`` appends to ``order``. The cache of a
state holds what ``plan_request`` last computed by a full scan and extends it with the
appended items only. It is derived, never stored: it lives beside the state (a weak map,
so it is neither serialised into a checkpoint nor carried by ``model_copy``) and is
rebuilt by a full scan whenever the state changed in any other way. That is detected with
the counters every change already bumps: ``add_item`` advances the cache's ``generation``
together with the state's, any other change (compaction, episode, task, capability)
leaves the cache one generation behind, hence stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from weakref import ref

if TYPE_CHECKING:
    from .lane_facts import LaneFacts
    from .ledger import ContextState


@dataclass
class PlanCache:
    # what the cache reflects: valid while all of these equal the state's
    generation: int
    layout_epoch: int
    preview_chars: int
    shared_tokens: int
    order_len: int  # len(state.order), appended items included
    # sums over the whole working set (budget.working_set_tokens, budget.capability_tokens)
    working_set: int
    capability: int
    # the full-rung plan (request_plan): entries of the shared prefix and of ``order`` ...
    entries: list[Any]
    counts: list[int]  # stable, memory, history entries
    laid_out: int  # entries laid out at the last layout change (shared prefix included)
    conversation: int
    order_capability: int  # capability tokens among the ``order`` entries
    step: list[Any]  # ... then the step-scoped capability context
    step_capability: int
    # ``order`` is sorted by layout key and holds every item a re-layout lays out, so that
    # ``rebuild_layout`` would keep it (layout.keep_layout) and a draft's first change is found
    # by walking it (prefix.py); ``last_key``: the layout key of its last item, which an
    # appended item's key must exceed to keep that true
    in_key_order: bool = False
    last_key: tuple[int, int, float, str] | None = None
    lane: LaneFacts | None = None  # what a compaction draft reads of the lane (lane_facts.py)
    pending: list[str] = field(default_factory=list)  # appended since ``entries`` was extended


# id(state) -> (weak reference to the state, its cache); pydantic models are unhashable,
# and a weak reference lets the entry go with its state
_CACHES: dict[int, tuple[ref[ContextState], PlanCache]] = {}


def current(state: ContextState) -> PlanCache | None:
    """The cache of ``state`` when it still describes it, else None."""
    cache = previous(state)
    if cache is None or (
            cache.generation != state.generation or cache.layout_epoch != state.layout_epoch
            or cache.order_len != len(state.order) or cache.shared_tokens != state.shared_tokens
            or cache.preview_chars != state.config.effective_preview_chars):
        return None
    return cache


def previous(state: ContextState) -> PlanCache | None:
    """The last cache stored for ``state``, current or stale (a rebuild reuses its entries)."""
    entry = _CACHES.get(id(state))
    return entry[1] if entry is not None and entry[0]() is state else None


def store(state: ContextState, cache: PlanCache) -> None:
    key = id(state)

    def forget(dead: ref[ContextState]) -> None:
        entry = _CACHES.get(key)
        if entry is not None and entry[0] is dead:  # not a later state that got the same id
            del _CACHES[key]

    _CACHES[key] = (ref(state, forget), cache)


def note_append(state: ContextState, item_id: str, working_cost: int, capability_cost: int) -> None:
    """``add_item`` appended ``item_id`` to ``order`` and is about to bump the generation:
    a cache that was current stays current (its sums grown by the item's costs)."""
    cache = current(state)
    if cache is None:
        return
    cache.generation += 1
    cache.order_len += 1
    cache.working_set += working_cost
    cache.capability += capability_cost
    cache.pending.append(item_id)
