"""A gateway step answers before its writes finish (workflows/later_writes.py): the agent's new
turns are measured within the step and stored, with the items its plan generates, while the
API renders the request from the step's result. What must hold: the request the upstream got is
exactly the one the stored rows render, and every turn is stored once under the id the step
gave it, also when the turns are large (stored by reference first) or the plan compacted."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import openai
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.requests import materialise
from activities.store import Store
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.test_gateway_crash import ready, start_api
from tests.gateway.upstream import Scripted, ScriptedUpstream
from tests.workers.support import WorkerProcess
from worker.local.stack import free_port
from worker.settings import Settings
from workflows.context import Projection
from workflows.contract.session import StepRequest, StepResult

pytestmark = pytest.mark.timeout(180)

TOOLS: list[Any] = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                                       "parameters": {"type": "object",
                                                                      "properties": {"path": {"type": "string"}}}}}]


async def step_results(client: Client, session_id: str) -> list[tuple[StepRequest, StepResult]]:
    """Every step the session answered, with what it was asked (from its workflow history)."""
    asked: dict[int, StepRequest] = {}  # by the accepted event's id
    results = []
    async for event in client.get_workflow_handle(session_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            update = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if update.input.name == "step":
                asked[event.event_id] = (await client.data_converter.decode(update.input.args.payloads,
                                                                            [StepRequest]))[0]
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            completed = event.workflow_execution_update_completed_event_attributes
            if completed.accepted_event_id in asked:
                decoded = await client.data_converter.decode(completed.outcome.success.payloads, [StepResult])
                results.append((asked[completed.accepted_event_id], decoded[0]))
    return results


def sent_plans(steps: list[tuple[StepRequest, StepResult]]) -> list[list[tuple[str, Projection]]]:
    """The entries of each request the gateway sent, in order: a call's step's plan, or a
    continued call's (the plan made by the previous answer's step, with the turns that the
    continued call's answer step stored first appended whole)."""
    plans: list[list[tuple[str, Projection]]] = []
    last: StepResult | None = None  # the last answer step: the plan a continued call took
    for request, result in steps:
        answer = (request.step_id or "").startswith("gw-answer-")
        if not answer:
            plans.append(list(result.request.entries))
        elif request.continued is not None:
            assert last is not None and result.continued_held is True
            plans.append([*last.request.entries,
                          *[(item_id, Projection.FULL) for item_id in result.item_ids[:request.continued.items]]])
        if answer:
            last = result
    return plans


