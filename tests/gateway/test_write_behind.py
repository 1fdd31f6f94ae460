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
from tests.gateway.test_gateway_crash import ready, start_api
from tests.gateway.upstream import Scripted, ScriptedUpstream
from tests.workers.support import WorkerProcess
from worker.local.stack import free_port
from worker.settings import Settings
from workflows.contract.session import StepResult

pytestmark = pytest.mark.timeout(180)

TOOLS: list[Any] = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                                       "parameters": {"type": "object",
                                                                      "properties": {"path": {"type": "string"}}}}}]


async def step_results(client: Client, session_id: str) -> list[StepResult]:
    """Every step the session answered, as the API was answered (from its workflow history)."""
    results = []
    async for event in client.get_workflow_handle(session_id).fetch_history_events():
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            continue
        outcome = event.workflow_execution_update_completed_event_attributes.outcome
        decoded = await client.data_converter.decode(outcome.success.payloads, [StepResult])
        if isinstance(decoded[0], StepResult) and decoded[0].request is not None:
            results.append(decoded[0])
    return results


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
        # every third output is larger than travels in workflow history: stored by reference first
        size = 40_000 if n % 3 == 2 else 300
        messages.append({"role": "tool", "tool_call_id": f"call_{n}",
                         "content": "".join(f"{path}:{line}: value_{line} = {line * n}\n" for line in range(size // 30))})

    steps = await step_results(temporal_client, session_id)
    sent = upstream.of(name)
    assert len(steps) == len(sent) == len(files) + 1
    # each step answered before its turns were written (the API rendered them from the result),
    # and a compaction's generated item was rendered while its write ran too
    assert all(step.request.unstored_items and [i.id for i in step.request.unstored_items] == step.item_ids
               for step in steps[1:])
    assert any(step.request.generated for step in steps)
    for step, request in zip(steps, sent, strict=True):
        prepared = step.request
        from_store = await materialise(store, session_id, prepared.entries, preview_chars=prepared.preview_chars,
                                       tools=prepared.tools, model=prepared.model,
                                       stable_prefix_entries=prepared.stable_prefix_entries,
                                       tool_set=prepared.tool_set, recall=prepared.recall)
        assert request["messages"] == json.loads(json.dumps(from_store.formatted("chat").messages))
        assert from_store.total_tokens <= prepared.budget

    # every turn stored once, under the id its step gave it, with the agent's exact text
    rows = await store.list_items(session_id, lane="main", after_seq=-1, limit=500)
    by_id = {row.item_id: row for row in rows}
    assert len(by_id) == len(rows)
    acknowledged = [item_id for step in steps for item_id in step.item_ids]
    assert len(set(acknowledged)) == len(acknowledged) and set(acknowledged) <= set(by_id)
    tool_texts = [m["content"] for m in messages if m["role"] == "tool"]
    assert [row.content["content"]["text"] for row in rows if row.kind == "tool_result"] == tool_texts


async def test_a_worker_killed_while_a_steps_writes_wait_loses_nothing(
        gateway_settings: Settings, upstream: ScriptedUpstream, store: Store, tmp_path: Path):
    """The step has answered (the upstream holds the request it rendered) and its writes are
    held back (a transaction locks the items table against writes); the worker is killed
    then. A new worker stores the turns, once, before anything else happens to the session:
    the conversation's next answer and its turns are all there, each once, in order."""
    settings = gateway_settings.model_copy(update={"task_queue": f"gw-behind-{uuid.uuid4().hex[:6]}"})
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = start_api(settings, upstream, port)
    worker = WorkerProcess.start(settings, tmp_path / "worker-1.log")
    replacement: WorkerProcess | None = None
    name = f"behind-{uuid.uuid4().hex[:8]}"
    held = threading.Event()
    upstream.script(name, Scripted(calls=[("call_1", "read_file", {"path": "setup.py"})]),
                    Scripted(text="It installs the package.", hold=held))
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
            lock = locker.transaction()
            await lock.start()
            await locker.execute("LOCK TABLE items IN SHARE MODE")  # reads go on, writes wait
            second = asyncio.create_task(http.post("/gateway/openai/v1/chat/completions",
                                                   json={"model": name, "messages": messages, "tools": TOOLS}))
            deadline = time.monotonic() + 60
            while len(upstream.of(name)) < 2:  # the step has answered: its request reached the upstream
                assert time.monotonic() < deadline and not second.done(), "the second call never reached the upstream"
                await asyncio.sleep(0.05)
            assert upstream.of(name)[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": output}
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
