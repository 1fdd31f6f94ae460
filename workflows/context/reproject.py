"""Applying one run of a compaction plan that keeps its items in the working set.

A run (``TransitionRun``) moves its items alike: same lifecycle, projection and reason.
Pass 1 makes runs of thousands of tool outputs, so a run is applied in bulk: the reads and
writes go through ``map`` with C-level getters, not a Python loop per item, and the
checks ``apply_plan`` needs are answered from the sets of values the run's items hold.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, ne, or_
from typing import Any

from .budget import cost_of
from .compaction_plan import TransitionRun
from .items import Item, Projection
from .layout import LIFECYCLE_FREE_KINDS
from .ledger import NOT_LANE_KINDS, ContextState
from .request_plan import PlanEntry

_LIFECYCLE, _PROJECTION, _KIND, _TOKENS = (
    attrgetter("lifecycle"), attrgetter("projection"), attrgetter("kind"), attrgetter("tokens"))


@dataclass(frozen=True)
class Reprojected:
    keys_kept: bool  # no item's layout key changed (layout.LIFECYCLE_FREE_KINDS)
    shown: bool  # every item is a lane item shown before and after: the plan cache may be patched
    delta: int  # what the run changed the items' request costs by


def reproject(state: ContextState, run: TransitionRun, patched: list[PlanEntry]) -> Reprojected:
    """Move the items of ``run`` (which archives none) to its lifecycle and projection, and
    append to ``patched`` the new request entry of each item whose entry changes."""
    items = list(map(state.items.__getitem__, run.item_ids))
    lifecycle, projection = run.lifecycle, run.projection
    preview = state.config.effective_preview_chars
    old_projections = list(map(_PROJECTION, items))
    kinds = set(map(_KIND, items))
    # a laid-out item's key depends on its lifecycle unless its kind or its role says where it goes
    keys_kept = (set(map(_LIFECYCLE, items)) <= {lifecycle} or kinds <= LIFECYCLE_FREE_KINDS
                 or all(i.lifecycle == lifecycle or i.kind in LIFECYCLE_FREE_KINDS or i.role == "tool" for i in items))
    # into or out of the request, or capability context or a generated text (the lane facts
    # stand for lane items only): the sums need a full scan
    omitted = Projection.OMITTED
    shown = projection != omitted and omitted not in old_projections and kinds.isdisjoint(NOT_LANE_KINDS)
    # cost_of for measured projections, by map; the unmeasured ones one by one
    costs = list(map(_TOKENS, items))
    new = _costs(items, list(map(dict.get, costs, repeat(projection))), repeat(projection), preview)
    old = _costs(items, list(map(dict.get, costs, old_projections)), old_projections, preview)
    changed = list(map(or_, map(ne, old_projections, repeat(projection)), map(ne, new, old)))
    patched.extend(map(PlanEntry._make, zip(compress(run.item_ids, changed), repeat(projection), compress(new, changed))))
    for name, value in (("lifecycle", lifecycle), ("projection", projection), ("reason", run.reason)):
        _consume(map(setattr, items, repeat(name), repeat(value)))
    return Reprojected(keys_kept, shown, sum(new) - sum(old))


def _costs(items: list[Item], measured: list[int | None], projections: Iterable[Projection], preview: int) -> list[int]:
    """``measured`` with each unmeasured cost (None) replaced by ``cost_of``."""
    if None not in measured:
        return measured  # type: ignore[return-value]  # no None left
    return [cost if cost is not None else cost_of(item, projection, preview)
            for item, cost, projection in zip(items, measured, projections, strict=False)]  # may repeat


def _consume(calls: Iterable[Any]) -> None:
    """Run the calls of a lazy ``map`` for their effect (itertools' consume recipe)."""
    deque(calls, maxlen=0)
