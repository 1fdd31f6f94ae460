"""Hosted sessions a team can run (issue 15): a task's answer by ?wait and by GET /tasks/{id}
(also once the answer left the working set), task events, a refusal naming the variables
when no model is configured, an unreachable model failing its task within the session's
bound, the whole ledger matching the store row for row, and an ended exploration's
conclusion in the request right after its task ended."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from activities.store import Store
from lanes_client import AsyncLanesClient, LanesClient, user_item
from lanes_client.schemas import LedgerEntry
from tests.api.stack import TOKENS, replay_body
from worker.api.app import create_app
from worker.settings import Settings
from workflows.context import ids


async def _events(client: AsyncLanesClient, sid: str, prefix: str) -> list:
    return [e async for e in client.iter_events(sid) if e.kind.startswith(prefix)]


async def _ended_event(client: AsyncLanesClient, sid: str, task_id: str) -> None:
    """Wait (bounded) for the task's task.completed/task.failed event: the workflow writes it
    right after the task's status says it finished, which a wait may return on first."""
    for _ in range(100):
        if any(e.kind in ("task.completed", "task.failed") and e.payload.get("task_id") == task_id
               for e in await _events(client, sid, "task.")):
            return
        await asyncio.sleep(0.1)


async def _ledger(client: AsyncLanesClient, sid: str, **kw) -> list[LedgerEntry]:
    return [e async for e in client.iter_ledger(sid, page_size=7, **kw)]


async def test_the_answer_comes_back_by_wait_and_by_task_also_once_archived(client_a, api_settings, trajectory, replay):
    created = await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=6_000))
    sid = created.session_id

    first = await client_a.send_message(sid, trajectory.task, wait=60)
    assert first.task is not None and first.task.state == "completed", first.task
    answer = first.task.answer
    assert answer is not None and answer.item_id == first.task.answer_item_id and answer.text
    stored = await client_a.item(sid, answer.item_id)
    assert stored.kind == "assistant" and stored.text == answer.text and not stored.tool_calls

    await _ended_event(client_a, sid, first.task_id)
    kinds = [(e.kind, e.payload["task_id"]) for e in await _events(client_a, sid, "task.")]
    assert kinds == [("task.queued", first.task_id), ("task.started", first.task_id),
                     ("task.completed", first.task_id)]
    completed = (await _events(client_a, sid, "task.completed"))[0].payload
    assert completed["answer_item_id"] == answer.item_id and completed["turns"] == first.task.turns

    # more tasks under a small budget: the first answer leaves the working set
    for n in range(4):
        if answer.item_id not in {i.id for i in (await client_a.context(sid)).items}:
            break
        later = await client_a.send_message(sid, f"{trajectory.task} (again, {n})", wait=60)
        assert later.task is not None and later.task.state == "completed", later.task.error
    assert answer.item_id not in {i.id for i in (await client_a.context(sid)).items}
    archived = {e.item_id: e for e in await _ledger(client_a, sid, state="archived")}
    assert archived[answer.item_id].state == "archived" and archived[answer.item_id].reason

    task = await client_a.get_task(sid, first.task_id)
    assert task.state == "completed" and task.answer is not None and task.answer.text == answer.text
    short = await client_a.get_task(sid, first.task_id, max_chars=5)
    assert short.answer is not None and short.answer.text == answer.text[:5]
    assert short.answer.truncated == (len(answer.text) > 5) and short.answer.size_chars == len(answer.text)

    async with httpx.AsyncClient(base_url=str(client_a.base_url),
                                 headers={"Authorization": f"Bearer {next(iter(TOKENS))}"}) as http:
        missing = await http.get(f"/v1/sessions/{sid}/tasks/task-9999")
        assert missing.status_code == 404 and "task-9999" in missing.text
        bad = await http.post(f"/v1/sessions/{sid}/messages", params={"wait": 61}, json={"text": "x"})
        assert bad.status_code == 422 and "wait" in bad.text
        # the wait ends first: 202 and the task as it is (queued or running)
        quick = await http.post(f"/v1/sessions/{sid}/messages", params={"wait": 0}, json={"text": trajectory.task})
        assert quick.status_code == 202, quick.text
        assert quick.json()["task"]["state"] in ("queued", "running")
        assert quick.json()["task"]["answer"] is None
    await client_a.wait_task(sid, quick.json()["task_id"], timeout=60)  # the ledger below reads a quiet session

    # the ledger: every stored row of the lane and its generated items, once, with a reason
    entries = await _ledger(client_a, sid)
    store = await Store.open(api_settings.database_url)
    try:
        rows = [r for lane in (ids.MAIN_LANE, ids.generated_lane(ids.MAIN_LANE))
                for r in await store.list_items(sid, lane=lane, limit=10_000)]
        reasons = {e.payload["item_id"]: e.payload["reason"]
                   for e in await store.lane_events(sid, [ids.events_lane(ids.MAIN_LANE)], ["item.archived"])}
    finally:
        await store.close()
    assert [(e.item_id, e.lane, e.seq, e.kind) for e in entries] == [(r.item_id, r.lane, r.seq, r.kind) for r in rows]
    report = await client_a.context(sid)
    working = {i.id: i for i in report.items}
    for entry in entries:
        assert entry.reason, entry
        if entry.item_id in working:
            item = working[entry.item_id]
            assert entry.in_working_set and (entry.state, entry.projection, entry.tokens, entry.reason) == (
                item.lifecycle, item.projection, item.tokens, item.reason)
        else:
            assert (entry.state, entry.tokens, entry.reason) == ("archived", 0, reasons[entry.item_id]), entry
    page = await client_a.ledger(sid, limit=3)
    assert page.counts.history == len(rows) and page.counts.working_set == len(report.items)
    assert page.counts.archived == sum(1 for e in entries if e.state == "archived") > 0
    assert page.counts.observations > 0 and page.counts.by_state["archived"] == page.counts.archived
    pinned = await _ledger(client_a, sid, state="pinned")
    assert [e.item_id for e in pinned] == [e.item_id for e in entries if e.state == "pinned"] != []


