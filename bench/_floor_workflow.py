"""The workflow of ``bench/update_floor.py``: updates that do nothing but Temporal's machinery of
each shape (a module of its own, so the workflow sandbox imports nothing else)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

SHAPES = ("bare", "schedules", "local", "step", "activity")


@activity.defn
async def noop(text: str) -> str:
    return text


@workflow.defn
class UpdateFloor:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update
    async def call(self, shape: str) -> str:
        """``bare``: returns; ``schedules``: schedules an activity, not waited for; ``local``: runs
        a local activity; ``step``: both, as the gateway's step does; ``activity``: runs an
        activity and returns its result (a workflow task after an activity, as each model and
        tool call of a hosted turn takes)."""
        answer = shape
        if shape == "activity":
            return await workflow.execute_activity(noop, shape, start_to_close_timeout=timedelta(seconds=10))
        if shape in ("local", "step"):
            answer = await workflow.execute_local_activity(noop, shape, start_to_close_timeout=timedelta(seconds=10))
        if shape in ("schedules", "step"):
            workflow.start_activity(noop, shape, start_to_close_timeout=timedelta(seconds=10))
        return answer

    @workflow.signal
    def stop(self) -> None:
        self.done = True
