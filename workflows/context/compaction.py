"""When to compact, the deterministic fallback plan, and applying any plan atomically."""

from __future__ import annotations

from itertools import chain, filterfalse

from . import ids, plan_cache
from .budget import budget, cost, working_set_tokens
from .compaction_plan import ApplyResult, CompactionPlan, CreatedItem
from .draft import Draft
from .episodes import EpisodeStatus
from .errors import EngineError
from .items import Item, Lifecycle, Projection
from .layout import keep_layout, layout_unchanged, rebuild_layout
from .ledger import ContextState, GeneratedRef
from .notice import NOTICE
from .passes import run_fallback_passes
from .reproject import reproject
from .request_plan import PlanEntry, refresh_plan_cache

MeasuredTokens = dict[str, dict[Projection, int]]


def needs_compaction(state: ContextState) -> bool:
    """With LLM condensation: at trigger pressure (80 %). Without: only over the budget."""
    tokens, limit = working_set_tokens(state), budget(state)
    if state.config.llm_condensation:
        return tokens >= state.config.trigger_ratio * limit
    return tokens > state.config.compact_at(limit)


def compaction_room(state: ContextState) -> int:
    """Working-set tokens that may be added before ``needs_compaction`` says yes (with LLM
    condensation one token short of the trigger when it falls between two tokens)."""
    limit, config = budget(state), state.config
    threshold = int(config.trigger_ratio * limit) - 1 if config.llm_condensation else config.compact_at(limit)
    return threshold - working_set_tokens(state)


def over_target(state: ContextState) -> bool:
    """The working set is above the target a compaction aims for (EngineConfig.compaction_target)."""
    return working_set_tokens(state) > state.config.compaction_target(budget(state))


def plan_fallback(state: ContextState) -> CompactionPlan:
    """The deterministic checkpoint fallback: passes 1-3 until the target is met."""
    draft = Draft(state, "fallback")
    run_fallback_passes(draft)
    return draft.to_plan()


def apply_plan(state: ContextState, plan: CompactionPlan, measured_tokens: MeasuredTokens | None = None) -> ApplyResult:
    """Apply ``plan`` all at once, or not at all.

    ``measured_tokens`` maps a generated key (its kind) to its measured costs; a text left
    unmeasured is charged its estimate. A plan made at another generation is refused as
    stale: the lane changed meanwhile, so the caller replans.
    """
    if plan.generation != state.generation:
        return ApplyResult(applied=False, stale=True, reason=(
            f"stale plan: made at generation {plan.generation}, the state is at {state.generation}; replan"))
    measured = measured_tokens or {}
    _validate(state, plan, measured)
    if plan.is_empty:
        return ApplyResult(applied=True, reason="nothing to do", tokens_after=working_set_tokens(state))
    result = ApplyResult(applied=True, reason=f"{plan.mode} plan applied")
    # the request plan as it is now, which a plan that only re-projects items turns into the
    # next one entry by entry (request_plan.refresh_plan_cache); a current one is extended by
    # the items appended since (cheap), a stale one is left to the one full scan at the end
    before, order_before = plan_cache.current(state), state.order
    if before is not None:
        refresh_plan_cache(state)
    items, archived = state.items, Lifecycle.ARCHIVED
    keys_kept = True  # no laid-out item changes its layout key
    # the new request entries of the items re-projected (read here, while the items are at
    # hand) and what they change the sums by, for the plan cache's patch; the patch needs every
    # item re-projected shown before and after
    patched: list[PlanEntry] = []
    delta, shown = 0, True
    for run in plan.runs:
        if run.lifecycle == archived:
            for item_id in run.item_ids:
                _archive(state, items[item_id], run.reason, result)
            continue
        moved = reproject(state, run, patched)
        keys_kept = keys_kept and moved.keys_kept
        shown = shown and moved.shown
        delta += moved.delta
    for text in plan.generated:
        _replace_generated(state, text.key, text.text, text.text_hash, text.role,
                           measured.get(text.key, {}).get(Projection.FULL, text.estimated_tokens), plan, result)
    if any(text.key == NOTICE for text in plan.generated):
        state.notices += 1  # a pressure streak announced (notice.py)
        state.notice_task = state.current_task
    for episode_id in plan.archived_episodes:
        state.episodes[episode_id].status = EpisodeStatus.ARCHIVED
    if plan.checkpoint is not None:
        state.checkpoint = plan.checkpoint.copy()
    if plan.summary is not None:
        state.summary = plan.summary.copy()
        state.counters.rolled_into_summary = state.summary.rolled
    _count(state, plan)
    if keys_kept and not result.archived and not result.created and (
            (before is not None and before.in_key_order) or layout_unchanged(state)):
        keep_layout(state)  # what rebuild_layout would do, without sorting the working set again
    else:
        rebuild_layout(state)
    state.generation += 1
    # the next request's plan and the sums (tokens_after): patched, or one full scan
    refresh_plan_cache(state, before if shown and not result.archived and not result.created else None,
                       order_before, patched, delta)
    result.tokens_after = working_set_tokens(state)
    return result


