"""Request planning: the ordered items (with projections) the next model request carries.

The plan follows the layout (stable semantics, memory, history,
then step-scoped capability context) and the projections decided at the last compaction;
it never mutates the state. For provider overflow recovery the planner re-plans on a
projection ladder, full -> reference -> minimal-reference, still without mutating the state.

The full rung is planned incrementally: between compactions a step costs what it appended,
not the working set (``plan_cache``: derived state, rebuilt by one full scan after any other
change). ``plan_request_reference`` is the full scan itself, the definition the incremental
plan must equal byte for byte (tests/engine/test_incremental_plan.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, field_serializer

from . import plan_cache
from .budget import budget, cost_of, is_capability
from .items import Item, Kind, Lifecycle, Projection, is_tool_output
from .lane_facts import LaneFacts
from .layout import is_step_capability, key_order, layout_key
from .ledger import ContextState

_RANK = {
    Projection.FULL: 0, Projection.COMPACT: 1, Projection.REFERENCE: 2,
    Projection.MINIMAL_REFERENCE: 3, Projection.OMITTED: 4,
}
_LISTED_PROTECTED = 5
# Provider overflow recovery re-plans down this ladder; after its last rung the error is terminal.
OVERFLOW_LADDER = (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE)


class PlanEntry(NamedTuple):
    """One entry of a request plan. A tuple: immutable, since consecutive plans share their
    entries (plan_cache), and made from an iterable without a Python frame (``_make``), since
    a compaction makes thousands. ``RequestPlan`` serialises it as an object."""

    item_id: str
    projection: Projection
    tokens: int


class RequestPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: list[PlanEntry]
    stable_entries: int
    memory_entries: int
    history_entries: int
    step_entries: int  # step-scoped capability context, always last
    stable_prefix_entries: int  # leading entries laid out at the last layout change
    layout_epoch: int  # same epoch: this request extends the previous one
    ladder: Projection
    total_tokens: int  # conversation tokens: entries minus capability context and the shared prefix
    capability_tokens: int
    budget: int  # conversation budget (tool definitions and capability context already charged)
    fits: bool
    reason: str = ""

    @field_serializer("entries")
    def _entries_as_objects(self, entries: list[PlanEntry]) -> list[dict]:
        return [entry._asdict() for entry in entries]

    def stable_prefix_digest(self) -> str:
        """A short digest of the entries laid out at the last layout change: the part of the
        request the provider's prompt cache can serve. Ids name immutable content, so the
        digest changes exactly when those bytes do (a cache break between two requests)."""
        prefix = self.entries[:self.stable_prefix_entries]
        text = "\n".join(f"{e.item_id} {e.projection.value}" for e in prefix)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def pairs(self) -> list[tuple[str, Projection]]:
        """(item id, projection) of every entry: what renders the request."""
        return [(e.item_id, e.projection) for e in self.entries]


def plan_request(state: ContextState, ladder: Projection = Projection.FULL) -> RequestPlan:
    if ladder not in OVERFLOW_LADDER:
        raise ValueError(f"ladder must be full, reference or minimal-reference, got {ladder.value!r}")
    if ladder != Projection.FULL:  # overflow recovery only: rare, planned by a full scan
        return plan_request_reference(state, ladder)
    cache = _full_rung(state)
    limit = budget(state)
    fits = cache.conversation <= limit
    counts = cache.counts
    # constructed, not validated: every field comes from a validated plan or from the state
    plan = RequestPlan.model_construct(
        entries=[*cache.entries, *cache.step], stable_entries=counts[0], memory_entries=counts[1],
        history_entries=counts[2], step_entries=len(cache.step), stable_prefix_entries=cache.laid_out,
        layout_epoch=state.layout_epoch, ladder=ladder, total_tokens=cache.conversation,
        capability_tokens=cache.order_capability + cache.step_capability, budget=limit, fits=fits, reason="",
    )
    if not fits:
        plan.reason = _why_not(state, plan, ladder, state.newest_group)
    return plan


def refresh_plan_cache(state: ContextState, before: plan_cache.PlanCache | None = None,
                       order_before: list[str] | None = None, patched: Sequence[PlanEntry] = (),
                       delta: int = 0) -> None:
    """Bring the state's plan cache up to date now (after a compaction: the sums it holds
    answer ``working_set_tokens`` and the next ``plan_request`` without another scan).

    ``before`` is the cache as it was current before a compaction that only re-projected
    items, each shown before and after and none of them capability context, and left the
    layout as it was (``order_before``, every item of it shown; the segments may have grown,
    e.g. at a first layout): then the new cache is ``before`` with the entries of the items
    whose entry changed replaced by ``patched``, its sums moved by ``delta``, not a full scan."""
    if before is not None and _patch(state, before, order_before, patched, delta):
        return
    _full_rung(state)


def _patch(state: ContextState, before: plan_cache.PlanCache, order_before: list[str] | None,
           patched: Sequence[PlanEntry], delta: int) -> bool:
    """``refresh_plan_cache`` by replacing entries of ``before`` with ``patched``; False
    (nothing done) when the compaction changed more than that."""
    shared = len(state.shared_prefix)
    if (before.pending or state.order != order_before or len(before.entries) != shared + len(state.order)
            or before.shared_tokens != state.shared_tokens
            or before.preview_chars != state.config.effective_preview_chars):
        return False
    entries = list(before.entries)
    # ``before`` was current, every item of the order shown: the entry of ``order[k]`` is at ``shared + k``
    position = dict(zip(state.order, range(shared, len(entries)), strict=True))
    for entry in patched:
        entries[position[entry.item_id]] = entry
    plan_cache.store(state, replace(
        before, generation=state.generation, layout_epoch=state.layout_epoch, order_len=len(state.order),
        working_set=before.working_set + delta, entries=entries, laid_out=len(entries),  # every entry laid out
        counts=[shared + state.stable_len, state.memory_len, len(state.order) - state.stable_len - state.memory_len],
        conversation=before.conversation + delta, step=list(before.step), pending=[],
        # the order is the one a layout made or kept (compaction.apply_plan), so in key order
        in_key_order=True, last_key=layout_key(state.items[state.order[-1]]) if state.order else None,
        # every item re-projected is a lane item, shown before and after (apply_plan): the lane's
        # items, omitted ones, outputs and shown groups are the same, its cost moved as the sums did
        lane=replace(before.lane, tokens=before.lane.tokens + delta) if before.lane is not None else None))
    return True


def _full_rung(state: ContextState) -> plan_cache.PlanCache:
    """The state's plan cache, extended by the items appended since, or rebuilt by a full scan."""
    cache = plan_cache.current(state)
    if cache is None:
        stale = plan_cache.previous(state)
        cache = _scan(state, {e.item_id: e for e in stale.entries} if stale is not None else {})
        plan_cache.store(state, cache)
    elif cache.pending:
        preview = state.config.effective_preview_chars
        memory_end = state.stable_len + state.memory_len
        position = len(state.order) - len(cache.pending)
        for item_id in cache.pending:
            item = state.items[item_id]
            projection = item.projection
            if projection != Projection.OMITTED and item.lifecycle != Lifecycle.ARCHIVED:
                tokens = cost_of(item, projection, preview)
                cache.entries.append(PlanEntry(item_id, projection, tokens))
                cache.counts[0 if position < state.stable_len else 1 if position < memory_end else 2] += 1
                cache.laid_out += position < state.laid_out_len
                if is_capability(item):
                    cache.order_capability += tokens
                else:
                    cache.conversation += tokens
            if cache.lane is not None:
                cache.lane.add((item,), preview)
            if cache.in_key_order:  # still in key order when the item's key is past the last one
                key = layout_key(item)
                if item.lifecycle == Lifecycle.ARCHIVED or (cache.last_key is not None and key < cache.last_key):
                    cache.in_key_order, cache.last_key = False, None
                else:
                    cache.last_key = key
            position += 1
        cache.pending.clear()
    return cache


