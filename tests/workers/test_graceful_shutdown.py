"""SIGTERM a real worker process while a model call is in flight.

Two workers poll the test's task queue (a rolling restart: the other one is the
replacement). The replay model holds one request; the worker running it gets SIGTERM.
It must exit with 0 within its grace period (``LANES_SHUTDOWN_GRACE_SECONDS``) plus a
margin, and the call must either finish on it (it is shorter than the grace) or be
retried on the other worker (it outlasts the grace); the session then completes with
every item and tool output stored exactly once.
"""

from __future__ import annotations

import asyncio
import time

from tests.workers.support import (
    check_stored_once,
    pending_activity,
    ready,
    settled_activity_runs,
    start_replayed,
    wait_done,
)
from worker import sessions

GRACE = 8.0  # LANES_SHUTDOWN_GRACE_SECONDS of the workers here
# from SIGTERM to exit beyond the grace: the SDK's shutdown after the activities are
# done (pollers, completions), closing the store, a loaded machine
MARGIN = 10.0
HOLD_AT_TURN = 3  # the model request after this turn is held
# every answer before the held one takes this long, so the session cannot run past the hold
# between two status polls on a loaded machine
MODEL_LATENCY = 0.5


async def _sigterm_during_model_call(temporal_client, queue_settings, short_trajectory, replay_server, spawn,
                                     delay: float):
    workers = [spawn(name, LANES_SHUTDOWN_GRACE_SECONDS=f"{GRACE:g}") for name in ("a", "b")]
    await ready(*workers)
    replay_server.set_faults("timeout", count=-1, delay_seconds=MODEL_LATENCY)
    handle, task_id = await start_replayed(temporal_client, queue_settings, short_trajectory, replay_server)
    done = asyncio.create_task(wait_done(handle, task_id))

    # hold the next model request once the session is under way
    while (await sessions.status(handle)).turns < HOLD_AT_TURN:
        assert not done.done()
        await asyncio.sleep(0.1)
    replay_server.set_faults("timeout", count=1, delay_seconds=delay)
    while replay_server.state.faults()["remaining"] > 0:  # until the request has arrived
        assert not done.done()
        await asyncio.sleep(0.05)
    held_since = time.monotonic()
    held = await pending_activity(handle, "call_model")
    victim = next(w for w in workers if w.identity == held.last_worker_identity)
    survivor = next(w for w in workers if w is not victim)

    # (the test's own precondition: the signal comes while the model still holds the answer)
    assert time.monotonic() - held_since < delay - 0.5, "too slow to signal the worker during the call"
    code, seconds = await victim.terminate(timeout=GRACE + MARGIN + 30)
    assert code is not None, f"worker still running {seconds:.0f}s after SIGTERM:\n{victim.log()}"
    assert code == 0, f"worker exited with {code}:\n{victim.log()}"
    assert seconds <= GRACE + MARGIN, f"worker took {seconds:.1f}s to exit after SIGTERM:\n{victim.log()}"

    status = await done
    assert status.tasks[0].state == "completed", status.tasks[0].error
    assert status.tasks[0].turns == len(short_trajectory.turns) + 1  # every recorded turn + the last answer
    runs = await settled_activity_runs(handle)
    assert all(r.outcome == "COMPLETED" for r in runs), [r for r in runs if r.outcome != "COMPLETED"]
    [call] = [r for r in runs if r.activity_id == held.activity_id]
    # a stopping worker takes no new work: everything after the held call ran on the other one
    later = runs[runs.index(call) + 1:]
    assert later and {r.identity for r in later} == {survivor.identity}
    return call, victim, survivor, handle


async def test_sigterm_lets_the_inflight_model_call_finish(temporal_client, queue_settings, short_trajectory,
                                                           replay_server, spawn, store, database_url):
    call, victim, survivor, handle = await _sigterm_during_model_call(
        temporal_client, queue_settings, short_trajectory, replay_server, spawn, delay=3.0)
    # the call that was running at SIGTERM finished there, on its first attempt
    assert (call.identity, call.attempt) == (victim.identity, 1)
    await check_stored_once(store, database_url, handle, short_trajectory)
    await handle.signal("close")


async def test_sigterm_when_the_call_outlasts_the_grace(temporal_client, queue_settings, short_trajectory,
                                                        replay_server, spawn, store, database_url):
    call, victim, survivor, handle = await _sigterm_during_model_call(
        temporal_client, queue_settings, short_trajectory, replay_server, spawn, delay=120)
    # the worker gave up on it after the grace; the other worker ran it again
    assert call.identity == survivor.identity
    assert call.attempt >= 2
    await check_stored_once(store, database_url, handle, short_trajectory)
    await handle.signal("close")
