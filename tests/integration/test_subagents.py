"""Subagent lanes on the real stack: shared prefix, handoffs, crashes and repairs."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from tests.integration.subagent_script import (
    busy_parent,
    child_trajectory,
    parent_trajectory,
    session_config,
    write_recordings,
)
from tests.integration.support import spawn_worker
from tests.integration.test_recovery import NOTHING_REPAIRED
from worker import sessions
from worker.local.stack import kill_process
from worker.replay.model_server import ReplayModelServer
from workflows.contract.session import SpawnRequest
from workflows.session import SessionWorkflow

BRIEFS = ["Inspect module 0.", "Inspect module 1.", "Inspect module 2."]


@pytest.fixture
def recordings(tmp_path):
    return write_recordings(
        tmp_path, parent_trajectory(BRIEFS, extra_spawn_arguments=[{"tools": ["bash"]}]),
        [child_trajectory(0, nested_spawn=True), child_trajectory(1), child_trajectory(2)])


@pytest.fixture
def server(recordings):
    parent, children = recordings
    with ReplayModelServer([parent[0], *(c[0] for c in children)]) as running:
        yield running


def _requests(server: ReplayModelServer, trajectory_id: str) -> list[dict]:
    return [r for r in server.requests() if r["trajectory"] == trajectory_id]


async def _run(client, queue, recordings, server, **subagents):
    parent, children = recordings
    session_id = sessions.new_session_id("lanes")
    handle = await sessions.start_session(client, session_config(session_id, parent, children, server, **subagents),
                                          queue)
    task_id = await sessions.submit(handle, parent[0].task)
    return handle, task_id


async def _spawn_then_continue_as_new(client, queue, recordings, server, *, delay: float):
    """A session that continues as new every two turns starts subagent sub-0001 through the
    API, then a task (model calls take ``delay`` s); returns once it continued as new with
    the subagent still running: (the session's latest handle, the subagent's, the task id)."""
    parent, children = recordings
    session_id = sessions.new_session_id("lanes-can")
    handle = await sessions.start_session(
        client, session_config(session_id, parent, children, server, config={"turns_per_run": 2}), queue)
    server.set_faults("timeout", count=-1, delay_seconds=delay)
    await handle.execute_update(SessionWorkflow.spawn_subagent, SpawnRequest(brief="Inspect module 0."))
    task_id = await sessions.submit(handle, parent[0].task)
    latest, child = await _continued_while_the_subagent_runs(client, session_id, handle.result_run_id)
    return latest, child, task_id


async def _once_finished(handle):
    """The session's subagents once sub-0001 is no longer running (or after 60 s)."""
    for _ in range(600):
        lanes = await sessions.subagents(handle)
        if lanes[0].state != "running":
            break
        await asyncio.sleep(0.1)
    return lanes


async def _continued_while_the_subagent_runs(client, session_id: str, first_run: str):
    """Wait until the session continued as new; its subagent sub-0001 must still be running."""
    latest = client.get_workflow_handle(session_id)
    for _ in range(600):
        if (await latest.describe()).run_id != first_run:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the session never continued as new")
    child = client.get_workflow_handle(f"{session_id}/sub-0001")
    assert (await child.describe()).status.name == "RUNNING", "the subagent finished too early for this test"
    return latest, child


async def _handoff_rows(store, session_id: str):
    rows = await store.list_items(session_id, lane="main", limit=10_000)
    return [r for r in rows if r.kind == "handoff"]


@pytest.mark.usefixtures("worker")
async def test_three_concurrent_subagents_share_the_parent_prefix_and_hand_off(
        temporal_client, settings, store, recordings, server):
    handle, task_id = await _run(temporal_client, settings.task_queue, recordings, server)
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=180)
    assert status.tasks[0].state == "completed", status.tasks[0].error

    # every request of every child starts with the parent's request that spawned it, byte for byte
    (parent, _), children = recordings
    spawning = _requests(server, parent.id)[0]["body"]["messages"]
    for child, _ in children:
        child_requests = _requests(server, child.id)
        assert len(child_requests) == len(child.turns)
        for request in child_requests:
            assert request["body"]["messages"][: len(spawning)] == spawning
            assert "Your task:\nInspect module" in request["body"]["messages"][len(spawning)]["content"]

    # exactly three handoffs, each the answer of its spawn call; the invalid call was refused
    lanes = await sessions.subagents(handle)
    assert sorted((c.lane, c.state) for c in lanes) == [("sub-0001", "completed"), ("sub-0002", "completed"),
                                                        ("sub-0003", "completed")]
    handoffs = await _handoff_rows(store, handle.id)
    assert len(handoffs) == 3
    assert sorted(r.content["content"]["tool_call_id"] for r in handoffs) == ["spawn-0", "spawn-1", "spawn-2"]
    after = _requests(server, parent.id)[1]["body"]["messages"]
    answers = {m["tool_call_id"]: m["content"] for m in after if m["role"] == "tool"}
    for n in range(3):
        text = answers[f"spawn-{n}"]
        assert text.startswith(f"Handoff from subagent lane sub-000{n + 1} (status: completed)")
        assert json.loads(text.split("\n", 1)[1])["findings"] == [f"module {n} returns {n}"]
    assert answers["spawn-x0"].startswith("spawn_subagent refused: invalid arguments: brief")

    # the children's traces stay in the store under their lanes; a nested spawn was refused
    child_rows = await store.list_items(handle.id, lane="sub-0001", limit=1_000)
    refusals = [r for r in child_rows if r.kind == "tool_result" and r.content["content"]["tool_name"] == "spawn_subagent"]
    assert refusals and "cannot start subagents" in refusals[0].content["content"]["text"]
    assert [r.kind for r in child_rows][-1] == "handoff"
    events = await store.list_events(handle.id, limit=10_000)
    spawned = [e.payload for e in events if e.kind == "lane.spawned"]
    assert [p["lane"] for p in spawned] == ["sub-0001", "sub-0002", "sub-0003"]
    assert all(p["shared_prefix_entries"] == len(spawning) for p in spawned)
    child_report = await temporal_client.get_workflow_handle(f"{handle.id}/sub-0002").query("context")
    assert child_report["shared_prefix_entries"] == len(spawning)
    await handle.signal(SessionWorkflow.close)
    await asyncio.wait_for(handle.result(), timeout=60)


