"""compaction.enabled: one bounded LLM condensation before the deterministic fallback.

The agent is the replay model; the condenser is a scripted OpenAI-compatible server
(tests/condense/condenser_server.py) that answers valid memory, errors or slowly.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.condense.condenser_server import CondenserServer
from tests.integration.support import run_replayed_session
from worker import sessions
from workflows.contract.session import AppendItemsRequest, CompactionSettings, ExternalItem, SessionConfig
from workflows.session import SessionWorkflow
from workflows.usage import MODEL_USAGE

pytestmark = pytest.mark.usefixtures("worker")

BUDGET = 12_000


@pytest.fixture(scope="module")
def condenser():
    server = CondenserServer()
    yield server
    server.stop()


def settings_for(condenser: CondenserServer, **overrides) -> CompactionSettings:
    values = {"enabled": True, "condenser_model": "condenser", "condenser_base_url": condenser.base_url,
              "condenser_window": 64_000, "timeout_seconds": 5, **overrides}
    return CompactionSettings(**values)


async def condensation_events(store, session_id: str) -> list[str]:
    events = await store.list_events(session_id, limit=5_000)
    return [e.kind for e in events if e.kind.startswith(("context.condensation", "context.compaction"))]


async def test_valid_memory_replaces_the_condensed_prefix(temporal_client, settings, trajectory, replay_server,
                                                          condenser, store):
    condenser.script()  # every answer: a valid memory
    handle, status = await run_replayed_session(temporal_client, settings, trajectory, replay_server,
                                                budget_tokens=BUDGET, compaction=settings_for(condenser))
    assert status.tasks[0].state == "completed", status.tasks[0].error
    kinds = await condensation_events(store, handle.id)
    assert "context.condensation.started" in kinds and "context.condensation.succeeded" in kinds
    assert "context.compaction.llm" in kinds
    report = await sessions.context(handle)
    assert report.live_memory_id is not None
    memory = (await store.get_items(handle.id, [report.live_memory_id]))[report.live_memory_id]
    assert memory.content["content"]["text"].startswith("[Long-term memory]")
    # the stored history is the recording, exactly: condensation never rewrites it
    rows = await store.list_items(handle.id, lane="main", limit=10_000)
    outputs = [r.content["content"]["text"] for r in rows if r.kind == "tool_result"]
    assert outputs == [r.output for t in trajectory.turns for r in t.results]
    # the condenser's calls are accounted like the agent's: status totals and model.usage
    # events (the condenser server reports 1 prompt and 1 completion token per call)
    calls = len(condenser.requests)
    assert calls >= 1
    usage = (await sessions.status(handle)).usage
    assert (usage.by_kind["condenser"].calls, usage.by_kind["condenser"].prompt,
            usage.by_kind["condenser"].completion) == (calls, calls, calls)
    logged = [e.payload for e in await store.list_events(handle.id, limit=5_000)
              if e.kind == MODEL_USAGE and e.payload["kind"] == "condenser"]
    assert sum(e["calls"] for e in logged) == calls and {e["model"] for e in logged} == {"condenser"}
    await handle.signal(SessionWorkflow.close)


async def test_failing_condenser_falls_back_and_the_loop_guard_stops_attempts(
        temporal_client, settings, trajectory, replay_server, condenser, store):
    condenser.script(*["http_500"] * 200)
    # a small budget compacts often; the source never grows enough to lift the guard
    handle, status = await run_replayed_session(
        temporal_client, settings, trajectory, replay_server, budget_tokens=6_000,
        compaction=settings_for(condenser, retry_after_growth_tokens=1_000_000))
    assert status.tasks[0].state == "completed", status.tasks[0].error
    kinds = await condensation_events(store, handle.id)
    assert kinds.count("context.compaction.fallback") > 3  # every compaction still happened
    assert kinds.count("context.condensation.failed") == 3  # then the guard holds until the source grows
    assert kinds.count("context.condensation.skipped") == kinds.count("context.compaction.fallback") - 3
    assert len(condenser.requests) == 3 * 2  # three attempts, each retried once by Temporal
    report = await sessions.context(handle)
    assert report.live_memory_id is None
    assert report.working_set_tokens <= report.budget
    await handle.signal(SessionWorkflow.close)


async def test_result_of_a_lane_that_changed_meanwhile_is_discarded(temporal_client, settings, condenser, store):
    """External mode: items arrive while a slow condensation runs; its memory is stale."""
    condenser.script({"mode": "slow", "delay": 3})
    session_id, handle = await _external_session_over_the_trigger(temporal_client, settings, condenser,
                                                                  timeout_seconds=5)
    prepare = asyncio.create_task(handle.execute_update(SessionWorkflow.prepare_request))
    while len(condenser.requests) == 0:  # the condenser is working
        await asyncio.sleep(0.05)
    await handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(
        items=[ExternalItem(kind="note", text="The user added a constraint meanwhile.")]))
    prepared = await prepare
    kinds = await condensation_events(store, session_id)
    assert kinds[:2] == ["context.condensation.started", "context.condensation.discarded"]
    assert "context.compaction.fallback" in kinds
    report = await sessions.context(handle)
    assert report.live_memory_id is None and prepared.fits
    await handle.signal(SessionWorkflow.close)


async def _external_session_over_the_trigger(temporal_client, settings, condenser, timeout_seconds: float = 2) -> tuple:
    """An external-agent session whose appended items are over 80 % of its budget."""
    session_id = sessions.new_session_id("cond")
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=3_000,
                           compaction=settings_for(condenser, timeout_seconds=timeout_seconds))
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    items = [ExternalItem(kind="user", text="Fix the parser.")]
    for n in range(12):
        items.append(ExternalItem(kind="assistant", text=f"step {n}", tool_calls=[
            {"id": f"c{n}", "name": "bash", "arguments": f'{{"command": "cat f{n}.py"}}'}]))
        items.append(ExternalItem(kind="tool_result", tool_call_id=f"c{n}", tool_name="bash", exit_code=0,
                                  text=f"line {n}\n" * 120))
    await handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(items=items))
    return session_id, handle


@pytest.mark.parametrize(("script", "expected"), [
    (["valid"], ["started", "succeeded"]),
    (["invalid_json", "valid"], ["started", "retried", "succeeded"]),
    (["invalid_json", "invalid_json"], ["started", "retried", "invalid"]),
    (["schema", "schema"], ["started", "retried", "invalid"]),
    (["oversized_memory", "oversized_memory"], ["started", "retried", "invalid"]),
    ([{"mode": "http_429", "retry_after": 1}, "valid"], ["started", "succeeded"]),
    (["http_500", "http_500"], ["started", "failed"]),
    ([{"mode": "timeout", "delay": 4}, {"mode": "timeout", "delay": 4}], ["started", "failed"]),
], ids=["valid", "invalid-then-valid", "invalid-json-twice", "schema-twice", "oversized-twice", "429-retry-after",
        "http-500", "timeout"])
async def test_each_condenser_answer_has_its_outcome_and_history_stays_exact(
        script, expected, temporal_client, settings, condenser, store):
    condenser.script(*script)
    session_id, handle = await _external_session_over_the_trigger(temporal_client, settings, condenser)
    before = await store.list_items(session_id, lane="main", limit=1_000)
    prepared = await handle.execute_update(SessionWorkflow.prepare_request)
    kinds = [k.removeprefix("context.condensation.") for k in await condensation_events(store, session_id)
             if k.startswith("context.condensation")]
    assert kinds == expected
    compactions = [k for k in await condensation_events(store, session_id) if k.startswith("context.compaction")]
    if expected[-1] == "succeeded":  # then the fallback, when the memory left the lane over its target
        assert compactions[0] == "context.compaction.llm" and compactions[1:] in ([], ["context.compaction.fallback"])
    else:
        assert compactions == ["context.compaction.fallback"]
    # the lane's stored items are byte for byte what was appended: only generated items are new
    after = await store.list_items(session_id, lane="main", limit=1_000)
    assert [r.model_dump() for r in after] == [r.model_dump() for r in before]
    report = await sessions.context(handle)
    assert (report.live_memory_id is not None) == (expected[-1] == "succeeded")
    assert prepared.fits
    await handle.signal(SessionWorkflow.close)


async def test_a_condensation_still_over_target_is_followed_by_the_fallback(
        temporal_client, settings, trajectory, replay_server, condenser, store):
    # measured: after a successful condensation the request was 13,182 tokens of 12,000
    condenser.script(*["large_memory"] * 40)  # a valid memory close to its 2,000-token cap, every time
    handle, status = await run_replayed_session(temporal_client, settings, trajectory, replay_server,
                                                budget_tokens=6_000, compaction=settings_for(condenser))
    condenser.script()
    assert status.tasks[0].state == "completed", status.tasks[0].error
    kinds = await condensation_events(store, handle.id)
    followed = [after for before, after in zip(kinds, kinds[1:], strict=False)
                if before == "context.condensation.succeeded"]
    assert followed and "context.compaction.fallback" in followed
    events = await store.list_events(handle.id, limit=5_000)
    assert not [e for e in events if e.kind.startswith("context.overflow") or e.kind == "context.request.unfit"]
    await handle.signal(SessionWorkflow.close)