def in_key_order(state: ContextState) -> bool:
    """``order`` is what a re-layout would make of it (``PlanCache.in_key_order``), as far as
    the state's plan cache knows; False without a current cache (no scan is made for it)."""
    if plan_cache.current(state) is None:
        return False
    return _full_rung(state).in_key_order


def kept_lane_facts(state: ContextState) -> LaneFacts | None:
    """The lane facts the state's plan cache keeps (current, the appended items counted in); None
    without a current cache (no scan is made for it)."""
    if plan_cache.current(state) is None:
        return None
    return _full_rung(state).lane


def _scan(state: ContextState, reuse: dict[str, PlanEntry]) -> plan_cache.PlanCache:
    """The full-rung plan and the working-set sums by one full scan, as a fresh cache: the
    loop of ``plan_request_reference`` on the full rung (where an item keeps its projection),
    without what the full rung does not need (this runs after every compaction). An entry
    equal to one of the previous plan (``reuse``, by item id) is that entry: fewer objects
    to allocate, and a renderer recognises it by identity."""
    preview = state.config.effective_preview_chars
    entries = [PlanEntry(e.item_id, e.projection, e.tokens) for e in state.shared_prefix]
    counts = [len(entries), 0, 0]  # stable, memory, history
    laid_out = len(entries)
    conversation = order_capability = 0
    stable_len, memory_end, laid_out_len = state.stable_len, state.stable_len + state.memory_len, state.laid_out_len
    items = state.items
    omitted, archived, capability_kind = Projection.OMITTED, Lifecycle.ARCHIVED, Kind.CAPABILITY.value
    append, reused = entries.append, reuse.get
    for position, item_id in enumerate(state.order):
        item = items[item_id]
        projection = item.projection
        if projection == omitted or item.lifecycle == archived:
            continue
        tokens = item.tokens.get(projection)  # cost_of written out for a measured projection
        if tokens is None:
            tokens = cost_of(item, projection, preview)
        entry = reused(item_id)
        if entry is None or entry.projection is not projection or entry.tokens != tokens:
            entry = PlanEntry(item_id, projection, tokens)
        append(entry)
        if position >= memory_end:
            counts[2] += 1
        else:
            counts[0 if position < stable_len else 1] += 1
        laid_out += position < laid_out_len
        if item.kind == capability_kind:
            order_capability += tokens
        else:
            conversation += tokens
    # the step context and the working-set sums (scan_working_set_tokens, scan_capability_tokens)
    # in one pass over the items
    step = []
    working_set = capability = archived_items = 0
    for item in items.values():
        projection = item.projection
        if item.kind == capability_kind:
            capability += cost_of(item, projection, preview)
            if item.scope == "step":
                step.append(PlanEntry(item.id, Projection.FULL, cost_of(item, Projection.FULL, preview)))
            elif item.lifecycle == archived:
                archived_items += 1
        elif item.lifecycle != archived:
            measured = item.tokens.get(projection)  # cost_of written out for a measured projection
            working_set += measured if measured is not None and projection != omitted else cost_of(
                item, projection, preview)
        else:
            archived_items += 1
    # whether a re-layout would keep ``order``: it lays out every item neither archived nor step context
    ordered, last_key = key_order(state, len(items) - len(step) - archived_items)
    lane = LaneFacts()
    lane.add(items.values(), preview)
    return plan_cache.PlanCache(
        generation=state.generation, layout_epoch=state.layout_epoch, preview_chars=preview,
        shared_tokens=state.shared_tokens, order_len=len(state.order), working_set=working_set,
        capability=capability, entries=entries, counts=counts, laid_out=laid_out,
        conversation=conversation, order_capability=order_capability, step=step,
        step_capability=sum(e.tokens for e in step), in_key_order=ordered, last_key=last_key, lane=lane,
    )