async def test_worker_killed_while_subagents_run_still_yields_three_handoffs(
        temporal_client, settings, store, stack_dir, recordings, server):
    own = settings.model_copy(update={"task_queue": f"lanes-sub-crash-{uuid.uuid4().hex[:8]}"})
    workers = [spawn_worker(own, stack_dir / "logs" / "sub-crash-0.log")]
    server.set_faults("timeout", count=-1, delay_seconds=1.5)  # every model call takes a while
    try:
        handle, task_id = await _run(temporal_client, own.task_queue, recordings, server)
        for _ in range(600):
            try:
                lanes = await sessions.subagents(handle)
            except RPCError:  # the worker process is still starting
                lanes = []
            if len(lanes) == 3 and all(c.state == "running" for c in lanes):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the three subagents never ran together")
        kill_process(workers[0], signal.SIGKILL)
        workers.append(spawn_worker(own, stack_dir / "logs" / "sub-crash-1.log"))
        server.set_faults("none")
        status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=240)
        report = await sessions.context(handle)
    finally:
        server.set_faults("none")
        for proc in workers:
            kill_process(proc)
    assert workers[0].poll() == -signal.SIGKILL
    assert status.tasks[0].state == "completed", status.tasks[0].error
    handoffs = await _handoff_rows(store, handle.id)
    assert len(handoffs) == 3 and len({r.content["content"]["tool_call_id"] for r in handoffs}) == 3
    events = await store.list_events(handle.id, limit=10_000)
    added = Counter(e.payload["item_id"] for e in events if e.kind == "item.added")
    assert all(count == 1 for count in added.values())
    assert Counter(e.kind for e in events)["lane.spawned"] == 3
    in_context = [i.id for i in report.items if i.kind == "handoff"]
    assert len(in_context) == len(set(in_context)) and set(in_context) <= {r.item_id for r in handoffs}


@pytest.mark.usefixtures("worker")
async def test_subagent_terminated_from_outside_is_repaired(temporal_client, settings, store, tmp_path):
    (parent, children) = write_recordings(tmp_path, parent_trajectory(BRIEFS[:2]),
                                          [child_trajectory(0), child_trajectory(1)])
    with ReplayModelServer([parent[0], *(c[0] for c in children)]) as server:
        server.set_faults("timeout", count=-1, delay_seconds=1.0)
        handle, task_id = await _run(temporal_client, settings.task_queue, (parent, children), server)
        victim = f"{handle.id}/sub-0001"
        for _ in range(600):  # terminate once its episode is open
            events = await store.list_events(handle.id, limit=10_000)
            if any(e.kind == "episode.begun" and e.lane == "sub-0001:events" for e in events):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the subagent never began its episode")
        await temporal_client.get_workflow_handle(victim).terminate("test: killed from outside")
        server.set_faults("none")
        status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=180)
    assert status.tasks[0].state == "completed", status.tasks[0].error
    lanes = {c.lane: c for c in await sessions.subagents(handle)}
    assert lanes["sub-0001"].state == "abandoned" and "terminated" in lanes["sub-0001"].reason
    assert lanes["sub-0002"].state == "completed"
    events = await store.list_events(handle.id, limit=10_000)
    recovered = [e.payload for e in events if e.kind == "context.recovery.completed" and e.payload != NOTHING_REPAIRED]
    assert recovered == [{"stale_lane_owners": 0, "episodes_closed": 1, "child_lanes_abandoned": 1,
                          "child_lanes_failed": 0, "handoffs_recovered": 0, "lanes": ["sub-0001"],
                          "task": task_id}]
    closed = [e.payload for e in events if e.kind == "episode.abandoned" and e.lane == "sub-0001:recovery"]
    assert [p["episode_id"] for p in closed] == ["inspect-0"]
    handoffs = {r.content["content"]["tool_call_id"]: r for r in await _handoff_rows(store, handle.id)}
    assert set(handoffs) == {"spawn-0", "spawn-1"}
    failed = handoffs["spawn-0"].content["content"]["text"]
    assert "(status: failed)" in failed and "terminated from outside" in failed
    await handle.signal(SessionWorkflow.close)


