"""The parent's side of subagent lanes: start them, track them, record their handoffs, repair them.

A subagent is a ``LaneWorkflow`` child started with ``ParentClosePolicy.ABANDON`` (a
continue-as-new or a crash of the parent never kills it) and tracked here as a
``ChildLane`` that the session checkpoints. The child stores its handoff in its own lane
and tells the parent by the ``lane_finished`` signal (which reaches the parent's current
run, whatever run started the child) and by its result (seen while the run that started
it lives). Either way, the parent records the handoff once, as one item of its lane.

A child that stops without handing off (terminated, timed out, failed) is repaired: its
open episodes are closed, a failed handoff is recorded in its place, and
``context.recovery.completed`` says what was done. The run that started a child learns
this from the child's result; a later run asks Temporal (``describe_lanes``) before it
admits a task.

Workflow code only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
)
from temporalio.exceptions import (
    TimeoutError as WorkflowTimeoutError,
)
from temporalio.workflow import ParentClosePolicy

from workflows import activity_calls as calls
from workflows.context import Item, add_counts, engine, ids
from workflows.contract import rejections
from workflows.contract.handoff import failed_handoff
from workflows.contract.items import ToolCallRef
from workflows.contract.lanes import CloseLaneEpisodesInput, HandoffRef, LaneConfig, LaneInput, RecordHandoffInput
from workflows.contract.session import ChildLane, ChildLaneState, SessionConfig, SpawnRequest, SpawnResult
from workflows.lane import Lane

KEPT_FINISHED_CHILDREN = 200  # older finished children leave the session state (the store keeps their lanes)
DRAIN_POLL = timedelta(seconds=30)  # a closing session re-checks children it cannot watch


@dataclass
class RepairCounts:
    """What one recovery did to child lanes (the counts of ``context.recovery.completed``)."""

    child_lanes_abandoned: int = 0
    child_lanes_failed: int = 0
    handoffs_recovered: int = 0
    episodes_closed: int = 0
    lanes: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.lanes)


class SpawnRefused(ValueError):
    """A spawn request that cannot be served (a clear reason for the model or the caller).
    ``conflict``: the session's state is why (it may be served later), not the request."""

    def __init__(self, reason: str, *, conflict: bool = True) -> None:
        super().__init__(reason)
        self.conflict = conflict

    def rejection(self):
        reject = rejections.conflict if self.conflict else rejections.invalid_input
        return reject(f"spawn_subagent rejected: {self}")


