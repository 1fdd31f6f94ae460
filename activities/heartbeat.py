"""Heartbeats for long activities, so a dead worker is noticed in seconds.

Without them Temporal only retries an activity whose worker was killed after its
whole start-to-close timeout (minutes for a model call).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity

HEARTBEAT_INTERVAL_SECONDS = 2.0


@contextlib.asynccontextmanager
async def heartbeating(interval: float = HEARTBEAT_INTERVAL_SECONDS) -> AsyncIterator[None]:
    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