@pytest.mark.usefixtures("worker")
async def test_api_spawned_subagent_hands_off_into_the_lane_and_the_cap_is_enforced(
        temporal_client, settings, store, tmp_path):
    (parent, children) = write_recordings(tmp_path, parent_trajectory([]), [child_trajectory(0)])
    with ReplayModelServer([parent[0], *(c[0] for c in children)]) as server:
        session_id = sessions.new_session_id("lanes-api")
        handle = await sessions.start_session(
            temporal_client, session_config(session_id, parent, children, server, max_concurrent=1),
            settings.task_queue)
        server.set_faults("timeout", count=-1, delay_seconds=0.5)
        started = await handle.execute_update(SessionWorkflow.spawn_subagent, SpawnRequest(brief="Inspect module 0."))
        assert started.lane == "sub-0001" and started.workflow_id == f"{session_id}/sub-0001"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(SessionWorkflow.spawn_subagent, SpawnRequest(brief="another one"))
        assert "1 subagents are running; the limit is 1" in str(refused.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as unknown:
            await handle.execute_update(SessionWorkflow.spawn_subagent,
                                        SpawnRequest(brief="x", tools=["write_file"]))
        assert "not available in this session" in str(unknown.value.cause)
        server.set_faults("none")
        lanes = await _once_finished(handle)
    assert lanes[0].state == "completed" and lanes[0].handoff_item_id is not None
    report = await sessions.context(handle)
    handoff = next(i for i in report.items if i.id == lanes[0].handoff_item_id)
    assert handoff.kind == "handoff" and handoff.role == "user"
    assert len(await _handoff_rows(store, session_id)) == 1
    await handle.signal(SessionWorkflow.close)


@pytest.mark.usefixtures("worker")
async def test_a_later_run_finds_a_subagent_that_died_and_repairs_it_before_the_next_task(
        temporal_client, settings, store, tmp_path):
    """The run that started the subagent continued as new; the subagent is then terminated, so
    no signal ever comes: the next task's admission asks Temporal, repairs and logs it."""
    recordings = write_recordings(tmp_path, busy_parent(3), [child_trajectory(0, reads=8)])
    with ReplayModelServer([recordings[0][0], recordings[1][0][0]]) as server:
        latest, child, first_task = await _spawn_then_continue_as_new(
            temporal_client, settings.task_queue, recordings, server, delay=0.7)
        session_id = latest.id
        await child.terminate("test: killed from outside")
        server.set_faults("none")
        await asyncio.wait_for(sessions.wait_task(latest, first_task), timeout=120)
        second_task = await sessions.submit(latest, "List them again.")
        status = await asyncio.wait_for(sessions.wait_task(latest, second_task), timeout=120)
    assert {t.task_id: t.state for t in status.tasks}[second_task] == "completed"
    events = await store.list_events(session_id, limit=10_000)
    recovered = [e.payload for e in events if e.kind == "context.recovery.completed"]
    assert recovered[0] == NOTHING_REPAIRED  # the first task's admission
    assert [p for p in recovered if p != NOTHING_REPAIRED] == [
        {"stale_lane_owners": 0, "episodes_closed": 1, "child_lanes_abandoned": 1, "child_lanes_failed": 0,
         "handoffs_recovered": 0, "lanes": ["sub-0001"], "task": None}]
    lanes = await sessions.subagents(latest)
    assert [(c.lane, c.state) for c in lanes] == [("sub-0001", "abandoned")]
    report = await sessions.context(latest)
    handoff = next(i for i in report.items if i.id == lanes[0].handoff_item_id)
    assert handoff.kind == "handoff" and handoff.role == "user"
    await latest.signal(SessionWorkflow.close)


@pytest.mark.usefixtures("worker")
async def test_a_running_subagent_survives_continue_as_new_and_hands_off_to_the_new_run(
        temporal_client, settings, store, tmp_path):
    recordings = write_recordings(tmp_path, busy_parent(3), [child_trajectory(0, reads=6)])
    with ReplayModelServer([recordings[0][0], recordings[1][0][0]]) as server:
        latest, _, task_id = await _spawn_then_continue_as_new(
            temporal_client, settings.task_queue, recordings, server, delay=0.5)
        session_id = latest.id
        server.set_faults("none")
        await asyncio.wait_for(sessions.wait_task(latest, task_id), timeout=120)
        lanes = await _once_finished(latest)
    assert [(c.lane, c.state) for c in lanes] == [("sub-0001", "completed")]
    rows = await _handoff_rows(store, session_id)
    assert [r.item_id for r in rows] == [lanes[0].handoff_item_id]
    events = await store.list_events(session_id, limit=10_000)
    # the hosted task's admission checked, and nothing needed repair
    assert [e.payload for e in events if e.kind == "context.recovery.completed"] == [NOTHING_REPAIRED]
    await latest.signal(SessionWorkflow.close)
    await asyncio.wait_for(latest.result(), timeout=60)
