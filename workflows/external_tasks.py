"""``SessionWorkflow``'s bookkeeping of external-agent tasks: each user message an external
agent appends begins a task and ends the one before; the task's turns, state and answer
follow what the agent appends (state only: the status query reports them); the provider
counts the agent reports with a step go into the session's usage and calibration. An object the
session workflow holds (``SessionWorkflow.external``).

Task events: a task ended by the next user message or by the session's close is logged
``task.completed`` (with its answer item when it had answered), the new one ``task.started``;
a task abandoned by recovery is ``task.failed`` (logged by the recovery). The events ride
with the activity that stores the user message, so a step costs no extra activity; runs
recorded before them replay without (``EXTERNAL_TASK_EVENTS_PATCH``).

Workflow code only.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows import task_events as task_log
    from workflows.context import CallUsage, Item, continuation, cost_units, engine
    from workflows.contract.external_calls import external_progress
    from workflows.contract.lane_events import CONTINUATION_MISSED
    from workflows.contract.session import (
        ContinuedRequest,
        ExternalItem,
        PreparedRequest,
        ReportedUsage,
        SessionConfig,
        TaskStatus,
    )
    from workflows.lane import Lane
    from workflows.usage import record_usage

EXTERNAL_TASK_EVENTS_PATCH = "external-task-events"
# Since: a write-behind step's items, and those its planning generates, are stored while the
# API renders the request from the step's result (workflows/later_writes.py).
STEP_WRITES_LATER_PATCH = "step-writes-later"


@dataclass
class ContinuedCheck:
    """A step's ``StepRequest.continued``: whether the session would have planned the request its
    caller sent, decided once the step's first ``request.items`` items are in the lane."""

    request: ContinuedRequest
    generation: int  # the lane's when the step began
    held: bool = False

    def after(self, added: int, state: engine.ContextState) -> None:
        """Called as the step's items are added (``added`` so far)."""
        if added == self.request.items:
            self.held = (self.generation == self.request.generation
                         and continuation.plan_was(state, self.request.digest))

    async def log_miss(self, lane: Lane) -> None:
        if not self.held:  # rare: its own activity (the items' has run)
            await lane.log_event(CONTINUATION_MISSED, {
                "items": self.request.items, "generation": self.request.generation,
                "generation_then": self.generation, "digest": self.request.digest})


