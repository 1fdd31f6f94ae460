"""Replacing the live memory survives a worker killed around it: never two, never none.

The worker is SIGKILLed the moment the condenser receives a request (after the
condensation started, before its result is applied), then again later in the run.
"""

from __future__ import annotations

import signal
import uuid

import pytest

from tests.condense.condenser_server import CondenserServer
from tests.integration.support import run_replayed_session, spawn_worker
from worker import sessions
from worker.local.stack import kill_process
from workflows.contract.session import CompactionSettings
from workflows.session import SessionWorkflow


@pytest.fixture
def condenser():
    server = CondenserServer()
    yield server
    server.stop()


async def test_live_memory_is_replaced_atomically_across_worker_kills(
        temporal_client, settings, trajectory, replay_server, condenser, store, stack_dir):
    own = settings.model_copy(update={"task_queue": f"lanes-memory-{uuid.uuid4().hex[:8]}"})
    workers = [spawn_worker(own, stack_dir / "logs" / "memory-worker-0.log")]
    seen_requests = 0

    async def kill_when_condensing(status) -> None:
        nonlocal seen_requests
        if len(condenser.requests) > seen_requests and len(workers) <= 3:
            seen_requests = len(condenser.requests)
            kill_process(workers[-1], signal.SIGKILL)
            workers.append(spawn_worker(own, stack_dir / "logs" / f"memory-worker-{len(workers)}.log"))

    # slow answers give the watcher time to kill the worker while the condenser is working
    condenser.script(*[{"mode": "slow", "delay": 1.5}] * 50)
    compaction = CompactionSettings(enabled=True, condenser_model="condenser", condenser_base_url=condenser.base_url,
                                    condenser_window=64_000, timeout_seconds=10)
    try:
        handle, status = await run_replayed_session(temporal_client, own, trajectory, replay_server,
                                                    on_status=kill_when_condensing, budget_tokens=8_000,
                                                    compaction=compaction)
        report = await sessions.context(handle)
        await handle.signal(SessionWorkflow.close)
    finally:
        for proc in workers:
            kill_process(proc)
    assert len(workers) > 1, "no condensation happened while the test watched"
    assert status.tasks[0].state == "completed", status.tasks[0].error

    memories = [i for i in report.items if i.kind == "memory"]
    assert len(memories) == 1 and report.live_memory_id == memories[0].id
    stored = await store.get_items(handle.id, [memories[0].id])
    assert stored[memories[0].id].content["content"]["text"].startswith("[Long-term memory]")
    events = await store.list_events(handle.id, limit=5_000)
    succeeded = [e for e in events if e.kind == "context.condensation.succeeded"]
    # every replaced memory was archived (logged), the last one is live
    archived_memories = {e.payload["item_id"] for e in events
                         if e.kind == "item.archived" and e.payload["metadata"]["kind"] == "memory"}
    assert len(succeeded) == len(archived_memories) + 1
    assert report.live_memory_id not in archived_memories

