"""Two worker processes on one task queue share many sessions; stopping one mid-run
loses nothing (the local stack: Temporal dev server, PostgreSQL, the replay model)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

import pytest

from tests.workers.support import activity_runs, check_stored_once, ready, settled_activity_runs, start_replayed, wait_done
from worker import sessions

SESSIONS = 6
GRACE = 8.0
MARGIN = 10.0
# each model answer is held this long, so that sessions are still mid-run when the victim
# has exited (without it a loaded machine could finish every session first)
MODEL_LATENCY = 0.4


async def _identities(handles) -> Counter:
    """Completed activities per worker identity, over every session's history."""
    counts: Counter = Counter()
    for runs in await asyncio.gather(*(activity_runs(h) for h in handles)):
        counts.update(r.identity for r in runs if r.outcome == "COMPLETED")
    return counts


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_two_workers_share_sessions_and_one_stops_midway(temporal_client, queue_settings, short_trajectory,
                                                               replay_server, spawn, store, database_url,
                                                               stop_signal):
    workers = [spawn(name, LANES_SHUTDOWN_GRACE_SECONDS=f"{GRACE:g}") for name in ("a", "b")]
    await ready(*workers)
    replay_server.set_faults("timeout", count=-1, delay_seconds=MODEL_LATENCY)
    started = await asyncio.gather(*(
        start_replayed(temporal_client, queue_settings, short_trajectory, replay_server, prefix=f"wk{i}")
        for i in range(SESSIONS)))
    handles = [h for h, _ in started]
    done = [asyncio.create_task(wait_done(h, t)) for h, t in started]
    total_turns = SESSIONS * (len(short_trajectory.turns) + 1)

    # a third of the way in, both workers have run the sessions' activities
    deadline = time.monotonic() + 120
    while True:
        turns = sum(s.turns for s in await asyncio.gather(*(sessions.status(h) for h in handles)))
        seen = await _identities(handles)
        if turns >= total_turns // 3 and all(seen[w.identity] for w in workers):
            break
        assert not all(t.done() for t in done), f"sessions ended before both workers ran activities: {seen}"
        assert time.monotonic() < deadline, f"after {turns} turns, activities ran on {seen}"
        await asyncio.sleep(0.25)
    assert not all(t.done() for t in done), "every session ended before a worker could be stopped"

    victim, survivor = workers
    if stop_signal == signal.SIGTERM:
        code, seconds = await victim.terminate(timeout=GRACE + MARGIN + 30)
        assert code == 0, f"exit code {code} after {seconds:.1f}s:\n{victim.log()}"
        assert seconds <= GRACE + MARGIN, f"worker took {seconds:.1f}s to exit after SIGTERM:\n{victim.log()}"
    else:
        victim.kill()
        assert victim.proc.returncode == -signal.SIGKILL

    # what was left once the victim had gone: every turn still to come calls the model in
    # an activity, which only the survivor can run now
    at_exit = await _identities(handles)
    turns_at_exit = sum(s.turns for s in await asyncio.gather(*(sessions.status(h) for h in handles)))
    assert turns_at_exit < total_turns, f"every session ended before the victim exited: {at_exit}"

    statuses = await asyncio.gather(*done)
    for handle, status in zip(handles, statuses, strict=True):
        assert status.tasks[0].state == "completed", (handle.id, status.tasks[0].error)
        assert status.tasks[0].turns == len(short_trajectory.turns) + 1, handle.id
    after = await _identities(handles)
    assert after[victim.identity] == at_exit[victim.identity] >= seen[victim.identity] > 0
    assert after[survivor.identity] > at_exit[survivor.identity]
    for runs in await asyncio.gather(*(settled_activity_runs(h) for h in handles)):
        assert all(r.outcome == "COMPLETED" for r in runs), [r for r in runs if r.outcome != "COMPLETED"]
    for handle in handles:
        await check_stored_once(store, database_url, handle, short_trajectory)
        await handle.signal("close")
