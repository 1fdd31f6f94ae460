"""The Python helpers retry a call that lands while a session continues as new (pure: the
update's outcome as Temporal's client raises it). On the real stack this surfaced as a
``submit`` refused with ``SessionHandingOver`` right after a task ended a run."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from worker import sessions
from workflows.contract.rejections import HANDING_OVER, INVALID_INPUT
from workflows.contract.session import SubmitResult


class Handle:
    """Answers ``execute_update`` with the given failures first, then a result."""

    def __init__(self, *failures: str) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def execute_update(self, update, request):
        self.calls += 1
        if self.failures:
            kind = self.failures.pop(0)
            raise WorkflowUpdateFailedError(ApplicationError(f"{kind}: refused", type=kind, non_retryable=True))
        return SubmitResult(task_id=f"task-{self.calls:04d}")


async def test_a_submit_during_a_hand_over_is_retried_until_the_next_run_takes_it():
    handle = Handle(HANDING_OVER, HANDING_OVER)
    assert await sessions.submit(handle, "next task") == "task-0003"
    assert handle.calls == 3


async def test_any_other_refusal_is_raised_at_once():
    handle = Handle(INVALID_INPUT)
    with pytest.raises(WorkflowUpdateFailedError):
        await sessions.submit(handle, "bad")
    assert handle.calls == 1