def plan_request_reference(state: ContextState, ladder: Projection = Projection.FULL,
                           shrunk: dict[str, Projection] | None = None) -> RequestPlan:
    """The plan by a full scan of the working set: O(n), the definition of ``plan_request``
    (``shrunk``: items shown otherwise, ``_shrink_newest``)."""
    if ladder not in OVERFLOW_LADDER:
        raise ValueError(f"ladder must be full, reference or minimal-reference, got {ladder.value!r}")
    preview = state.config.effective_preview_chars
    newest = state.newest_group
    # a child lane's shared prefix comes first, exactly as its parent sent it
    entries = [PlanEntry(item_id=e.item_id, projection=e.projection, tokens=e.tokens) for e in state.shared_prefix]
    counts = [len(entries), 0, 0, 0]  # stable, memory, history, step
    prefix = len(entries)
    conversation = capabilities = 0
    memory_end = state.stable_len + state.memory_len
    step = [i for i in state.items.values() if is_step_capability(i)]
    shrunk = shrunk or {}
    for position, item_id in enumerate(state.order):
        item = state.items[item_id]
        projection = shrunk.get(item_id) or _laddered(item, ladder, newest)
        if projection == Projection.OMITTED or item.lifecycle == Lifecycle.ARCHIVED:
            continue
        tokens = cost_of(item, projection, preview)
        entries.append(PlanEntry(item_id=item_id, projection=projection, tokens=tokens))
        counts[0 if position < state.stable_len else 1 if position < memory_end else 2] += 1
        prefix += position < state.laid_out_len
        if is_capability(item):
            capabilities += tokens
        else:
            conversation += tokens
    for item in step:
        tokens = cost_of(item, Projection.FULL, preview)
        entries.append(PlanEntry(item_id=item.id, projection=Projection.FULL, tokens=tokens))
        counts[3] += 1
        capabilities += tokens
    limit = budget(state)
    fits = conversation <= limit
    plan = RequestPlan(
        entries=entries, stable_entries=counts[0], memory_entries=counts[1], history_entries=counts[2],
        step_entries=counts[3], stable_prefix_entries=prefix, layout_epoch=state.layout_epoch, ladder=ladder,
        total_tokens=conversation, capability_tokens=capabilities, budget=limit, fits=fits,
    )
    if not fits:
        if ladder == OVERFLOW_LADDER[-1] and not shrunk and (smaller := _shrink_newest(state, plan)):
            return plan_request_reference(state, ladder, smaller)
        plan.reason = _why_not(state, plan, ladder, newest)
    return plan


