"""Recovery before a task is admitted: repair stale lane ownership and subagent lanes.

Workflow code only.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows import task_events as task_log
    from workflows.context import engine
    from workflows.contract.session import TaskStatus
    from workflows.external_tasks import ExternalTasks
    from workflows.lane import EPISODE_EVENTS_PATCH, Lane
    from workflows.subagents import RECOVERY_EVENT, RepairCounts, SubagentHost, log_recovery, recovery_payload

# Runs recorded before it logged the recovery event only when something was repaired.
RECOVERY_EVENT_PATCH = "recovery-event-on-every-admission"


async def recover(lane: Lane, tasks: dict[str, TaskStatus], external: ExternalTasks, subagents: SubagentHost,
              ongoing: str | None = None) -> None:
    """Before admitting a task: repair stale lane ownership (a task that still owns the
    lane but no longer runs, e.g. an external task when a hosted one arrives), closing its
    open episodes; reconcile subagent lanes recorded as running with reality; and log
    ``context.recovery.completed`` with the repair counts (all zero when nothing was).
    ``ongoing``: a task that owns the lane legitimately (the external task a new user
    message is about to end) and is not repaired."""
    stale = lane.state.current_task if lane.state.current_task != ongoing else None
    closed: list[str] = []
    if stale is not None:
        closed = engine.end_task(lane.state, stale, abandoned=True).abandoned_episodes
        if stale in tasks and tasks[stale].state == "running":
            tasks[stale].state = "failed"
            tasks[stale].error = "abandoned by recovery: another task was admitted while it owned the lane"
            if task_log.events_on():  # written with the recovery's event below
                await lane.defer_event(task_log.FAILED, task_log.payload(task_log.FAILED, tasks[stale]))
        external.forget(stale)
        if closed and patches.patched(EPISODE_EVENTS_PATCH):
            await lane.log_abandoned_episodes(closed, "recovery: the task that owned the lane ended")
    counts = await subagents.recover(lane) if subagents.running() else RepairCounts()
    if stale is not None or counts.any:
        await log_recovery(lane, counts, stale_lane_owners=int(stale is not None), task=stale,
                           main_episodes_closed=len(closed))
    elif patches.patched(RECOVERY_EVENT_PATCH):
        # nothing to repair is a result too (the spec: the event on every admission check); it
        # goes with the admission's next activity, so the check costs no activity of its own
        await lane.defer_event(RECOVERY_EVENT, recovery_payload(counts))