async def test_the_request_sent_while_a_step_is_written_is_the_one_its_stored_rows_render(
        gateway: str, upstream: ScriptedUpstream, temporal_client: Client, store: Store):
    name = f"up-{uuid.uuid4().hex[:8]}"
    files = [f"src/module_{n}.py" for n in range(8)]
    upstream.script(name, *[Scripted(calls=[(f"call_{n}", "read_file", {"path": path})]) for n, path in enumerate(files)],
                    Scripted(text="Read them all."))
    client = openai.AsyncOpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": "You read code."},
                           {"role": "user", "content": "Read every module."}]
    session_id = ""
    for n, path in enumerate(files + [None]):
        raw = await client.chat.completions.with_raw_response.create(
            model=name, messages=messages, tools=TOOLS, extra_headers={"X-Lanes-Budget-Tokens": "3000"})
        session_id = raw.headers["x-lanes-session"]
        message = raw.parse().choices[0].message
        if path is None:
            assert message.content == "Read them all."
            break
        messages.append(message.model_dump(exclude_none=True))
        await asyncio.sleep(0.1)  # the agent runs its tool (a call at once would carry the answer in its step)
        # every third output is larger than travels in workflow history: stored by reference first
        size = 40_000 if n % 3 == 2 else 300
        messages.append({"role": "tool", "tool_call_id": f"call_{n}",
                         "content": "".join(f"{path}:{line}: value_{line} = {line * n}\n" for line in range(size // 30))})

    await asyncio.to_thread(stored, gateway, session_id)  # a read through the API: the last answer's write ends first
    steps = await step_results(temporal_client, session_id)
    sent = upstream.of(name)
    plans = sent_plans(steps)
    assert len(plans) == len(sent) == len(files) + 1
    continued = [request for request, _ in steps if request.continued is not None]
    # the small outputs continued the plan their call's answer made (no update before the
    # upstream call); the large ones (stored by reference, entering as previews) took a step
    assert continued and all(item.content_ref is None and len(item.text or "") < 1000
                             for request in continued for item in request.items[:request.continued.items])
    # each step answered before its turns were written (the API rendered them from the result),
    # and a compaction's generated item was rendered while its write ran too
    assert all(result.request.unstored_items and [i.id for i in result.request.unstored_items] == result.item_ids
               for request, result in steps[1:] if request.write_behind)
    assert any(result.request.generated for _, result in steps)
    prepared = steps[0][1].request
    for entries, request in zip(plans, sent, strict=True):
        from_store = await materialise(store, session_id, entries, preview_chars=prepared.preview_chars,
                                       tools=prepared.tools, model=prepared.model,
                                       stable_prefix_entries=prepared.stable_prefix_entries,
                                       tool_set=prepared.tool_set, recall=prepared.recall)
        assert request["messages"] == json.loads(json.dumps(from_store.formatted("chat").messages))
        assert from_store.total_tokens <= prepared.budget

    # every turn stored once, under the id its step gave it, with the agent's exact text
    rows = await store.list_items(session_id, lane="main", after_seq=-1, limit=500)
    by_id = {row.item_id: row for row in rows}
    assert len(by_id) == len(rows)
    acknowledged = [item_id for _, result in steps for item_id in result.item_ids]
    assert len(set(acknowledged)) == len(acknowledged) and set(acknowledged) <= set(by_id)
    tool_texts = [m["content"] for m in messages if m["role"] == "tool"]
    assert [row.content["content"]["text"] for row in rows if row.kind == "tool_result"] == tool_texts


@pytest.mark.parametrize("continued", [False, True], ids=["step-first", "continued"])
async def test_a_worker_killed_while_a_steps_writes_wait_loses_nothing(
        gateway_settings: Settings, upstream: ScriptedUpstream, store: Store, tmp_path: Path, continued: bool):
    """A step's writes are held back (a transaction locks the items table against writes) and
    the worker is killed then. Without continued requests, the call's own step has answered
    (the upstream holds the request it rendered); with them, the call went upstream with no
    step and was answered, and the step storing its turn with the answer is the one held. A
    new worker stores the turns, once: the conversation's answers and turns are all there, each
    once, in order."""
    settings = gateway_settings.model_copy(update={"task_queue": f"gw-behind-{uuid.uuid4().hex[:6]}"})
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = start_api(settings, upstream, port, env_extra={"LANES_GATEWAY_CONTINUE": str(continued).lower()})
    worker = WorkerProcess.start(settings, tmp_path / "worker-1.log")
    replacement: WorkerProcess | None = None
    name = f"behind-{uuid.uuid4().hex[:8]}"
    held = threading.Event()
    upstream.script(name, Scripted(calls=[("call_1", "read_file", {"path": "setup.py"})]),
                    Scripted(text="It installs the package.", hold=None if continued else held))
    messages: list[Any] = [{"role": "system", "content": "You read code."},
                           {"role": "user", "content": f"What does setup.py do? {uuid.uuid4().hex}"}]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    locker = await asyncpg.connect(settings.database_url)
    try:
        await worker.wait_ready()
        await asyncio.to_thread(ready, base, api)
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
            first = await http.post("/gateway/openai/v1/chat/completions", json={"model": name, "messages": messages,
                                                                                 "tools": TOOLS})
            assert first.status_code == 200, first.text
            sid = first.headers["x-lanes-session"]
            output = "from setuptools import setup\nsetup(name='pkg')\n"
            messages += [first.json()["choices"][0]["message"],
                         {"role": "tool", "tool_call_id": "call_1", "content": output}]
            await _stored_kinds(store, sid, 3)  # the first answer's write has ended
            lock = locker.transaction()
            await lock.start()
            await locker.execute("LOCK TABLE items IN SHARE MODE")  # reads go on, writes wait
            second = asyncio.create_task(http.post("/gateway/openai/v1/chat/completions",
                                                   json={"model": name, "messages": messages, "tools": TOOLS}))
            deadline = time.monotonic() + 60
            while len(upstream.of(name)) < 2:  # the request reached the upstream
                assert time.monotonic() < deadline and not second.done(), "the second call never reached the upstream"
                await asyncio.sleep(0.05)
            assert upstream.of(name)[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": output}
            if continued:  # answered at once; the step that stores the turn and the answer waits on the lock
                answered = await second
                await _waiting_on_the_lock(locker)
            assert not any(r.kind == "tool_result" for r in await store.list_items(sid, lane="main"))  # not written yet
            worker.kill()
            await lock.rollback()
            replacement = WorkerProcess.start(settings, tmp_path / "worker-2.log")
            await replacement.wait_ready()
            held.set()
            answered = await second
            assert answered.status_code == 200, answered.text
            assert answered.json()["choices"][0]["message"]["content"] == "It installs the package."
            listed = await http.get(f"/v1/sessions/{sid}/items", params={"limit": 500})  # after the answer's write
            items = listed.json()["items"]
        assert [(i["kind"], i["text"]) for i in items] == [
            ("system", "You read code."), ("user", messages[1]["content"]), ("assistant", ""),
            ("tool_result", output), ("assistant", "It installs the package.")]
        rows = await store.list_items(sid, lane="main")
        assert len({r.item_id for r in rows}) == len(rows) == 5
    finally:
        held.set()
        await locker.close()
        for proc in (worker, replacement):
            if proc is not None:
                proc.kill()
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)


async def _stored_kinds(store: Store, sid: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(await store.list_items(sid, lane="main")) < count:
        assert time.monotonic() < deadline, f"{sid} never held {count} items"
        await asyncio.sleep(0.05)


async def _waiting_on_the_lock(locker: asyncpg.Connection) -> None:
    """Until another connection waits for the lock ``locker`` holds (a write into the items)."""
    deadline = time.monotonic() + 30
    while not await locker.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'items'::regclass"):
        assert time.monotonic() < deadline, "no write waited for the lock"
        await asyncio.sleep(0.05)