def _shrink_newest(state: ContextState, plan: RequestPlan) -> dict[str, Projection]:
    """The newest turn's tool outputs to show as references so that ``plan`` (the last rung,
    over budget) fits: largest saving first, as few as it takes; none when even all of them
    would not do (``EngineConfig.shrink_newest_group``). Each stays recallable at its address."""
    if not state.config.shrink_newest_group or state.newest_group is None:
        return {}
    preview, over = state.config.effective_preview_chars, plan.total_tokens - plan.budget
    savings = []
    for entry in plan.entries:
        item_id = entry.item_id
        item = state.items.get(item_id)
        if (item is None or item.group != state.newest_group or not item.observation_id or not is_tool_output(item)
                or item.lifecycle == Lifecycle.PINNED or _RANK[entry.projection] >= _RANK[Projection.REFERENCE]):
            continue
        saving = entry.tokens - cost_of(item, Projection.REFERENCE, preview)
        if saving > 0:
            savings.append((saving, item.seq, item_id))
    savings.sort(key=lambda s: (-s[0], s[1]))
    chosen: dict[str, Projection] = {}
    for saving, _, item_id in savings:
        if over <= 0:
            break
        chosen[item_id] = Projection.REFERENCE
        over -= saving
    return chosen if over <= 0 else {}


def plan_fitting(state: ContextState, start: int = 0) -> list[RequestPlan]:
    """The plans of the overflow ladder from rung ``start`` down to the first that fits the
    budget, in order (the last one does not fit when no rung does): what a session plans
    before a provider call, so that nothing over budget is ever sent."""
    plans = []
    for ladder in OVERFLOW_LADDER[start:]:
        plans.append(plan_request(state, ladder))
        if plans[-1].fits:
            break
    return plans


def _laddered(item: Item, ladder: Projection, newest: int | None) -> Projection:
    """The projection of ``item`` on the overflow ladder (never a larger one than it has)."""
    current = item.projection
    if ladder == Projection.FULL or item.lifecycle == Lifecycle.PINNED or item.group == newest:
        return current
    if is_tool_output(item) and item.observation_id:
        wanted = ladder
    elif ladder == Projection.MINIMAL_REFERENCE and item.kind == Kind.ASSISTANT.value:
        wanted = Projection.MINIMAL_REFERENCE  # old assistant prose minimised
    else:
        return current
    return wanted if _RANK[wanted] > _RANK[current] else current


def _why_not(state: ContextState, plan: RequestPlan, ladder: Projection, newest: int | None) -> str:
    """Name the protected items that keep the request over budget (largest first)."""
    protected = []
    active = set(state.active_episodes)
    for entry in plan.entries[len(state.shared_prefix):]:
        item = state.items[entry.item_id]
        if is_capability(item):
            continue
        if item.lifecycle == Lifecycle.PINNED or item.group == newest or item.episode in active:
            protected.append((entry.tokens, item))
    protected.sort(key=lambda pair: (-pair[0], pair[1].seq, pair[1].id))
    protected_total = sum(tokens for tokens, _ in protected)
    listed = ", ".join(f"{i.id} ({i.kind}, {i.lifecycle.value}, {t} tokens)" for t, i in protected[:_LISTED_PROTECTED])
    over = plan.total_tokens - plan.budget
    head = f"request needs {plan.total_tokens} tokens, {over} over the budget of {plan.budget} (ladder {ladder.value})"
    if protected_total > plan.budget:
        return f"{head}; protected items alone need {protected_total} tokens and do not fit: {listed}"
    hint = "compact first (plan_fallback), then retry the ladder" if ladder == Projection.FULL else "compact first"
    return f"{head}; protected items need {protected_total} tokens ({listed}); {hint}"
