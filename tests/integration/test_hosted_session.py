"""A hosted session end to end on real parts: Temporal dev server, PostgreSQL, the
real ``openai`` client talking HTTP to the replay model server."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.worker import Replayer

from activities.tools import recall
from tests.integration.support import replay_config, run_replayed_session
from worker import sessions
from worker.payload_codec import DATA_CONVERTER
from worker.workflow_runner import workflow_runner
from workflows.contract.session import SubmitRequest
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture(scope="module")
async def finished(temporal_client, settings, trajectory, replay_server):
    """One replayed session of the 53-step recording, run to its end and closed."""
    handle, status = await run_replayed_session(temporal_client, settings, trajectory, replay_server)
    report = await sessions.context(handle)
    await handle.signal(SessionWorkflow.close)
    await handle.result()
    return handle, status, report


async def test_replayed_session_of_50_steps_completes(finished, trajectory):
    _, status, report = finished
    task = status.tasks[0]
    assert task.state == "completed", task.error
    # every recorded model call, plus the final answer without tool calls
    assert task.turns == len(trajectory.turns) + 1
    assert task.turns > 50
    assert len([i for i in report.items if i.kind == "tool_result"]) == sum(len(t.tool_calls) for t in trajectory.turns)


async def test_every_recorded_tool_output_is_stored_exactly_once(finished, trajectory, store):
    handle, _, report = finished
    recorded = [r.output for t in trajectory.turns for r in t.results]
    results = sorted((i for i in report.items if i.kind == "tool_result"), key=lambda i: i.seq)
    assert await store.count_observations(handle.id) == len(recorded)
    for item, expected in zip(results, recorded, strict=True):
        piece = await store.read_observation(handle.id, item.observation_id, 0, 65_536)
        assert piece.total_chars == len(expected)
        assert piece.text == expected[:65_536]


async def test_recall_returns_byte_identical_slices(finished, trajectory, store):
    handle, _, report = finished
    metas = [await store.observation_meta(handle.id, i.observation_id) for i in report.items if i.kind == "tool_result"]
    biggest = max(metas, key=lambda m: m.size_chars)
    full = next(r.output for t in trajectory.turns for r in t.results if len(r.output) == biggest.size_chars)
    address = f"observation://{biggest.obs_id}"
    for offset, limit in [(0, 10), (5, 100), (len(full) // 2, 333), (len(full) - 7, 50), (len(full) + 10, 5)]:
        piece = await store.read_observation(handle.id, biggest.obs_id, offset, limit)
        assert piece.text == full[offset: offset + limit]
        output, mark = await recall(store, handle.id, f'{{"address": "{address}", "offset": {offset}, "limit": {limit}}}')
        assert output.exit_code == 0
        assert output.text.split("\n", 1)[1] == full[offset: offset + limit]
        assert (mark.offset, mark.total_chars) == (offset, len(full))


async def test_recall_errors_are_clear(finished, store, database_url):
    handle, _, report = finished
    obs = next(i.observation_id for i in report.items if i.kind == "tool_result")
    unknown, _ = await recall(store, handle.id, '{"address": "observation://obs-nope"}')
    assert unknown.exit_code == 1 and "no observation" in unknown.text
    other, _ = await recall(store, "another-session", f'{{"address": "observation://{obs}"}}')
    assert other.exit_code == 1 and "no observation" in other.text
    negative, _ = await recall(store, handle.id, f'{{"address": "observation://{obs}", "offset": -5}}')
    assert negative.exit_code == 1 and "offset" in negative.text
    garbage, _ = await recall(store, handle.id, '{"address": "http://x"}')
    assert garbage.exit_code == 1 and "observation" in garbage.text


async def test_finished_history_replays_against_current_code(finished):
    handle, _, _ = finished
    history = await handle.fetch_history()
    await Replayer(workflows=[SessionWorkflow], data_converter=DATA_CONVERTER,
                   workflow_runner=workflow_runner()).replay_workflow(history)


@pytest.mark.parametrize("bad", ["", "   \n", 42, None, ["a list"]])
async def test_submit_rejects_empty_or_non_text_and_leaves_session_unchanged(
    bad, temporal_client, settings, trajectory, replay_server
):
    session_id = sessions.new_session_id("bad")
    handle = await sessions.start_session(
        temporal_client, replay_config(session_id, trajectory, replay_server), settings.task_queue
    )
    before = await sessions.status(handle)
    while before.items == 0:  # let the session finish starting (its system item)
        await asyncio.sleep(0.05)
        before = await sessions.status(handle)
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await handle.execute_update(SessionWorkflow.submit, SubmitRequest(text=bad))
    assert "submit rejected" in str(raised.value.cause)
    after = await sessions.status(handle)
    assert after == before and after.tasks == []
    await handle.terminate("test over")


async def test_history_grows_by_a_bounded_amount_per_turn(finished):
    """Bytes added by the last 10 turns are at most 1.5x those added by the first 10."""
    handle, status, _ = finished
    history = await handle.fetch_history()
    per_turn: list[int] = []
    current = None
    for event in history.events:
        attrs = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and attrs.activity_type.name == "call_model":
            if current is not None:
                per_turn.append(current)
            current = 0
        if current is not None:
            current += event.ByteSize()
    assert len(per_turn) >= 50
    first, last = sum(per_turn[:10]), sum(per_turn[-10:])
    assert last <= 1.5 * first, (first, last)
