"""Recovery before a task is admitted: stale lane ownership is repaired and logged."""

from __future__ import annotations

import asyncio

import pytest

from worker import sessions
from workflows.contract.session import AppendItemsRequest, EpisodeBegin, ExternalItem, SessionConfig
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

NOTHING_REPAIRED = {"stale_lane_owners": 0, "episodes_closed": 0, "child_lanes_abandoned": 0, "child_lanes_failed": 0,
                    "handoffs_recovered": 0, "lanes": [], "task": None}


async def test_task_admitted_while_another_owns_the_lane_repairs_it(temporal_client, settings, store):
    """An external task with an open episode still owns the lane when a hosted message
    arrives (a session of either mode, as sessions started before modes were declared are):
    the stale task is abandoned, its episode closed, and the new task runs."""
    session_id = sessions.new_session_id("recover")
    config = SessionConfig(session_id=session_id, model="scripted", mode=None)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    await handle.execute_update(SessionWorkflow.append_items,
                                AppendItemsRequest(items=[ExternalItem(kind="user", text="look around")]))
    await handle.execute_update(SessionWorkflow.begin_episode,
                                EpisodeBegin(episode_id="look", kind="exploration", goal="read the tree"))
    task_id = await sessions.submit(handle, "Now write the note.")
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)

    by_id = {t.task_id: t for t in status.tasks}
    assert by_id[task_id].state == "completed", by_id[task_id].error
    assert by_id["task-0000"].state == "failed" and "abandoned by recovery" in by_id["task-0000"].error
    events = await store.list_events(session_id, limit=1_000)
    recovered = [e.payload for e in events if e.kind == "context.recovery.completed"]
    # every admission checks: the external message's found nothing, the hosted one's repaired
    assert recovered == [NOTHING_REPAIRED, {"stale_lane_owners": 1, "episodes_closed": 1, "child_lanes_abandoned": 0,
                                            "child_lanes_failed": 0, "handoffs_recovered": 0, "lanes": [],
                                            "task": "task-0000"}]
    for _ in range(100):  # the task's end is logged right after its status says so
        if any(e.kind == "task.completed" for e in events):
            break
        await asyncio.sleep(0.1)
        events = await store.list_events(session_id, limit=1_000)
    tasks = [(e.kind, e.payload["task_id"]) for e in events if e.kind.startswith("task.")]
    assert tasks == [("task.started", "task-0000"), ("task.queued", task_id), ("task.failed", "task-0000"),
                     ("task.started", task_id), ("task.completed", task_id)]
    failed = next(e.payload for e in events if e.kind == "task.failed")
    assert failed["error"] == by_id["task-0000"].error and failed["turns"] == 0
    abandoned = [e.payload["episode_id"] for e in events if e.kind == "episode.abandoned"]
    assert abandoned == ["look"]
    report = await sessions.context(handle)
    assert report.active_episodes == []
    # closed: abandoned by recovery (and possibly archived by a later compaction since)
    assert [(e.id, e.status.value) for e in report.episodes] in ([("look", "abandoned")], [("look", "archived")])
    await handle.signal(SessionWorkflow.close)
