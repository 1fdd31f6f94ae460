"""A step that stores turns whose request was sent before it (StepRequest.continued), on the
real stack: the session checks it would have planned that request, says so, and records a
miss when it would not; either way the turns are stored exactly once and the next request fits.

The gateway builds these requests (worker/api/gateway/continuation.py); here the step is
driven directly, so that a stale plan (the session moved on after it) can be sent on purpose.
"""

from __future__ import annotations

import json

import pytest

from worker import sessions
from worker.api.gateway.continuation import Continuation, continued
from worker.api.gateway.conversation import Call, Turn
from workflows.contract.lane_events import CONTINUATION_MISSED
from workflows.contract.session import ExternalItem, SessionConfig, StepRequest, StepResult
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


def _answer(n: int, files: int = 2) -> Turn:
    return Turn("assistant", "", tool_calls=tuple(
        Call(f"c{n}-{k}", "read_file", json.dumps({"path": f"src/m{n}_{k}.py"})) for k in range(files)))


def _outputs(answer: Turn) -> list[Turn]:
    return [Turn("tool_result", f"# {call.id}\n" + "value = 1\n" * 20, tool_call_id=call.id)
            for call in answer.tool_calls]


def _item(turn: Turn) -> ExternalItem:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls]
    return ExternalItem(kind=turn.kind, text=turn.text, tool_calls=calls, tool_call_id=turn.tool_call_id)


async def _events(store, session_id: str, kind: str) -> list[dict]:
    return [e.payload for e in await store.list_events(session_id, limit=1000) if e.kind == kind]


async def test_a_continued_step_is_checked_and_a_stale_one_is_recorded_as_missed(temporal_client, settings, store):
    session_id = sessions.new_session_id("continued")
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=8_000)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    await handle.execute_update(SessionWorkflow.step, StepRequest(items=[ExternalItem(kind="user", text="Read all.")]))

    # the answer's step: its plan and the facts of what continues it
    answer = _answer(1)
    planned: StepResult = await handle.execute_update(SessionWorkflow.step, StepRequest(
        items=[_item(answer)], step_id="a1"))
    assert planned.request.continuation is not None and planned.request.fits
    plan = Continuation(position=2, chain="c", prepared=planned.request, contents={})
    going = continued(session_id, plan, _outputs(answer), ["t1", "t2"], answer)
    assert going is not None  # two small outputs continue it

    # the outputs, stored with the next answer by one step that checks what was sent
    following = _answer(2)
    held: StepResult = await handle.execute_update(SessionWorkflow.step, StepRequest(
        items=[*going.items, _item(following)], step_id="a2", continued=going.request))
    assert held.continued_held is True
    assert [e for e, _ in going.prepared.entries] == [e for e, _ in planned.request.entries] + held.item_ids[:2]
    assert await _events(store, session_id, CONTINUATION_MISSED) == []

    # a stale plan: the session stored another turn after it was made
    stale = Continuation(position=4, chain="c", prepared=held.request, contents={})
    late = continued(session_id, stale, _outputs(following), ["t3", "t4"], following)
    assert late is not None
    await handle.execute_update(SessionWorkflow.step, StepRequest(
        items=[ExternalItem(kind="note", text="Keep the tests green.")], step_id="n1"))
    missed: StepResult = await handle.execute_update(SessionWorkflow.step, StepRequest(
        items=[*late.items, _item(_answer(3, files=1))], step_id="a3", continued=late.request))
    assert missed.continued_held is False and missed.request.fits
    events = await _events(store, session_id, CONTINUATION_MISSED)
    assert len(events) == 1 and events[0]["generation"] == late.request.generation
    assert events[0]["generation_then"] > late.request.generation

    # the same step again (a retry): nothing stored twice, no second miss
    again: StepResult = await handle.execute_update(SessionWorkflow.step, StepRequest(
        items=[*late.items, _item(_answer(3, files=1))], step_id="a3", continued=late.request))
    assert again.repeated and again.item_ids == missed.item_ids
    rows = await store.list_items(session_id, lane="main", limit=100)
    assert [r.kind for r in rows] == ["system", "user", "assistant", "tool_result", "tool_result", "assistant", "note",
                                      "tool_result", "tool_result", "assistant"]
    assert [r.content["content"]["text"] for r in rows if r.kind == "tool_result"] == [
        t.text for t in [*_outputs(answer), *_outputs(following)]]
    assert len(await _events(store, session_id, CONTINUATION_MISSED)) == 1
    await handle.signal(SessionWorkflow.close)
