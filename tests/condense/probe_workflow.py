"""A minimal workflow that calls condense_with_llm the way the session workflow is meant to:
small maximum_attempts, heartbeat timeout, a final failure read as outcome "failed"."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.contract.condense import CondensationInput, CondensationOutcome


@workflow.defn(sandboxed=True)
class CondenseProbe:
    @workflow.run
    async def run(self, inp: CondensationInput) -> dict:
        try:
            outcome: CondensationOutcome = await workflow.execute_activity(
                "condense_with_llm",
                inp,
                result_type=CondensationOutcome,
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=100)),
            )
        except ActivityError as error:
            cause = error.cause
            kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
            return {"status": "failed", "error_type": kind, "retry_state": error.retry_state.name if error.retry_state else ""}
        return {"status": outcome.status, "attempts": outcome.attempts}
