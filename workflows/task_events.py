"""Hosted tasks in the event log (``task.queued``, ``task.started``, ``task.completed``,
``task.failed``) and the cause of a failed task, as a message and a type callers can
branch on.

Workflow code only. The events are new commands: runs recorded before them replay
without (``TASK_EVENTS_PATCH``).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows.contract.session import TaskStatus
    from workflows.lane import Lane

TASK_EVENTS_PATCH = "task-events"
QUEUED, STARTED = "task.queued", "task.started"
COMPLETED, FAILED = "task.completed", "task.failed"


def events_on() -> bool:
    """Whether this run logs task events (decided by its history: see ``workflow.patched``)."""
    return patches.patched(TASK_EVENTS_PATCH)


def payload(kind: str, status: TaskStatus) -> dict[str, object]:
    """A task event's payload: ids, counts and the cause of a failure (never content)."""
    out: dict[str, object] = {"task_id": status.task_id}
    if kind in (COMPLETED, FAILED):
        out["turns"] = status.turns
    if kind == COMPLETED:
        out["answer_item_id"] = status.answer_item_id
    if kind == FAILED:
        out["error"] = status.error
        out["error_type"] = status.error_type
    return out


async def log(lane: Lane, kind: str, status: TaskStatus) -> None:
    await lane.log_event(kind, payload(kind, status))


def failure_cause(error: ActivityError) -> tuple[str, str]:
    """(message, type) of the innermost application error of a failed activity. A call that
    kept failing until the session's give-up time ran out names the last failure it had."""
    cause: BaseException | None = error.cause
    timed_out: ActivityTimeout | None = None
    while isinstance(cause, FailureError) and cause.cause is not None and not isinstance(cause, ApplicationError):
        if isinstance(cause, ActivityTimeout):
            timed_out = cause
        cause = cause.cause
    if isinstance(cause, ActivityTimeout):
        timed_out = cause
    if isinstance(cause, ApplicationError):
        message, kind = str(cause), cause.type or "ApplicationError"
    elif isinstance(cause, ActivityTimeout):
        kind = "ActivityTimeout"
        message = f"the {error.activity_type} activity timed out ({cause.type.name if cause.type else 'timeout'})"
    else:
        message, kind = str(cause or error), type(cause or error).__name__
    if timed_out is not None and isinstance(cause, ApplicationError):
        message = f"{message} (retried until the session's give_up_seconds ran out)"
    return message, kind