def test_the_sync_client_waits_for_the_answer_too(api_stack, trajectory, replay):
    with LanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        sid = lanes.create_session(**replay_body(trajectory, replay)).session_id
        sent = lanes.send_message(sid, trajectory.task, wait=60)
        assert sent.task is not None and sent.task.answer is not None
        assert lanes.get_task(sid, sent.task_id).answer_text == sent.task.answer.text


async def test_a_hosted_session_without_a_model_is_refused_naming_the_variables(api_settings):
    settings = Settings(**{**api_settings.model_dump(), "openai_base_url": None, "openai_api_key": None})
    assert settings.model_endpoint() is None and "OPENAI_BASE_URL" in settings.model_banner()
    app = create_app(settings, tokens=TOKENS, allow_replay=True)
    token = next(iter(TOKENS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        before = (await http.get("/v1/sessions", params={"limit": 500})).json()["sessions"]
        refused = await http.post("/v1/sessions", json={"mode": "hosted"})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "model_not_configured"
        assert "OPENAI_BASE_URL" in error["message"] and "OPENAI_API_KEY" in error["message"]
        assert (await http.get("/v1/sessions", params={"limit": 500})).json()["sessions"] == before  # nothing written


async def test_an_unreachable_model_fails_the_task_with_its_cause_within_the_bound(client_a):
    # the stack's model endpoint is a closed port (tests/api/stack.py)
    sid = (await client_a.create_session(mode="hosted", tools="none", give_up_seconds=4)).session_id
    assert (await client_a.get_session(sid)).config["give_up_seconds"] == 4
    started = time.monotonic()
    sent = await client_a.send_message(sid, "hello?", wait=45)
    elapsed = time.monotonic() - started
    assert sent.task is not None and sent.task.state == "failed", sent.task
    assert elapsed < 4 + 15, elapsed  # the bound, plus a retry's backoff and the polling
    assert sent.task.error_type == "ModelUnavailable" and "Connection" in (sent.task.error or "")
    assert sent.task.answer is None
    await _ended_event(client_a, sid, sent.task_id)
    failed = (await _events(client_a, sid, "task.failed"))[0].payload
    assert failed == {"task_id": sent.task_id, "turns": 1, "error": sent.task.error, "error_type": "ModelUnavailable"}
    status = await client_a.status(sid)
    assert [(t.state, t.error_type) for t in status.tasks] == [("failed", "ModelUnavailable")]


@pytest.mark.parametrize("give_up", [0, -1, 86_401])
async def test_the_give_up_bound_is_checked(client_a, give_up):
    from lanes_client import Unprocessable
    with pytest.raises(Unprocessable, match="give_up_seconds"):
        await client_a.create_session(mode="hosted", give_up_seconds=give_up)


async def test_an_ended_explorations_conclusion_is_in_the_request_right_after_its_task(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=32_000)).session_id
    conclusion = "The flaky test depends on the wall clock in tests/test_time.py"
    await client_a.append_items(sid, [user_item("Why is the test flaky?")])
    await client_a.begin_episode(sid, "probe-clock", "exploration", "find what the test depends on")
    await client_a.append_items(sid, [
        {"kind": "assistant", "text": "", "tool_calls": [{"id": "c1", "name": "bash", "arguments": '{"cmd": "grep"}'}]},
        {"kind": "tool_result", "tool_call_id": "c1", "tool_name": "bash", "text": "tests/test_time.py: now()"},
    ])
    await client_a.end_episode(sid, "probe-clock", conclusion)
    await client_a.append_items(sid, [{"kind": "assistant", "text": "It depends on the clock."}])
    await client_a.append_items(sid, [user_item("Fix it.")])  # task 1 ends: its tool traffic is omitted
    request = await client_a.next_request(sid)
    text = "\n".join(str(m.get("content")) for m in request.messages)
    assert "tests/test_time.py: now()" not in text  # the exploration's traffic left the request
    assert conclusion in text  # its conclusion did not
    assert (await client_a.context(sid)).episodes[0].status == "completed"  # not archived: in the markers


async def test_external_tasks_log_their_events_and_answer_by_task(client_a):
    """An external agent's task starts with its user message and ends with the next one or
    with the session's close; its answer is the assistant turn it ended on."""
    sid = (await client_a.create_session(mode="external")).session_id
    await client_a.step(sid, [user_item("What is in the tree?")])
    await client_a.step(sid, [
        {"kind": "assistant", "text": "", "tool_calls": [{"id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'}]},
        {"kind": "tool_result", "tool_call_id": "c1", "tool_name": "bash", "text": "README.md\nsrc\n"},
    ])
    answered = await client_a.step(sid, [{"kind": "assistant", "text": "A README and src."}])
    first = (await client_a.status(sid)).tasks[0]
    assert (first.state, first.turns, first.answer_item_id) == ("completed", 2, answered.item_ids[0])
    task = await client_a.get_task(sid, first.task_id)
    assert task.answer is not None and task.answer.text == "A README and src."

    # two user messages in one call: the first of them is a task that ends at once
    await client_a.append_items(sid, [user_item("And in src?"), user_item("Never mind: list tests.")])
    await client_a.cancel_session(sid)
    for _ in range(100):  # the close is a signal: its event is written once the workflow acts on it
        events = [(e.kind, e.payload["task_id"]) for e in await _events(client_a, sid, "task.")]
        if len(events) == 6:
            break
        await asyncio.sleep(0.2)
    tasks = (await client_a.status(sid)).tasks
    ids_ = [t.task_id for t in tasks]
    assert len(ids_) == 3 and all(t.state == "completed" for t in tasks), tasks
    assert events == [("task.started", ids_[0]), ("task.completed", ids_[0]),
                      ("task.started", ids_[1]), ("task.completed", ids_[1]),
                      ("task.started", ids_[2]), ("task.completed", ids_[2])]
    completed = [e.payload for e in await _events(client_a, sid, "task.completed")]
    assert completed[0] == {"task_id": ids_[0], "turns": 2, "answer_item_id": answered.item_ids[0]}
    assert completed[2]["answer_item_id"] is None  # closed before it answered
