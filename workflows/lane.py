"""One lane's orchestration: its engine state, its sequence, and the two-phase
operations that need activities (compaction, condensation, storing items).

Workflow code only: deterministic, no I/O except through activities. Every id
(items, observations, events) is derived from the lane's sequence, so a replayed
workflow asks for the same writes and the store keeps one of each. Callers hold
``lock`` around anything that adds items, so seqs reach the engine in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows import patches
    from workflows.context import ApplyResult, CompactionPlan, Item, Kind, Projection, Rejection, cost_profile, engine, ids
    from workflows.contract import rejections
    from workflows.contract.condense import CondensationInput, CondensationOutcome
    from workflows.contract.events import EventSpec
    from workflows.contract.items import GeneratedItem, GeneratedItemsInput, IngestItemsInput, StoreTextInput
    from workflows.contract.lane_events import EPISODE_ABANDONED, compaction_events, event, request_event
    from workflows.contract.lane_state import LaneState
    from workflows.contract.lanes import LaneConfig
    from workflows.contract.model import ModelCallInput, PlanDelta
    from workflows.contract.session import (
        GIVE_UP_SECONDS,
        CompactionSettings,
        CondenseResult,
        ExternalItem,
        ReplaySpec,
        SessionConfig,
        budget_notice_on,
    )
    from workflows.later_writes import LaterWrites, SettlingLock
    from workflows.usage import CALIBRATION_RELAXED, UsagePolicy, record_usage

# Engine behaviours that plan other compactions (hence other commands) than the code
# recorded histories ran: each is on only in runs that started after it existed
# (EngineConfig option -> workflow.patched id). Decided once per run, in this order.
ENGINE_PATCHES = {"cache_aware_sweep": "cache-aware-sweep", "sweep_never_grows": "sweep-never-grows",
                  "concluded_in_markers": "concluded-episode-markers", "sweep_keeps_markers": "sweep-keeps-markers",
                  "bound_active_episodes": "bound-active-episodes", "roll_kept_when_unfit": "roll-kept-when-unfit",
                  "shrink_newest_group": "shrink-newest-group"}
# The budget guarantee and the spec's remaining rules (EngineConfig.rules_version 2).
RULES_2_PATCH = "engine-rules-2"
# New sessions run with config.cost_profile (issue 16). Only at a session's start: it changes
# the preview size items are measured with, so a restored run keeps its session's values.
COST_PROFILE_PATCH = "cost-profile"
# Sessions started since list no names of archived items in the checkpoint, and show each
# archived output's call (issue 29, config.NAMES_INDEX_PROFILE); also only at a session's start.
CHECKPOINT_CONTENT_PATCH = "checkpoint-content"
# Sessions started since show key lines of archived items in the checkpoint (issue 29,
# config.LINES_PROFILE); also only at a session's start.
CHECKPOINT_LINES_PATCH = "checkpoint-lines"
# Sessions started since preview large tool outputs with lines of their middle and keep a
# larger pool of archived lines (issue 29, config.PREVIEW_LINES_PROFILE); also only at a
# session's start (items record the preview they were measured with).
PREVIEW_LINES_PATCH = "preview-lines"
# Sessions started since tell their model of compactions (EngineConfig.budget_notice); also
# only at a session's start, so a restored run keeps what its session started with.
BUDGET_NOTICE_PATCH = "budget-notice"
# Gates commands added after histories were recorded (tests/histories replays them):
# episode begin/end/abandon events in the main lane.
EPISODE_EVENTS_PATCH = "lane-episode-events"
# A compaction's generated texts are measured by a local activity, and its created items and
# events written by one activity (Lane.apply): one activity round trip instead of three.
ONE_WRITE_COMPACTION_PATCH = "one-write-compaction"
# Stores of external items whose ids turned out taken (see store_external) before the call is refused.
STORE_ATTEMPTS = 3


def patched_engine_options() -> dict[str, bool | int]:
    options: dict[str, bool | int] = {option: patches.patched(patch_id) for option, patch_id in ENGINE_PATCHES.items()}
    options["rules_version"] = 2 if patches.patched(RULES_2_PATCH) else 1
    return options


def new_session_profile(llm_condensation: bool, budget_notice: bool = False) -> dict[str, int | float | bool]:
    """The EngineConfig values a session started now runs with besides the defaults
    (``budget_notice``: the session wants the budget notice; Temporal is asked only then)."""
    notice: dict[str, int | float | bool] = {}
    if budget_notice and patches.patched(BUDGET_NOTICE_PATCH):
        notice["budget_notice"] = True
    if not patches.patched(COST_PROFILE_PATCH):
        return notice
    if not patches.patched(CHECKPOINT_CONTENT_PATCH):
        return {**notice, **cost_profile(llm_condensation, names_index=True)}
    if not patches.patched(CHECKPOINT_LINES_PATCH):
        return {**notice, **cost_profile(llm_condensation, key_lines=False)}
    return {**notice, **cost_profile(llm_condensation, preview_lines=patches.patched(PREVIEW_LINES_PATCH))}


def session_engine_config(cfg: SessionConfig, tool_definition_tokens: int,
                          engine_options: dict[str, bool | int]) -> engine.EngineConfig:
    """The engine configuration a new session starts with: its settings, the measured tool
    definitions, the patched engine options, then the profile of sessions started now."""
    return engine.EngineConfig(
        context_window=cfg.context_window,
        max_output_tokens=cfg.max_output_tokens,
        tool_definition_tokens=tool_definition_tokens,
        budget_tokens=cfg.budget_tokens,
        llm_condensation=cfg.compaction.enabled,
        model_known=cfg.model_known,
        recall=cfg.recall,
        generated_role=cfg.generated_role,
        keep_task_statement=cfg.tasks == "conversation",
        **engine_options,
        **new_session_profile(cfg.compaction.enabled, budget_notice_on(cfg)),
    )


@dataclass(frozen=True)
class LoopSettings:
    """What the agent loop runs a lane with: the session's (or subagent's) settings, handed down once."""

    session_id: str
    model: str
    max_output_tokens: int
    tools: list[str]
    compaction: CompactionSettings
    replay: ReplaySpec | None
    tool_network: bool = False
    give_up_seconds: float = GIVE_UP_SECONDS

    @classmethod
    def of(cls, session_id: str, config: SessionConfig | LaneConfig, tools: list[str]) -> LoopSettings:
        """The loop settings of a session's configuration or of a subagent lane's (which the
        session derived from its own), with the tools the lane offers."""
        return cls(session_id=session_id, model=config.model, max_output_tokens=config.max_output_tokens,
                   tools=tools, compaction=config.compaction, replay=config.replay,
                   tool_network=config.tool_network, give_up_seconds=config.give_up_seconds)

    @property
    def give_up(self) -> timedelta:
        return timedelta(seconds=self.give_up_seconds)


class Lane:
    def __init__(self, data: LaneState, usage: UsagePolicy | None = None) -> None:
        self.data = data
        # generated items' writes a step did not wait for; taking the lock waits for them
        self.later = LaterWrites()
        self.lock = SettlingLock(self.later)
        self.store_generated_later = False  # while an external step plans (see ExternalTasks.prepare)
        self.carry_generated = False  # while a hosted step plans (see AgentLoop._step)
        self.usage = usage or UsagePolicy()
        # Events that travel with the lane's next activity (the step's tool call) instead of a
        # record_events of their own; flushed by the end of the step (never carried across runs).
        self.pending_events: list[EventSpec] = []

    @property
    def state(self) -> engine.ContextState:
        return self.data.context

    @property
    def preview_chars(self) -> int:
        return self.state.config.effective_preview_chars

    @property
    def preview_lines(self) -> bool:
        return self.state.config.preview_lines

    @property
    def rules_2(self) -> bool:
        return self.state.config.rules_version >= 2

    @property
    def bound_above_tokens(self) -> int | None:
        """Full cost above which an activity archives an item's text as an observation, so
        that it can enter bounded (rules 2; None under rules 1)."""
        return self.state.config.max_item_tokens if self.rules_2 else None

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
        return ids.events_lane(self.data.lane)

    def item_id(self, seq: int) -> str:
        return ids.item_id(self.data.lane, seq)

    def observation_id(self, seq: int) -> str:
        return ids.observation_id(self.data.session_id, self.data.lane, seq)

    # --- items -------------------------------------------------------------------------

    async def add_text(self, text: str, *, kind: str, role: str, task_id: str | None) -> Item:
        """Store a user/system text and add it to the engine."""
        item = await calls.store_text(self.text_input(text, kind=kind, role=role, task_id=task_id))
        return engine.add_item(self.state, item)

    def text_input(self, text: str, *, kind: str, role: str, task_id: str | None) -> StoreTextInput:
        """What stores a user/system text as the lane's next item (its seq taken here)."""
        seq = self.next_seq()
        bounded = self.rules_2 and kind != Kind.SYSTEM  # the system prompt is never shrunk
        return StoreTextInput(
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
            observation_id=self.observation_id(seq) if bounded or len(text) > ids.OVERSIZED_INPUT_CHARS else None,
            bound_above_tokens=self.bound_above_tokens if bounded else None,
        )

    async def add_external(self, items: list[ExternalItem]) -> list[Item]:
        """Items an external agent appended: stored and measured by an activity first."""
        stored = await self.store_external(items, self.state.current_task)
        return [engine.add_item(self.state, item) for item in stored]

    async def store_external(self, items: list[ExternalItem], task_id: str | None, local: bool = False,
                             later: bool = False) -> list[Item]:
        """Items an external agent appended, stored and measured by an activity (not yet
        added to the engine); ``local``: a local activity (steps of runs recorded before
        STEP_ITEMS_ACTIVITY_PATCH); ``later``: measured within this workflow task and stored
        by a write the step does not wait for (``later_writes``).

        Ids whose rows hold other content (seqs a lost workflow task of older code handed to
        another call) are never written over: the activity stores nothing and names the lane's
        next free seq, and the items are stored there instead (ids are derived from seqs)."""
        events = self.take_pending_events()
        for attempt in range(1, STORE_ATTEMPTS + 1):
            seqs = [self.next_seq() for _ in items]
            inp = IngestItemsInput(
                session_id=self.data.session_id,
                lane=self.data.lane,
                model=self.data.model,
                preview_chars=self.preview_chars,
                task_id=task_id,
                first_seq=seqs[0],
                items=items,
                item_ids=[self.item_id(seq) for seq in seqs],
                observation_ids=[self.observation_id(seq) for seq in seqs],
                bound_above_tokens=self.bound_above_tokens,
                recall=self.state.config.recall,
                preview_lines=self.preview_lines,
                events=events,
            )
            try:
                if not later:
                    return await calls.ingest_items(inp, local)
                measured = await calls.measure_items(inp)
                self.later.ingest(inp, measured)
                return measured
            except (ActivityError, FailureError) as error:
                free = calls.conflict_free_seq(error)
                if free is None:
                    raise
                if attempt == STORE_ATTEMPTS:
                    self.pending_events[:0] = events  # the call stored nothing: its events wait for the next
                    raise rejections.store_conflict(inp.item_ids) from None
                self.data.next_seq = max(self.data.next_seq, free)
        raise AssertionError("unreachable")

    # --- requests ----------------------------------------------------------------------

    async def plan_within_budget(self, start: int = 0, turn: int | None = None) -> tuple[int, engine.RequestPlan]:
        """(rung, plan): the first rung of the overflow ladder, from ``start``, whose plan fits
        the budget, planned before any provider call (rules 2; each rung passed over is
        logged). None fitting raises the typed ``RequestDoesNotFit`` rejection, logged as
        ``context.request.unfit``. Under rules 1: the plan of rung ``start``, fitting or not."""
        if not self.rules_2:
            return start, engine.plan_request(self.state, ladder=engine.OVERFLOW_LADDER[start])
        plans = engine.plan_fitting(self.state, start)
        if not plans[-1].fits and self.state.config.token_ratio > 1:
            plans = await self._plan_uncalibrated(start, turn, plans[-1])
        for plan in plans:
            facts = {"turn": turn, "ladder": plan.ladder.value, "request_tokens": plan.total_tokens,
                     "budget": plan.budget}
            if plan.fits:
                return engine.OVERFLOW_LADDER.index(plan.ladder), plan
            if plan is plans[-1]:
                await self.log_event("context.request.unfit", {**facts, "reason": plan.reason})
                raise rejections.request_unfit(plan.reason)
            following = engine.OVERFLOW_LADDER[engine.OVERFLOW_LADDER.index(plan.ladder) + 1]
            await self.log_event("context.overflow.planned", {**facts, "next": following.value})
        raise AssertionError("unreachable: start is past the ladder")

    def request_event(self, plan: engine.RequestPlan, seq: int, task_id: str | None,
                      turn: int | None) -> EventSpec:
        """The pressure sample of ``plan``, keyed by ``seq`` (the item seq its answer takes)."""
        return request_event(self.data.lane, seq, task_id=task_id, turn=turn, request_tokens=plan.total_tokens,
                             working_set_tokens=engine.working_set_tokens(self.state), budget=plan.budget,
                             ladder=plan.ladder.value, stable_prefix_digest=plan.stable_prefix_digest(),
                             parked_observations=self.state.counters.archived_observations)

    async def _plan_uncalibrated(self, start: int, turn: int | None, unfit: engine.RequestPlan) -> list[engine.RequestPlan]:
        """Nothing fits the calibrated budget: plan on our own count instead (logged), so that a
        provider's counts never make a session unable to send what fits by ours."""
        calibrated = self.state.config
        self.state.config = calibrated.model_copy(update={"token_ratio": 1.0})
        try:
            plans = engine.plan_fitting(self.state, start)
        finally:
            self.state.config = calibrated
        await self.log_event(CALIBRATION_RELAXED, {
            "turn": turn, "token_ratio": calibrated.token_ratio, "calibrated_budget": unfit.budget,
            "budget": plans[-1].budget, "request_tokens": unfit.total_tokens, "fits": plans[-1].fits})
        return plans

    def model_call(self, s: LoopSettings, plan: engine.RequestPlan, response_seq: int, task_id: str,
                   turn: int) -> ModelCallInput:
        """The model activity's one input for ``plan``: the lane's ids, delta and bounds with
        the loop's settings (the plan version moves on: call once per model call)."""
        return ModelCallInput(
            session_id=s.session_id,
            lane=self.data.lane,
            plan=self.plan_delta(plan.pairs),
            response_item_id=self.item_id(response_seq),
            response_seq=response_seq,
            task_id=task_id,
            model=s.model,
            max_output_tokens=s.max_output_tokens,
            preview_chars=self.preview_chars,
            tools=s.tools,
            replay=s.replay,
            replay_turn=turn,
            request_event=self.request_event(plan, response_seq, task_id, turn),
            observation_id=self.observation_id(response_seq) if self.rules_2 else None,
            bound_above_tokens=self.bound_above_tokens,
            price=self.usage.price(s.model),
            generated=self.later.carried,
        )

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
            return await self.fallback_if_over_target()
        return await self.apply(engine.plan_fallback(self.state))

    async def fallback_if_over_target(self) -> ApplyResult | None:
        """After a condensation (LLM or explicit): the deterministic fallback when the result
        is still above the target (rules 2; a memory can outweigh what it archived)."""
        if not self.rules_2 or not engine.over_target(self.state):
            return None
        return await self.apply(engine.plan_fallback(self.state))

    async def assemble(self) -> ApplyResult | None:
        """Keep the stable segment current before a request (episode markers, pinned items,
        old submissions rolled into the summary); nothing when it already is."""
        plan = engine.plan_assembly(self.state)
        return None if plan is None else await self.apply(plan)

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
                                            [] if outcome is None else outcome.errors, outcome)
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
            "archived": len(result.archived), "latency_ms": outcome.latency_ms, **_condenser_facts(outcome)})
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
            memory_contract=self.rules_2,
            prices=self.usage.prices or None,
        )
        await self.later.settle()  # the condenser reads the source from the store
        self.lock.release()
        try:
            outcome = await calls.condense_with_llm(request)
        except ActivityError:
            return None
        finally:
            await self.lock.take()  # no settling: a failure there must not release the caller's lock
        await record_usage(self, "condenser", outcome.model, outcome.usage)
        return outcome

    async def _condensation_failed(self, settings: CompactionSettings, source_tokens: int, status: str,
                                   errors: list[str], outcome: CondensationOutcome | None = None) -> None:
        self.data.condensation_failures += 1
        if self.data.condensation_failures >= settings.max_consecutive_failures:
            self.data.condensation_blocked_below = source_tokens + settings.retry_after_growth_tokens
        await self.log_event(f"context.condensation.{status}", {
            "errors": errors[:5], "consecutive_failures": self.data.condensation_failures,
            **(_condenser_facts(outcome) if outcome is not None else {})})

    async def log_event(self, kind: str, payload: dict) -> None:
        await calls.record_events(self.data.session_id, [*self.take_pending_events(),
                                                         event(kind, payload, self.next_event_seq(), self.event_lane)])

    async def defer_event(self, kind: str, payload: dict) -> None:
        """Log an event with the lane's next activity (its seq is taken now, so the log's order
        is the same); the caller makes sure that ``flush_events`` runs by the end of its step."""
        self.pending_events.append(event(kind, payload, self.next_event_seq(), self.event_lane))

    def take_pending_events(self) -> list[EventSpec]:
        """The deferred events, for the activity that writes them."""
        taken, self.pending_events = self.pending_events, []
        return taken

    async def flush_events(self) -> None:
        """Write the deferred events no activity took (nothing when there are none)."""
        await calls.record_events(self.data.session_id, self.take_pending_events())

    async def log_abandoned_episodes(self, episode_ids: list[str], reason: str) -> None:
        """Episodes a task end or a recovery closed: the event log says so (the inspector and
        a parent repairing this lane read episode state from it)."""
        events = [event(EPISODE_ABANDONED, {"episode_id": e, "reason": reason}, self.next_event_seq(), self.event_lane)
                  for e in episode_ids]
        await calls.record_events(self.data.session_id, events)

    async def apply(self, plan: CompactionPlan, measured: dict[str, int] | None = None) -> ApplyResult:
        """Measure the text the engine generated (tiktoken stays out of workflow code),
        apply the plan, then store the created items and log what happened.

        Since ONE_WRITE_COMPACTION_PATCH a compaction costs one activity round trip, not three:
        the texts are measured by a local activity, and the created items and the compaction's
        events are written together."""
        one_write = patches.patched(ONE_WRITE_COMPACTION_PATCH)
        if measured is None and plan.generated:
            measured = await calls.measure_texts(self.data.model, {g.key: g.text for g in plan.generated},
                                                 local=one_write)
        tokens = {key: {Projection.FULL: count} for key, count in (measured or {}).items()}
        result = engine.apply_plan(self.state, plan, tokens)
        if not one_write:
            if result.created:
                await calls.store_generated_items(self._generated(result))
            await calls.record_events(self.data.session_id, self._compaction_events(plan, result))
        elif result.created:
            written = self._generated(result, self._compaction_events(plan, result))
            if self.store_generated_later:
                self.later.store_generated(written)
            elif self.carry_generated:
                self.later.carry(written)
            else:
                await calls.store_generated_items(written)
        else:
            await calls.record_events(self.data.session_id, self._compaction_events(plan, result))
        return result

    def _generated(self, result: ApplyResult, events: list[EventSpec] | None = None) -> GeneratedItemsInput:
        """The items ``result`` created, with their text, for the activity that stores them."""
        return GeneratedItemsInput(
            session_id=self.data.session_id, lane=self.data.lane, events=events or [],
            items=[GeneratedItem(item=self.state.items[c.item_id], text=c.text, number=ids.generated_number(c.item_id))
                   for c in result.created])

    def _compaction_events(self, plan: CompactionPlan, result: ApplyResult) -> list[EventSpec]:
        return compaction_events(plan, result, self.next_event_seq, self.event_lane, self.state.notices)

    async def condense(self, raw_memory: dict | str) -> CondenseResult:
        """Explicit ``condense_context``: deterministic, no model call. A rejected or
        no-op call changes nothing but the event log."""
        doc, errors = engine.parse_memory(raw_memory)
        if doc is None:
            return await self._condense_refused(Rejection(status="rejected", reason="; ".join(errors)))
        if self.rules_2:
            doc = engine.normalized(doc)  # measured as plan_condense will write it
        text = engine.memory_text(doc)
        measured = await calls.measure_texts(self.data.model, {Kind.MEMORY.value: text})
        planned = engine.plan_condense(self.state, doc, measured_memory_tokens=measured[Kind.MEMORY.value])
        if isinstance(planned, Rejection):
            return await self._condense_refused(planned)
        result = await self.apply(planned, measured)
        if not result.applied:
            return await self._condense_refused(Rejection(status="rejected", reason=result.reason))
        await self.fallback_if_over_target()
        return CondenseResult(
            status="accepted", reason=result.reason, memory_id=self.state.memory_id, archived=len(result.archived)
        )

    async def _condense_refused(self, rejection: Rejection) -> CondenseResult:
        await self.log_event(f"context.condense.{rejection.status}", {"reason": rejection.reason})
        return CondenseResult(status=rejection.status, reason=rejection.reason)


def _condenser_facts(outcome: CondensationOutcome) -> dict[str, str | int]:
    """What a condensation cost, for its event: the condenser's model and the tokens the
    provider counted over its attempts (0 when it reported none)."""
    usage = outcome.usage
    return {"model": outcome.model, "input_tokens": usage.prompt if usage else 0,
            "output_tokens": usage.completion if usage else 0, "attempts": outcome.attempts}
