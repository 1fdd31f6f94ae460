"""A worker process takes on what its settings say (deploy/README.md §6): each waiting model
call holds one of its LANES_MAX_CONCURRENT_ACTIVITIES slots, and its PostgreSQL pool has
LANES_DB_POOL_SIZE connections at most."""

from __future__ import annotations

import asyncio
import itertools
import time

from activities.runtime import StoreSource
from tests.workers.support import ready, start_replayed

SESSIONS = 3
LATENCY = 0.5  # each model answer is held this long
CALLS = 2 * SESSIONS


async def test_one_activity_slot_runs_one_model_call_at_a_time(temporal_client, queue_settings, short_trajectory,
                                                                replay_server, spawn):
    worker = spawn("one-slot", LANES_MAX_CONCURRENT_ACTIVITIES="1")
    await ready(worker)
    replay_server.set_faults("timeout", count=-1, delay_seconds=LATENCY)
    first = max((r["seq"] for r in replay_server.requests()), default=0)
    await asyncio.gather(*(start_replayed(temporal_client, queue_settings, short_trajectory, replay_server,
                                          prefix=f"slot{n}") for n in range(SESSIONS)))
    deadline = time.monotonic() + 60
    while len(arrived := [r for r in replay_server.requests() if r["seq"] > first]) < CALLS:
        assert time.monotonic() < deadline, f"{len(arrived)} model calls in 60 s"
        await asyncio.sleep(0.2)
    # three sessions started at once, but a call can begin only once the one before it answered
    # (with the default 100 slots the first three arrive together)
    times = sorted(r["at"] for r in arrived[:CALLS])
    assert min(b - a for a, b in itertools.pairwise(times)) >= LATENCY * 0.9, times


async def test_the_pool_holds_at_most_the_configured_connections(database_url):
    stores = StoreSource(database_url, pool_size=3)
    store = await stores.get()
    try:
        assert store._pool.get_max_size() == 3
        held = [await store._pool.acquire() for _ in range(3)]
        try:  # a fourth waits for one of the three
            await asyncio.wait_for(store._pool.acquire(), timeout=0.5)
            raise AssertionError("a fourth connection was handed out")
        except TimeoutError:
            pass
        finally:
            for conn in held:
                await store._pool.release(conn)
    finally:
        await stores.close()
