"""A long session continues as new several times; nothing about it changes.

The request the workflow sends before its last model call must be byte-identical to
the one the pure engine plans offline for the same recording (worker/replay),
and every run's history stays far below Temporal's limits.
"""

from __future__ import annotations

import asyncio

import pytest

from recordings import dump_trajectory, load_trajectory, synthetic_trajectory
from tests.integration.support import replay_config_for
from worker import sessions
from worker.replay.model_server import ReplayModelServer
from worker.replay.recorded_lane import lane_batches
from worker.replay.simulator import iter_requests
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

TURNS = 240
TURNS_PER_RUN = 60
BUDGET = 16_000
MAX_HISTORY_BYTES = 4 * 1024 * 1024
MAX_HISTORY_EVENTS = 10_240


async def test_long_session_continues_as_new_and_matches_the_pure_engine(tmp_path, temporal_client, settings):
    recorded = synthetic_trajectory(TURNS, seed=7)
    for turn in recorded.turns:  # hosted replays do not inject mid-task user text
        turn.user_after = []
    path = dump_trajectory(recorded, tmp_path / "long.json")
    trajectory = load_trajectory(path)
    with ReplayModelServer([trajectory]) as server:
        session_id = sessions.new_session_id("long")
        config = replay_config_for(session_id, trajectory, path, server, budget_tokens=BUDGET,
                                   turns_per_run=TURNS_PER_RUN)
        handle = await sessions.start_session(temporal_client, config, settings.task_queue)
        task_id = await sessions.submit(handle, trajectory.task)
        status = await asyncio.wait_for(sessions.wait_task(handle, task_id, poll=0.5), timeout=600)
        # the request before the last recorded answer (the server keeps the last 200)
        last_request = next(r for r in reversed(server.requests()) if int(r["turn"]) == TURNS - 1)["body"]["messages"]
    assert status.tasks[0].state == "completed", status.tasks[0].error
    ends_with_answer = not trajectory.turns[-1].tool_calls
    assert status.tasks[0].turns == TURNS + (0 if ends_with_answer else 1)

    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{session_id}"')]
    assert len(runs) >= TURNS // TURNS_PER_RUN
    for run in runs:
        history = await temporal_client.get_workflow_handle(session_id, run_id=run.run_id).fetch_history()
        size = sum(event.ByteSize() for event in history.events)
        assert len(history.events) < MAX_HISTORY_EVENTS and size < MAX_HISTORY_BYTES, (run.run_id, size)

    # the pure engine, offline, with the same session id (observation addresses quote it)
    offline = list(iter_requests(trajectory, "lanes", BUDGET, batches=lane_batches(trajectory, session_id)))
    assert len(offline) == TURNS
    assert last_request == offline[-1].messages
    assert any(step.compacted for step in offline)  # the budget forced compactions on the way
    await handle.signal(SessionWorkflow.close)