class SubagentHost:
    def __init__(self, config: SessionConfig, workflow_id: str, tools: list[str],
                 children: list[ChildLane] | None = None, next_child: int = 0) -> None:
        self.config = config
        self.workflow_id = workflow_id
        self.tools = tools
        self.children: dict[str, ChildLane] = {c.lane: c for c in children or []}
        self.next_child = next_child
        # this run only
        self._handles: dict[str, workflow.ChildWorkflowHandle] = {}
        self._arrived: dict[str, HandoffRef] = {}
        self._via: dict[str, str] = {}  # how each arrived handoff came: signal / result / describe
        self._lost: dict[str, tuple[ChildLaneState, str]] = {}  # lane -> (new state, why)
        self._by_call: dict[str, str | SpawnRefused] = {}  # spawn_subagent call id -> lane or refusal
        self._awaited: set[str] = set()  # lanes a model step is waiting for

    # --- state ---------------------------------------------------------------------------

    def running(self) -> list[ChildLane]:
        return [c for c in self.children.values() if not c.finished]

    def _busy(self) -> int:
        """Children that still hold a slot of the concurrency cap."""
        return sum(1 for c in self.running() if c.lane not in self._arrived and c.lane not in self._lost)

    def kept_children(self) -> list[ChildLane]:
        """What a checkpoint carries: running children and the newest finished ones."""
        finished = [c for c in self.children.values() if c.finished]
        dropped = {c.lane for c in finished[:-KEPT_FINISHED_CHILDREN]} if len(finished) > KEPT_FINISHED_CHILDREN else set()
        return [c.model_copy() for c in self.children.values() if c.lane not in dropped]

    # --- starting ------------------------------------------------------------------------

    def check_request(self, request: SpawnRequest) -> list[str]:
        """The tools the child gets; raises SpawnRefused for a request this session cannot serve."""
        if not self.config.subagents.enabled:
            raise SpawnRefused("subagents are not enabled for this session (config.subagents.enabled)")
        if self.config.replay is not None and not self.config.replay.subagents:
            raise SpawnRefused("this replayed session has no recorded subagent sessions to replay")
        if request.tools is None:
            return list(self.tools)
        unknown = [t for t in request.tools if t not in self.tools]
        if unknown:
            raise SpawnRefused(f"tools {unknown} are not available in this session (available: {self.tools})",
                               conflict=False)
        return list(dict.fromkeys(request.tools))

    def check_capacity(self) -> None:
        cap = self.config.subagents.max_concurrent
        if self._busy() >= cap:
            raise SpawnRefused(f"{self._busy()} subagents are running; the limit is {cap}")

    async def spawn(self, lane: Lane, request: SpawnRequest) -> SpawnResult:
        """A subagent started through the API: it forks from the request the parent would send now."""
        tools = self.check_request(request)
        self.check_capacity()
        plan = engine.plan_request(lane.state)
        child = await self._start(lane, request, tools, plan, lane.state.current_task, None)
        return SpawnResult(lane=child.lane, workflow_id=child.workflow_id)

    async def start(self, lane: Lane, task_id: str, spawns: list[ToolCallRef], sent: engine.RequestPlan) -> None:
        """The model's spawn_subagent calls of one answer. Calls beyond the concurrency cap wait
        for a running child to finish; a bad call gets a refusal as its answer."""
        cap = self.config.subagents.max_concurrent
        for call in spawns:
            try:
                request = SpawnRequest.model_validate_json(call.arguments or "{}")
                tools = self.check_request(request)
            except ValidationError as error:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                     for e in error.errors()[:5])
                self._by_call[call.id] = SpawnRefused(f"invalid arguments: {problems}", conflict=False)
                continue
            except SpawnRefused as refused:
                self._by_call[call.id] = refused
                continue
            await workflow.wait_condition(lambda: self._busy() < cap)
            try:
                child = await self._start(lane, request, tools, sent, task_id, call.id)
            except SpawnRefused as refused:
                self._by_call[call.id] = refused
                continue
            self._by_call[call.id] = child.lane

    async def _start(self, lane: Lane, request: SpawnRequest, tools: list[str], plan: engine.RequestPlan,
                     task_id: str | None, call_id: str | None) -> ChildLane:
        lane_config = self._lane_config(lane, tools)
        limit = self._max_prefix_tokens(lane_config, lane)
        prefix = engine.fork_prefix(lane.state, plan, limit)
        if prefix is None:
            raise SpawnRefused(
                f"the conversation's stable prefix alone needs more than {limit} tokens, the most a subagent's "
                f"budget may give it (max_prefix_share {self.config.subagents.max_prefix_share}); condense first")
        self.next_child += 1
        name = ids.child_lane(self.next_child)
        child_id = ids.child_workflow_id(self.config.session_id, name)
        if self.config.replay is not None:
            replays = self.config.replay.subagents
            lane_config = lane_config.model_copy(update={"replay": replays[(self.next_child - 1) % len(replays)]})
        handle = await workflow.start_child_workflow(
            "LaneWorkflow",
            LaneInput(session_id=self.config.session_id, lane=name, parent_workflow_id=self.workflow_id,
                      parent_task_id=task_id, brief=request.brief, config=lane_config, shared_prefix=prefix,
                      fork_source=f"{lane.data.lane} plan {lane.data.plan_version}"),
            id=child_id,
            result_type=HandoffRef,
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        child = ChildLane(lane=name, workflow_id=child_id, brief_digest=request.brief[:200], tools=tools,
                          task_id=task_id, tool_call_id=call_id)
        self.children[name] = child
        self._handles[name] = handle
        asyncio.create_task(self._watch(name, handle))
        await lane.log_event("lane.spawned", {
            "lane": name, "workflow_id": child_id, "task": task_id, "tool_call_id": call_id, "tools": tools,
            "shared_prefix_entries": len(prefix), "shared_prefix_tokens": engine.prefix_tokens(prefix)})
        return child

    def _lane_config(self, lane: Lane, tools: list[str]) -> LaneConfig:
        cfg = self.config
        return LaneConfig(
            model=cfg.model, context_window=cfg.context_window, max_output_tokens=cfg.max_output_tokens,
            budget_tokens=cfg.subagents.budget_tokens or cfg.budget_tokens, preview_chars=lane.preview_chars,
            tools=tools, max_turns=cfg.subagents.max_turns, compaction=cfg.compaction, tool_network=cfg.tool_network,
            give_up_seconds=cfg.give_up_seconds, generated_role=cfg.generated_role, prices=cfg.prices,
        )

    def _max_prefix_tokens(self, lane_config: LaneConfig, lane: Lane) -> int:
        """The share of the child's conversation budget its shared prefix may take."""
        config = lane.state.config.model_copy(update={"budget_tokens": lane_config.budget_tokens})
        return int(self.config.subagents.max_prefix_share * config.base_budget)

    async def _watch(self, name: str, handle: workflow.ChildWorkflowHandle) -> None:
        """The run that started a child sees its end directly (a lost signal cannot hide it)."""
        try:
            self.arrive(await handle, via="result")
        except ChildWorkflowError as error:
            self._lost.setdefault(name, _loss(error))

    # --- handoffs ------------------------------------------------------------------------

    def arrive(self, ref: HandoffRef, via: str = "signal") -> bool:
        """A child's handoff reached the parent (signal, result or describe); False when already known."""
        child = self.children.get(ref.lane)
        if child is None or child.finished or ref.lane in self._arrived:
            return False
        self._arrived[ref.lane] = ref
        self._via[ref.lane] = via
        return True

    def is_awaited(self, name: str) -> bool:
        return name in self._awaited

    async def answer(self, lane: Lane, task_id: str, assistant: Item, call: ToolCallRef) -> Item | str:
        """Wait for the child started for ``call`` and record its handoff as the call's result."""
        target = self._by_call.pop(call.id, None)
        if target is None:
            return "spawn_subagent refused: this call was not started"
        if isinstance(target, SpawnRefused):
            return f"spawn_subagent refused: {target}"
        self._awaited.add(target)
        try:
            await workflow.wait_condition(lambda: target in self._arrived or target in self._lost)
        finally:
            self._awaited.discard(target)
        counts = RepairCounts()
        item = await self.settle(lane, target, counts, group=assistant.seq)
        if counts.any:
            await log_recovery(lane, counts, task=task_id)
        return item

    async def settle(self, lane: Lane, name: str, counts: RepairCounts, group: int | None = None) -> Item:
        """Record the handoff of a child that arrived or was lost (once), repairing a lost one."""
        child = self.children[name]
        seq = lane.next_seq()
        answers_call = group is not None  # the result of its spawn call, else a message of the lane now
        record = RecordHandoffInput(
            session_id=self.config.session_id, lane=lane.data.lane, child_lane=name, item_id=lane.item_id(seq),
            seq=seq, observation_id=lane.observation_id(seq), group=group,
            task_id=child.task_id if answers_call else lane.state.current_task,
            tool_call_id=child.tool_call_id if answers_call else None,
            model=lane.data.model, preview_chars=lane.preview_chars,
        )
        ref = self._arrived.get(name)
        if ref is not None:
            record.source_item_id = ref.item_id
            state: ChildLaneState = ref.status
            why = ""
            if self._via.get(name) != "signal":  # the child's signal never reached this run
                counts.handoffs_recovered += 1
                counts.lanes.append(name)
        else:
            state, why = self._lost[name]
            closed = await calls.close_lane_episodes(CloseLaneEpisodesInput(
                session_id=self.config.session_id, lane=name, reason=f"lane {why}", repair_id=f"{name}-repair"))
            record.handoff = failed_handoff(
                f"subagent lane {name} {why} before it handed off; its trace up to then stays in the "
                f"session's store under lane {name}")
            counts.episodes_closed += len(closed)
            if state == "abandoned":
                counts.child_lanes_abandoned += 1
            else:
                counts.child_lanes_failed += 1
            counts.lanes.append(name)
        item = await calls.record_handoff(record)
        if ref is not None and ref.usage is not None:
            add_counts(lane.data.usage, "subagent", ref.usage)
        # a reader never sees a finished child without its handoff item
        child.state, child.reason, child.handoff_item_id = state, why, item.id
        self._arrived.pop(name, None)
        self._via.pop(name, None)
        self._lost.pop(name, None)
        return item

    async def record_unawaited(self, lane: Lane, name: str, counts: RepairCounts) -> None:
        """A handoff nobody waits for (an API-started child, or one whose step ended): one item
        of the parent's lane. Callers hold ``lane.lock``; a handoff already recorded is left."""
        child = self.children.get(name)
        if child is None or child.finished or name in self._awaited:
            return
        if name not in self._arrived and name not in self._lost:
            return
        item = await self.settle(lane, name, counts)
        engine.add_item(lane.state, item)

    # --- recovery ------------------------------------------------------------------------

    async def recover(self, lane: Lane) -> RepairCounts:
        """Reconcile children recorded as running with reality (before a task is admitted)."""
        counts = RepairCounts()
        unseen = [c for c in self.running()
                  if c.lane not in self._handles and c.lane not in self._arrived and c.lane not in self._lost]
        if unseen:  # started by an earlier run: ask Temporal
            for status in await calls.describe_lanes([c.workflow_id for c in unseen]):
                name = ids.lane_of_workflow_id(status.workflow_id)
                if status.status in ("RUNNING", "CONTINUED_AS_NEW"):
                    continue
                if status.status == "COMPLETED" and status.handoff is not None:
                    self.arrive(status.handoff, via="describe")
                else:
                    self._lost[name] = _lost_status(status.status)
        for child in self.running():
            await self.record_unawaited(lane, child.lane, counts)
        return counts

    async def drain(self, lane: Lane) -> None:
        """Before the session ends: wait for running children and record their handoffs."""
        while self.running():
            counts = await self.recover(lane)
            if counts.any:
                await log_recovery(lane, counts)
            if not self.running():
                break
            try:
                await workflow.wait_condition(lambda: any(c.lane in self._arrived or c.lane in self._lost
                                                          for c in self.running()), timeout=DRAIN_POLL)
            except TimeoutError:
                pass


RECOVERY_EVENT = "context.recovery.completed"


async def log_recovery(lane: Lane, counts: RepairCounts, stale_lane_owners: int = 0, task: str | None = None,
                       main_episodes_closed: int = 0) -> None:
    await lane.log_event(RECOVERY_EVENT, recovery_payload(counts, stale_lane_owners, task, main_episodes_closed))


def recovery_payload(counts: RepairCounts, stale_lane_owners: int = 0, task: str | None = None,
                     main_episodes_closed: int = 0) -> dict:
    return {
        "stale_lane_owners": stale_lane_owners,
        "episodes_closed": counts.episodes_closed + main_episodes_closed,
        "child_lanes_abandoned": counts.child_lanes_abandoned,
        "child_lanes_failed": counts.child_lanes_failed,
        "handoffs_recovered": counts.handoffs_recovered,
        "lanes": counts.lanes,
        "task": task,
    }


def _loss(error: ChildWorkflowError) -> tuple[ChildLaneState, str]:
    """(the child's new state, why) for a child workflow that ended without a result."""
    cause = error.cause
    for kind, status in ((TerminatedError, "TERMINATED"), (CancelledError, "CANCELED"),
                         (WorkflowTimeoutError, "TIMED_OUT")):
        if isinstance(cause, kind):
            return _lost_status(status)
    if isinstance(cause, ApplicationError):
        return "failed", f"failed: {cause.message}"
    return "failed", f"failed: {cause or error}"


def _lost_status(status: str) -> tuple[ChildLaneState, str]:
    if status in ("TERMINATED", "CANCELED", "NOT_FOUND"):
        why = {"TERMINATED": "was terminated from outside", "CANCELED": "was cancelled",
               "NOT_FOUND": "no longer exists"}[status]
        return "abandoned", why
    if status == "TIMED_OUT":
        return "failed", "timed out"
    return "failed", f"ended as {status.lower()} without a handoff"