class ExternalTasks:
    """The external agent's current task, and our count of the request prepared last."""

    def __init__(self, tasks: dict[str, TaskStatus], task: str | None = None, prepared_tokens: int = 0) -> None:
        self.tasks = tasks  # the session's task table (hosted and external tasks alike)
        self.task = task
        self.prepared_tokens = prepared_tokens  # 0: no request prepared yet

    async def record_reported_usage(self, lane: Lane, usage: ReportedUsage, defer: bool) -> None:
        """The agent's provider counts for the last request prepared: the session's totals and
        cost, and a calibration sample against our count of that request (none before the
        first request, or for another model's call)."""
        model = usage.model or lane.data.model
        price = lane.usage.price(model) or usage.price
        call = CallUsage(prompt=usage.prompt, cached=usage.cached, completion=usage.completion,
                         estimate=self.prepared_tokens if model == lane.data.model else 0,
                         cost=cost_units(price, usage.prompt, usage.cached, usage.completion))
        await record_usage(lane, "agent", model, call, defer=defer, source="agent")  # counted by the writer's metrics

    async def prepare(self, lane: Lane, config: SessionConfig, tools: list[str], later: bool = False) -> PreparedRequest:
        """Compact if needed, then plan the agent's next request within the budget (callers
        hold the lane's lock); refused, typed, when nothing fits. ``later``: the items the plan
        generates are written after the caller has its answer (a write-behind step)."""
        lane.store_generated_later = later
        try:
            await lane.compact_if_needed(config.compaction)
            await lane.assemble()
        finally:
            lane.store_generated_later = False
        _, plan = await lane.plan_within_budget()
        # what the provider will count: the conversation, capability context and tool definitions
        self.prepared_tokens = plan.total_tokens + plan.capability_tokens + lane.state.config.tool_definition_tokens
        engine.end_step(lane.state)  # one request is one model step: step-scoped capabilities leave
        # taken after the step ended: the state the next step starts from
        facts = continuation.facts_of(lane.state, plan, next_seq=lane.data.next_seq,
                                      request_tokens=self.prepared_tokens, lane=lane.data.lane, model=lane.data.model,
                                      bound_above_tokens=lane.bound_above_tokens, preview_lines=lane.preview_lines,
                                      users_continue=config.tasks == "conversation" and self.owning(lane) is not None)
        return PreparedRequest(
            # the API writes it with the request (no extra activity per step), keyed by the seq
            # the agent's answer will take
            request_event=lane.request_event(plan, lane.data.next_seq, lane.state.current_task, None),
            entries=plan.pairs,
            stable_prefix_entries=plan.stable_prefix_entries,
            total_tokens=plan.total_tokens,
            budget=plan.budget,
            fits=plan.fits,
            reason=plan.reason,
            preview_chars=lane.preview_chars,
            model=config.model,
            tools=tools,
            tool_set=config.tool_set,
            recall=lane.state.config.recall,
            generated=lane.later.unstored_generated(),
            unstored_items=lane.later.unstored_items(),
            continuation=facts,
        )

    def events_on(self) -> bool:
        return task_log.events_on() and patches.patched(EXTERNAL_TASK_EVENTS_PATCH)

    def switch(self, lane: Lane, task_id: str) -> None:
        """End the running external task and begin ``task_id`` (engine state only: repairs ran
        before; the events were deferred to the activity that stored the user message)."""
        self.end_owning(lane)
        self.begin(lane, task_id)

    def owning(self, lane: Lane) -> str | None:
        """The external task that owns the lane (None: there is none, or recovery ended it)."""
        task = self.task
        return task if task is not None and lane.state.current_task == task else None

    def end_owning(self, lane: Lane) -> None:
        if (task := self.owning(lane)) is not None:
            engine.end_task(lane.state, task)
            self.tasks[task].state = "completed"

    def begin(self, lane: Lane, task_id: str) -> None:
        self.task = task_id
        self.tasks[task_id] = TaskStatus(task_id=task_id, state="running")
        engine.begin_task(lane.state, task_id)

    def forget(self, task_id: str) -> None:
        """Recovery ended ``task_id``: it is no longer the external task."""
        if self.task == task_id:
            self.task = None

    async def defer_switch_events(self, lane: Lane, task_ids: list[str]) -> None:
        """``task.completed`` of the running task and ``task.started`` of each of ``task_ids``,
        in the order the switches will happen, taken by the lane's next activity."""
        if not task_ids or not self.events_on():
            return
        ending = self.owning(lane)
        if ending is not None and ending in self.tasks:
            await lane.defer_event(task_log.COMPLETED, task_log.payload(task_log.COMPLETED, self._ended(ending)))
        for n, task_id in enumerate(task_ids):
            started = TaskStatus(task_id=task_id, state="running")
            await lane.defer_event(task_log.STARTED, task_log.payload(task_log.STARTED, started))
            if n < len(task_ids) - 1:  # a batch with two user messages: the first task ends at once
                await lane.defer_event(task_log.COMPLETED, task_log.payload(task_log.COMPLETED, started))

    def _ended(self, task_id: str) -> TaskStatus:
        """The status a task ends with: completed, its answer only if it had answered."""
        return self.tasks[task_id].model_copy(update={"state": "completed"})

    async def close(self, lane: Lane | None) -> None:
        """A closed session's external task is over."""
        task = self.tasks.get(self.task) if self.task is not None else None
        if task is None or task.state not in ("running", "completed"):
            return
        task.state = "completed"
        if lane is not None and self.owning(lane) == task.task_id and self.events_on():
            await lane.log_event(task_log.COMPLETED, task_log.payload(task_log.COMPLETED, task))

    def progress(self, items: list[ExternalItem], added: list[Item]) -> int:
        """Turns, state and answer of the external task, from what the agent appended; returns
        the session's turns the items add. The task has answered while its newest item is an
        assistant turn without tool calls; more items set it running again."""
        progress = external_progress(items)
        task = self.tasks.get(self.task) if self.task is not None else None
        if task is not None and task.state in ("running", "completed"):
            task.turns += progress.turns
            task.state = "completed" if progress.answered else "running"
            task.answer_item_id = added[-1].id if progress.answered and added else None
        return progress.turns_before_user + progress.turns
