"""Kill -9 the worker process in the middle of a replayed session: it carries on.

The worker runs in its own process here (the in-process test worker would poll the
same queue, so these tests use their own task queue).
"""

from __future__ import annotations

import signal
import uuid

from tests.integration.support import comparable, run_replayed_session, spawn_worker, twin_session_ids
from worker import sessions
from worker.local.stack import kill_process
from workflows.session import SessionWorkflow

KILL_AT_STEP = 20


async def test_session_survives_sigkill_of_its_worker(temporal_client, settings, trajectory, replay_server,
                                                      store, stack_dir):
    own = settings.model_copy(update={"task_queue": f"lanes-crash-{uuid.uuid4().hex[:8]}"})
    workers = [spawn_worker(own, stack_dir / "logs" / "crash-worker-0.log")]
    killed_at: list[int] = []
    crashed_id, clean_id = twin_session_ids()

    async def kill_midway(status) -> None:
        if not killed_at and status.turns >= KILL_AT_STEP:
            killed_at.append(status.turns)
            kill_process(workers[-1], signal.SIGKILL)
            workers.append(spawn_worker(own, stack_dir / "logs" / "crash-worker-1.log"))

    # each answer takes 0.2 s, so the session cannot run past the kill between two status polls
    replay_server.set_faults("timeout", count=-1, delay_seconds=0.2)
    try:
        try:
            crashed, status = await run_replayed_session(
                temporal_client, own, trajectory, replay_server, on_status=kill_midway, budget_tokens=12_000,
                session_id=crashed_id,
            )
        finally:
            replay_server.set_faults("none")
        assert killed_at and workers[0].poll() == -signal.SIGKILL
        assert status.tasks[0].state == "completed", status.tasks[0].error
        crashed_report = await sessions.context(crashed)

        clean, clean_status = await run_replayed_session(
            temporal_client, own, trajectory, replay_server, budget_tokens=12_000, session_id=clean_id
        )
        clean_report = await sessions.context(clean)
    finally:
        for proc in workers:
            kill_process(proc)

    # every item exactly once, in order, in both the item table and the event log
    rows = await store.list_items(crashed.id, limit=10_000)
    lane = [r for r in rows if r.lane == "main"]
    seqs = [r.seq for r in lane]
    assert seqs == sorted(set(seqs))
    events = await store.list_events(crashed.id, limit=10_000)
    added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
    assert added == [r.item_id for r in lane]  # once each, in lane order
    # every item is either in the working set or was archived by a compaction (logged)
    archived = [e.payload["item_id"] for e in events if e.kind == "item.archived"]
    assert len(archived) == len(set(archived))
    in_context = {i.id for i in crashed_report.items}
    stored = {r.item_id for r in rows}
    assert in_context <= stored
    assert {r.item_id for r in lane} <= in_context | set(archived)
    assert crashed_report.compactions >= 1  # the budget forces the fallback during the run
    # and the final context equals that of an uninterrupted run of the same recording
    assert comparable(crashed_report) == comparable(clean_report)
    assert status.tasks[0].turns == clean_status.tasks[0].turns
    for handle in (crashed, clean):
        await handle.signal(SessionWorkflow.close)
