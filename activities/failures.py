"""Activity failures that fit Temporal's history: short, typed, naming what failed.

Temporal replaces an activity failure larger than its size limit (4 KB by default) with
"Failure exceeds size limit.", and a task would then fail with that instead of its cause.
An exception raised anywhere below an activity (asyncpg's, the openai client's) carries a
deep traceback and a chain of causes: this worker interceptor logs it whole and reports a
one-line ``ApplicationError`` of the same retryability, its type the exception's class name.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

log = logging.getLogger("lanes.activities")

MAX_MESSAGE_CHARS = 1_000


class ConciseFailures(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(super().intercept_activity(next))


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except (ApplicationError, CancelledError):
            raise  # ours: already short and typed; cancellation: the SDK's own
        except Exception as error:
            info = activity.info()
            log.warning("activity %s (attempt %d) failed", info.activity_type, info.attempt, exc_info=True)
            message = f"{type(error).__name__}: {error}"
            if len(message) > MAX_MESSAGE_CHARS:
                message = message[: MAX_MESSAGE_CHARS - 3] + "..."
            raise ApplicationError(message, type=type(error).__name__) from None
