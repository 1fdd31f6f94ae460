"""One lane's orchestration: its engine state, its sequence, and the two-phase
operations that need activities (compaction, condensation, storing items).

Workflow code only: deterministic, no I/O except through activities. Every id
(items, observations, events) is derived from the lane's sequence, so a replayed
workflow asks for the same writes and the store keeps one of each. Callers hold
``lock`` around anything that adds items, so seqs reach the engine in order.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.context import engine
    from workflows.context.items import Item, Kind, Projection
    from workflows.context.plan import ApplyResult, CompactionPlan, Rejection
    from workflows.lane_events import compaction_events, event
    from workflows.lane_state import LaneState
    from workflows.messages import (
        CompactionSettings,
        CondensationInput,
        CondensationOutcome,
        CondenseResult,
        ExternalItem,
        GeneratedItem,
        GeneratedItemsInput,
        IngestItemsInput,
        PlanDelta,
        StoreUserMessageInput,
    )

# Oversized user input reaches the model as a bounded source reference, not verbatim.
OVERSIZED_INPUT_CHARS = 32_000
MAIN_LANE = "main"
# The fallback's cache-aware sweep (EngineConfig.cache_aware_sweep) plans other compactions,
# hence other commands: runs of either workflow recorded before it replay with it off.
CACHE_AWARE_SWEEP_PATCH = "cache-aware-sweep"


class Lane:
    def __init__(self, data: LaneState) -> None:
        self.data = data
        self.lock = asyncio.Lock()

    @property
    def state(self) -> engine.ContextState:
        return self.data.context

    @property
    def preview_chars(self) -> int:
        return self.state.config.effective_preview_chars

    def next_seq(self) -> int:
        seq = self.data.next_seq
        self.data.next_seq += 1
        return seq

    def next_event_seq(self) -> int:
        seq = self.data.next_event_seq
        self.data.next_event_seq += 1
        return seq

    @property
    def event_lane(self) -> str:
        """Engine events are logged apart from the item events, which use item seqs."""
        return f"{self.data.lane}:events"

    @property
    def is_main(self) -> bool:
        return self.data.lane == MAIN_LANE

    def item_id(self, seq: int) -> str:
        # item ids are unique in the session: a subagent lane's carry its lane name
        return f"itm-{seq:06d}" if self.is_main else f"{self.data.lane}-itm-{seq:06d}"

    def observation_id(self, seq: int) -> str:
        # observation ids are global in the store: the session id (and lane) make them unique
        if self.is_main:
            return f"obs-{self.data.session_id}-{seq:06d}"
        return f"obs-{self.data.session_id}-{self.data.lane}-{seq:06d}"

    # --- items -------------------------------------------------------------------------

    async def add_text(self, text: str, *, kind: str, role: str, task_id: str | None) -> Item:
        """Store a user/system text and add it to the engine."""
        seq = self.next_seq()
        item = await calls.store_text(
            StoreUserMessageInput(
                session_id=self.data.session_id,
                lane=self.data.lane,
                item_id=self.item_id(seq),
                seq=seq,
                task_id=task_id or "",
                text=text,
                kind=kind,
                role=role,
                model=self.data.model,
                preview_chars=self.preview_chars,
                observation_id=self.observation_id(seq) if len(text) > OVERSIZED_INPUT_CHARS else None,
            )
        )
        return engine.add_item(self.state, item)

    async def add_external(self, items: list[ExternalItem]) -> list[Item]:
        """Items an external agent appended: stored and measured by an activity first."""
        first = self.data.next_seq
        self.data.next_seq += len(items)
        stored = await calls.ingest_items(
            IngestItemsInput(
                session_id=self.data.session_id,
                lane=self.data.lane,
                model=self.data.model,
                preview_chars=self.preview_chars,
                task_id=self.state.current_task,
                first_seq=first,
                items=items,
            )
        )
        return [engine.add_item(self.state, item) for item in stored]

    # --- requests ----------------------------------------------------------------------

    def plan_delta(self, entries: list[tuple[str, Projection]]) -> PlanDelta:
        """The plan as a change against the previous one (usually: items appended),
        so that history grows by O(1) per turn."""
        self.data.plan_version += 1
        version, base = self.data.plan_version, self.data.last_plan
        self.data.last_plan = entries
        if base and entries[: len(base)] == base:
            return PlanDelta(version=version, base_version=version - 1, entries=entries[len(base):])
        return PlanDelta(version=version, base_version=None, entries=entries)

    # --- compaction and condensation (two-phase) ---------------------------------------

    async def compact_if_needed(self, settings: CompactionSettings | None = None) -> ApplyResult | None:
        """Compaction before a request: one bounded LLM condensation when enabled, else (or
        when it fails) the deterministic fallback. Callers hold ``lock``."""
        if not engine.needs_compaction(self.state):
            return None
        if settings is not None and settings.enabled and await self._condense_with_llm(settings):
            return None
        return await self.apply(engine.plan_fallback(self.state))

    async def _condense_with_llm(self, settings: CompactionSettings) -> bool:
        """True when an LLM-written memory replaced the condensed prefix."""
        source = engine.condensation_source(self.state, settings.condenser_window)
        if not source.item_ids:
            return False
        if (self.data.condensation_failures >= settings.max_consecutive_failures
                and source.source_tokens < self.data.condensation_blocked_below):
            await self.log_event("context.condensation.skipped", {
                "reason": "loop guard", "failures": self.data.condensation_failures,
                "source_tokens": source.source_tokens, "retry_at_tokens": self.data.condensation_blocked_below})
            return False
        if not source.fits:
            await self.log_event("context.condensation.oversized", {"source_tokens": source.source_tokens,
                                                                "reason": source.reason})
            return False
        await self.log_event("context.condensation.started", {"source_tokens": source.source_tokens,
                                                          "items": len(source.item_ids)})
        outcome = await self._condensation_outcome(settings, source)
        if outcome is not None and outcome.attempts > 1:
            await self.log_event("context.condensation.retried", {"attempts": outcome.attempts, "errors": outcome.errors})
        if outcome is None or outcome.status != "succeeded":
            status = "failed" if outcome is None else outcome.status
            await self._condensation_failed(settings, source.source_tokens, status,
                                            [] if outcome is None else outcome.errors)
            return False
        planned = engine.plan_condense(
            self.state, engine.MemoryDoc.model_validate(outcome.memory), mode="llm",
            expected_generation=source.generation, measured_memory_tokens=outcome.memory_tokens,
        )
        if isinstance(planned, Rejection):
            if planned.status == "stale":  # the lane changed while the condenser ran
                await self.log_event("context.condensation.discarded", {"reason": planned.reason})
            else:
                await self._condensation_failed(settings, source.source_tokens, "invalid", [planned.reason])
            return False
        result = await self.apply(planned)
        self.data.condensation_failures = 0
        await self.log_event("context.condensation.succeeded", {
            "memory_id": self.state.memory_id, "memory_tokens": outcome.memory_tokens,
            "archived": len(result.archived), "latency_ms": outcome.latency_ms})
        return True

    async def _condensation_outcome(self, settings: CompactionSettings, source) -> CondensationOutcome | None:
        """Run the activity without holding the lane: items may arrive meanwhile, and a
        result made stale by them is discarded (None: the attempt failed)."""
        request = CondensationInput(
            session_id=self.data.session_id,
            lane=self.data.lane,
            source_item_ids=source.item_ids,
            anchor_item_ids=source.anchor_ids,
            live_memory_item_id=self.state.memory_id,
            known_observation_ids=sorted(engine.known_observation_ids(self.state)),
            model=settings.condenser_model,
            base_url=settings.condenser_base_url,
            condenser_window=settings.condenser_window,
            preview_chars=min(4_000, self.preview_chars),
            timeout_seconds=settings.timeout_seconds,
        )
        self.lock.release()
        try:
            return await calls.condense_with_llm(request)
        except ActivityError:
            return None
        finally:
            await self.lock.acquire()

    async def _condensation_failed(self, settings: CompactionSettings, source_tokens: int, status: str,
                                   errors: list[str]) -> None:
        self.data.condensation_failures += 1
        if self.data.condensation_failures >= settings.max_consecutive_failures:
            self.data.condensation_blocked_below = source_tokens + settings.retry_after_growth_tokens
        await self.log_event(f"context.condensation.{status}", {
            "errors": errors[:5], "consecutive_failures": self.data.condensation_failures})

    async def log_event(self, kind: str, payload: dict) -> None:
        await calls.record_events(self.data.session_id, [event(kind, payload, self.next_event_seq(), self.event_lane)])

    async def log_abandoned_episodes(self, episode_ids: list[str], reason: str) -> None:
        """Episodes a task end or a recovery closed: the event log says so (the inspector and
        a parent repairing this lane read episode state from it)."""
        events = [event("episode.abandoned", {"episode_id": e, "reason": reason}, self.next_event_seq(), self.event_lane)
                  for e in episode_ids]
        await calls.record_events(self.data.session_id, events)

    async def apply(self, plan: CompactionPlan, measured: dict[str, int] | None = None) -> ApplyResult:
        """Measure the text the engine generated (tiktoken stays out of workflow code),
        apply the plan, then store the created items and log what happened."""
        if measured is None and plan.generated:
            measured = await calls.measure_texts(self.data.model, {g.key: g.text for g in plan.generated})
        tokens = {key: {Projection.FULL: count} for key, count in (measured or {}).items()}
        result = engine.apply_plan(self.state, plan, tokens)
        if result.created:
            await calls.store_generated(
                GeneratedItemsInput(
                    session_id=self.data.session_id,
                    lane=self.data.lane,
                    items=[
                        GeneratedItem(item=self.state.items[c.item_id], text=c.text, number=_generated_number(c.item_id))
                        for c in result.created
                    ],
                )
            )
        await calls.record_events(self.data.session_id, compaction_events(plan, result, self.next_event_seq, self.event_lane))
        return result

    async def condense(self, raw_memory: dict | str) -> CondenseResult:
        """Explicit ``condense_context``: deterministic, no model call. A rejected or
        no-op call changes nothing but the event log."""
        doc, errors = engine.parse_memory(raw_memory)
        if doc is None:
            return await self._condense_refused(Rejection(status="rejected", reason="; ".join(errors)))
        text = engine.memory_text(doc)
        measured = await calls.measure_texts(self.data.model, {Kind.MEMORY.value: text})
        planned = engine.plan_condense(self.state, doc, measured_memory_tokens=measured[Kind.MEMORY.value])
        if isinstance(planned, Rejection):
            return await self._condense_refused(planned)
        result = await self.apply(planned, measured)
        if not result.applied:
            return await self._condense_refused(Rejection(status="rejected", reason=result.reason))
        return CondenseResult(
            status="accepted", reason=result.reason, memory_id=self.state.memory_id, archived=len(result.archived)
        )

    async def _condense_refused(self, rejection: Rejection) -> CondenseResult:
        await self.log_event(f"context.condense.{rejection.status}", {"reason": rejection.reason})
        return CondenseResult(status=rejection.status, reason=rejection.reason)


def _generated_number(item_id: str) -> int:
    """Generated ids are "<kind>-<n>" with n unique in the lane."""
    return int(item_id.rsplit("-", 1)[1])
