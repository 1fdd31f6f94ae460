"""The budget is a guarantee, on real parts (issue 13): a hosted session never sends a
request over its budget, whatever the model or the user sends; when nothing can fit the
task fails, typed, without a provider call; oversized items are archived exactly and enter
bounded; a recall result always fits the preview.

The model is the scripted OpenAI-compatible server (tests/integration/scripted_model.py),
one script per model name; requests are counted with the token counter the workflow uses.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from activities.tokens import count_message_tokens
from tests.integration.scripted_model import ScriptedModel, tool_call
from worker import sessions
from workflows.context import ids
from workflows.contract import rejections
from workflows.contract.session import AppendItemsRequest, ExternalItem, SessionConfig
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


def _model(scripted_model: ScriptedModel, script: list[dict]) -> str:
    return scripted_model.add(f"budget-{uuid.uuid4().hex[:8]}", script)


def _sent(scripted_model: ScriptedModel, model: str) -> list[list[dict]]:
    return [r["messages"] for r in scripted_model.requests if r.get("model") == model]


def _tokens(messages: list[dict]) -> int:
    return sum(count_message_tokens(m, None) for m in messages)


async def _run(temporal_client, settings, model: str, text: str, **config) -> tuple:
    session_id = sessions.new_session_id("budget")
    handle = await sessions.start_session(temporal_client, SessionConfig(session_id=session_id, model=model, **config),
                                          settings.task_queue)
    task_id = await sessions.submit(handle, text)
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)
    return handle, status.tasks[0]


async def _event_kinds(store, session_id: str, prefix: str | tuple[str, ...]) -> list[str]:
    return [e.kind for e in await store.list_events(session_id, limit=2_000) if e.kind.startswith(prefix)]


async def test_a_runaway_answer_is_archived_and_the_next_request_stays_in_budget(
        temporal_client, settings, store, scripted_model):
    # measured: a 208,089-character answer stayed whole; the next request was 56,762 tokens at 16,000
    runaway = "".join(f"thinking step {n}: let me reconsider the approach once more.\n" for n in range(3_500))
    model = _model(scripted_model, [
        {"content": runaway, "tool_calls": [tool_call("c1", "bash", command="echo ok")]},
        {"content": "done"},
    ])
    handle, task = await _run(temporal_client, settings, model, "fix it", budget_tokens=16_000)
    assert task.state == "completed", task.error
    report = await sessions.context(handle)
    answer = next(i for i in report.items if i.kind == "assistant")
    assert answer.observation_id is not None and answer.projection == "compact"
    stored = await store.read_observation(handle.id, answer.observation_id, 0, 65_536)
    assert stored.text == runaway[:65_536]  # the answer's text first (offsets into it stay exact), then its calls
    tail = await store.read_observation(handle.id, answer.observation_id, len(runaway), 1_000)
    assert '"echo ok"' in tail.text.replace('\\"', '"')
    second = _sent(scripted_model, model)[1]
    sent_answer = next(m for m in second if m["role"] == "assistant")
    assert f"observation://{answer.observation_id}" in sent_answer["content"]
    assert _tokens(second) <= 16_000
    await handle.signal(SessionWorkflow.close)


@pytest.mark.parametrize("budget", [4_000, 8_000])
async def test_user_input_is_bounded_by_the_budget_not_a_character_constant(
        temporal_client, settings, store, scripted_model, budget):
    # measured: 31,999 characters stayed whole at a 4,000 or 8,000 budget, and never fit
    text = "".join(f"requirement {n}: the parser must accept input form {n}.\n" for n in range(600))[:31_999]
    model = _model(scripted_model, [{"content": "understood"}])
    handle, task = await _run(temporal_client, settings, model, text, budget_tokens=budget)
    assert task.state == "completed", task.error
    report = await sessions.context(handle)
    user = next(i for i in report.items if i.kind == "user")
    assert user.projection == "reference" and user.observation_id is not None
    whole = await store.read_observation(handle.id, user.observation_id, 0, 65_536)
    assert whole.text == text
    (request,) = _sent(scripted_model, model)
    assert _tokens(request) <= budget
    sent = next(m["content"] for m in request if m["role"] == "user")
    assert sent.startswith("Authoritative source: observation://") and sent.rstrip().endswith(text.rstrip()[-40:])
    await handle.signal(SessionWorkflow.close)


async def test_when_nothing_fits_the_task_fails_typed_without_a_provider_call(
        temporal_client, settings, store, scripted_model):
    model = _model(scripted_model, [{"content": "never asked"}])
    prompt = "".join(f"rule {n}: always be careful with item {n}.\n" for n in range(1_500))
    handle, task = await _run(temporal_client, settings, model, "hello", budget_tokens=2_000, system_prompt=prompt)
    assert task.state == "failed"
    assert task.error_type == rejections.REQUEST_UNFIT
    assert "does not fit" in task.error and "itm-000000 (system" in task.error
    assert _sent(scripted_model, model) == []  # the provider was never called
    assert await _event_kinds(store, handle.id, ("context.overflow", "context.request")) == [
        "context.overflow.planned", "context.overflow.planned", "context.request.unfit"]
    # the session stays usable: queries answer and the next submission is taken
    assert (await sessions.context(handle)).budget > 0
    await sessions.submit(handle, "again")
    await handle.signal(SessionWorkflow.close)


async def test_an_external_user_item_is_archived_and_enters_as_a_reference(temporal_client, settings, store):
    # measured: a 122,780-character external user item was pinned in full (35,521 tokens)
    session_id = sessions.new_session_id("budget-ext")
    handle = await sessions.start_session(
        temporal_client, SessionConfig(session_id=session_id, mode="external", budget_tokens=16_000),
        settings.task_queue)
    text = "".join(f"log line {n}: request served in {n % 97} ms\n" for n in range(3_600))[:122_780]
    content_ref = f"obs-{session_id}-upload-1"
    await sessions.context(handle)  # started: its row exists, as when the API stores an upload
    await store.put_observation(session_id, content_ref, "pending", text)
    result = await handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(
        items=[ExternalItem(kind="user", content_ref=content_ref)]))
    prepared = await handle.execute_update(SessionWorkflow.prepare_request)
    assert prepared.fits and prepared.total_tokens <= prepared.budget
    assert dict(prepared.entries)[result.item_ids[0]] == "reference"
    report = await sessions.context(handle)
    user = next(i for i in report.items if i.id == result.item_ids[0])
    assert user.observation_id == content_ref  # the upload is the address: stored once
    await handle.signal(SessionWorkflow.close)


async def test_a_default_recall_fits_the_preview_and_says_what_it_shows(
        temporal_client, settings, store, scripted_model):
    # measured: a default recall (16,497 characters) was larger than the 16,000 preview and got cut
    session_id = sessions.new_session_id("budget-recall")
    output_obs = ids.observation_id(session_id, ids.MAIN_LANE, 3)  # system 0, user 1, answer 2, result 3
    model = _model(scripted_model, [
        {"content": "", "tool_calls": [tool_call("c1", "bash", command="head -c 50000 /dev/zero | tr '\\0' x")]},
        {"content": "", "tool_calls": [tool_call("c2", "recall_observation", address=f"observation://{output_obs}",
                                                 offset=20_000)]},
        {"content": "done"},
    ])
    handle = await sessions.start_session(temporal_client, SessionConfig(session_id=session_id, model=model),
                                          settings.task_queue)
    task_id = await sessions.submit(handle, "read the output")
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)
    assert status.tasks[0].state == "completed", status.tasks[0].error
    report = await sessions.context(handle)
    recall = max((i for i in report.items if i.kind == "tool_result"), key=lambda i: i.seq)
    assert recall.size_chars <= 16_000  # the default preview: it entered whole, not as head and tail
    text = next(m["content"] for m in _sent(scripted_model, model)[2] if m.get("tool_call_id") == "c2")
    assert len(text) == recall.size_chars and "omitted" not in text
    header, body = text.split("\n", 1)
    shown = len(body)
    assert body == "x" * shown and 20_000 + shown < 50_000
    assert f"offset=20000&limit={shown}" in header and f"characters 20000 to {20_000 + shown} of 50000" in header
    assert f"next offset {20_000 + shown}" in header
    await handle.signal(SessionWorkflow.close)


