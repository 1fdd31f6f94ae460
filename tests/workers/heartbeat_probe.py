"""A workflow that runs one activity whose worker goes silent before its first heartbeat."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.heartbeat import heartbeating


@activity.defn
async def silent_before_first_beat() -> str:
    """Heartbeats as the model and tool activities do (the first beat after one interval), but
    hangs before that interval is over: what Temporal sees of a worker killed right after the start."""
    async with heartbeating(interval=600, at_start=False):
        await asyncio.sleep(600)
    return "finished"


@workflow.defn(sandboxed=True)
class HeartbeatProbe:
    @workflow.run
    async def run(self) -> str:
        try:
            return await workflow.execute_activity(
                silent_before_first_beat, start_to_close_timeout=timedelta(seconds=300),
                heartbeat_timeout=timedelta(seconds=1), retry_policy=RetryPolicy(maximum_attempts=1))
        except ActivityError as error:
            cause = error.cause
            return f"timeout {cause.type.name}" if isinstance(cause, TimeoutError) and cause.type else repr(cause)