def _validate(state: ContextState, plan: CompactionPlan, measured: MeasuredTokens) -> None:
    """Every check happens before the first change, so a refused plan changes nothing."""
    missing = list(filterfalse(state.items.__contains__, chain.from_iterable(run.item_ids for run in plan.runs)))
    if missing:
        raise EngineError(f"plan names items not in the working set: {missing[:10]}")
    keys = {g.key for g in plan.generated}
    unknown = sorted(set(measured) - keys)
    if unknown:
        raise EngineError(f"measured tokens for texts the plan does not generate: {unknown}")
    for key, costs in measured.items():
        if any(not isinstance(v, int) or v < 0 for v in costs.values()):
            raise EngineError(f"measured tokens of {key!r} must be non-negative integers: {costs}")
    unknown_episodes = [e for e in plan.archived_episodes if e not in state.episodes]
    if unknown_episodes:
        raise EngineError(f"plan archives unknown episodes: {unknown_episodes}")


def _archive(state: ContextState, item: Item, reason: str, result: ApplyResult) -> None:
    """The item leaves workflow state; its metadata goes back to the caller to persist."""
    state.counters.archived_items += 1
    state.counters.archived_tokens += cost(state, item)
    state.counters.archived_observations += item.observation_id is not None
    item.lifecycle, item.projection, item.reason = Lifecycle.ARCHIVED, Projection.OMITTED, reason
    del state.items[item.id]
    for kind, ref in list(state.generated.items()):
        if ref.item_id == item.id:
            del state.generated[kind]
    result.archived.append(item)


def _replace_generated(
    state: ContextState, key: str, text: str, digest: str, role: str, tokens: int,
    plan: CompactionPlan, result: ApplyResult,
) -> None:
    """The one live item of kind ``key`` is replaced (never edited: ids are immutable content)."""
    state.counters.generated_items += 1
    item_id = ids.generated_item_id(state.config.id_prefix, key, state.counters.generated_items)
    old_id = state.generated_id(key)
    if old_id is not None and old_id in state.items:
        _archive(state, state.items[old_id], f"{key}:replaced-by-{item_id}", result)
    state.items[item_id] = Item(
        id=item_id, seq=state.last_seq, kind=key, role=role, lifecycle=Lifecycle.PINNED,
        projection=Projection.FULL, reason=f"{plan.mode}:generated", tokens={Projection.FULL: tokens},
        size_chars=len(text), task=state.current_task,
    )
    state.generated[key] = GeneratedRef(item_id=item_id, text_hash=digest)
    result.created.append(CreatedItem(key=key, item_id=item_id, text=text))


def _count(state: ContextState, plan: CompactionPlan) -> None:
    counters = state.counters
    if plan.mode == "assembly":
        return  # not a compaction
    counters.compactions += 1
    if plan.mode == "fallback":
        counters.fallback_compactions += 1
    elif plan.mode == "explicit":
        counters.explicit_condensations += 1
    else:
        counters.llm_condensations += 1
