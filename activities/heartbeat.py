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
async def heartbeating(interval: float = HEARTBEAT_INTERVAL_SECONDS, *, at_start: bool = True) -> AsyncIterator[None]:
    """Heartbeat every ``interval`` seconds while the body runs. ``at_start=False``: the first
    beat after one interval, so an activity shorter than that sends none (each beat is a
    round trip and a history write on the server). Liveness is the same: Temporal's heartbeat
    timeout runs from the attempt's start until the first beat, so a worker killed before
    any beat is noticed after the heartbeat timeout either way."""
    async def beat() -> None:
        if not at_start:
            await asyncio.sleep(interval)
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
