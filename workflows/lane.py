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

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.context import engine
    from workflows.context.items import Item, Kind, Projection
    from workflows.context.plan import ApplyResult, CompactionPlan, Rejection
    from workflows.lane_events import compaction_events, event
    from workflows.lane_state import LaneState
    from workflows.messages import (
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

    def item_id(self, seq: int) -> str:
        return f"itm-{seq:06d}"

    def observation_id(self, seq: int) -> str:
        # observation ids are global in the store: the session id makes them unique
        return f"obs-{self.data.session_id}-{seq:06d}"

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

    async def compact_if_needed(self) -> ApplyResult | None:
        """The deterministic fallback, when the working set needs it."""
        if not engine.needs_compaction(self.state):
            return None
        return await self.apply(engine.plan_fallback(self.state))

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
        await calls.record_events(
            self.data.session_id,
            [event(f"context.condense.{rejection.status}", {"reason": rejection.reason}, self.next_event_seq(), self.event_lane)],
        )
        return CondenseResult(status=rejection.status, reason=rejection.reason)


def _generated_number(item_id: str) -> int:
    """Generated ids are "<kind>-<n>" with n unique in the lane."""
    return int(item_id.rsplit("-", 1)[1])
