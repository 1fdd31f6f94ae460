"""``SessionWorkflow``'s bookkeeping of external-agent tasks: each user message an external
agent appends begins a task and ends the one before; the task's turns, state and answer
follow what the agent appends (state only: the status query reports them); the provider
counts the agent reports with a step go into the session's usage and calibration. A base
class, so that the workflow module stays about the session itself.

Task events: a task ended by the next user message or by the session's close is logged
``task.completed`` (with its answer item when it had answered), the new one ``task.started``;
a task abandoned by recovery is ``task.failed`` (logged by the recovery). The events ride
with the activity that stores the user message, so a step costs no extra activity; runs
recorded before them replay without (``EXTERNAL_TASK_EVENTS_PATCH``).

Workflow code only.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import task_events as task_log
    from workflows.context import CallUsage, Item, cost_units, engine
    from workflows.contract.external_calls import external_progress
    from workflows.contract.session import ExternalItem, ReportedUsage, TaskStatus
    from workflows.lane import Lane
    from workflows.usage import record_usage

EXTERNAL_TASK_EVENTS_PATCH = "external-task-events"


class ExternalTasks:
    lane: Lane | None
    tasks: dict[str, TaskStatus]
    external_task: str | None
    turns: int
    prepared_tokens: int

    def _lane(self) -> Lane:  # SessionWorkflow's
        raise NotImplementedError

    def _new_task_id(self) -> str:  # SessionWorkflow's
        raise NotImplementedError

    async def _recover(self, lane: Lane, ongoing: str | None = None) -> None:  # SessionWorkflow's
        raise NotImplementedError

    async def _record_reported_usage(self, lane: Lane, usage: ReportedUsage, defer: bool) -> None:
        """The agent's provider counts for the last request prepared: the session's totals and
        cost, and a calibration sample against our count of that request (none before the
        first request, or for another model's call)."""
        model = usage.model or lane.data.model
        price = lane.usage.price(model) or usage.price
        call = CallUsage(prompt=usage.prompt, cached=usage.cached, completion=usage.completion,
                         estimate=self.prepared_tokens if model == lane.data.model else 0,
                         cost=cost_units(price, usage.prompt, usage.cached, usage.completion))
        await record_usage(lane, "agent", model, call, defer=defer, source="agent")  # counted by the writer's metrics

    def _external_events_on(self) -> bool:
        return task_log.events_on() and workflow.patched(EXTERNAL_TASK_EVENTS_PATCH)

    async def _begin_external_task(self) -> None:
        """A user message under engine rules 1: end the task before, repair, begin the next."""
        self._end_owning_task()
        await self._recover(self._lane())
        self._begin_external(self._new_task_id())

    def _switch_external_task(self, task_id: str) -> None:
        """End the running external task and begin ``task_id`` (engine state only: repairs ran
        before; the events were deferred to the activity that stored the user message)."""
        self._end_owning_task()
        self._begin_external(task_id)

    def _owning_task(self) -> str | None:
        """The external task that owns the lane (None: there is none, or recovery ended it)."""
        task = self.external_task
        return task if task is not None and self._lane().state.current_task == task else None

    def _end_owning_task(self) -> None:
        if (task := self._owning_task()) is not None:
            engine.end_task(self._lane().state, task)
            self.tasks[task].state = "completed"

    def _begin_external(self, task_id: str) -> None:
        self.external_task = task_id
        self.tasks[task_id] = TaskStatus(task_id=task_id, state="running")
        engine.begin_task(self._lane().state, task_id)

    async def _defer_switch_events(self, lane: Lane, task_ids: list[str]) -> None:
        """``task.completed`` of the running task and ``task.started`` of each of ``task_ids``,
        in the order the switches will happen, taken by the lane's next activity."""
        if not task_ids or not self._external_events_on():
            return
        ending = self._owning_task()
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

    async def _close_external_task(self) -> None:
        """A closed session's external task is over."""
        task = self.tasks.get(self.external_task) if self.external_task is not None else None
        if task is None or task.state not in ("running", "completed"):
            return
        task.state = "completed"
        if self.lane is not None and self._owning_task() == task.task_id and self._external_events_on():
            await self.lane.log_event(task_log.COMPLETED, task_log.payload(task_log.COMPLETED, task))

    def _external_progress(self, items: list[ExternalItem], added: list[Item]) -> None:
        """Turns, state and answer of the external task, from what the agent appended. The task
        has answered while its newest item is an assistant turn without tool calls; more
        items set it running again."""
        progress = external_progress(items)
        self.turns += progress.turns_before_user + progress.turns
        task = self.tasks.get(self.external_task) if self.external_task is not None else None
        if task is None or task.state not in ("running", "completed"):
            return
        task.turns += progress.turns
        task.state = "completed" if progress.answered else "running"
        task.answer_item_id = added[-1].id if progress.answered and added else None
