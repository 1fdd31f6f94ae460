"""The API process killed in the middle of an append or a message: the client's retry with
the same Idempotency-Key stores everything exactly once (its workflow update is deduplicated
by Temporal and by the session's record of keys, the content it stored first is keyed by the
same id), and a message makes one task."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import httpx

from tests.api.stack import CHECKOUT_PYTHONPATH, UNREACHABLE_MODEL_URL
from tests.integration.support import REPO
from worker.local.stack import free_port

TOKEN = "crash-token-0123456789"


def _start_api(api_settings, port: int) -> subprocess.Popen:
    env = {**os.environ, "TEMPORAL_ADDRESS": api_settings.temporal_address,
           "DATABASE_URL": api_settings.database_url or "", "LANES_TASK_QUEUE": api_settings.task_queue,
           "LANES_DATA_DIR": str(api_settings.data_dir), "LANES_API_PORT": str(port),
           "LANES_API_TOKENS": f"crash-tenant:{TOKEN}", "PYTHONPATH": CHECKOUT_PYTHONPATH,
           "OPENAI_BASE_URL": UNREACHABLE_MODEL_URL}
    return subprocess.Popen([sys.executable, "-m", "worker.api.main", "--log-level", "warning"], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


async def _ready(base: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        while True:
            try:
                if (await http.get("/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the API did not become ready"
            await asyncio.sleep(0.2)


async def test_an_append_cut_by_an_api_kill_is_stored_once_when_retried(api_stack, api_settings, store):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = _start_api(api_settings, port)
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": f"crash-{uuid.uuid4().hex}"}
    big = "the whole log line\n" * 5_000  # above the inline limit: the API stores it before the update
    body = {"items": [{"kind": "user", "text": big}, {"kind": "note", "text": "keep the tests green"}]}
    try:
        await _ready(base, api)
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
            sid = (await http.post("/v1/sessions", json={"mode": "external", "system_prompt": "You keep notes."})
                   ).json()["session_id"]
            sending = asyncio.create_task(http.post(f"/v1/sessions/{sid}/items", json=body))
            deadline = time.monotonic() + 30
            while await store.count_observations(sid) == 0:  # the content is stored: the update comes next
                assert time.monotonic() < deadline and not sending.done()
                await asyncio.sleep(0.005)
            os.killpg(api.pid, signal.SIGKILL)
            try:
                await sending
            except httpx.HTTPError:
                pass  # the connection died with the API (or the answer made it out first)
        api.wait(10)
        api = _start_api(api_settings, port)
        await _ready(base, api)
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
            retried = await http.post(f"/v1/sessions/{sid}/items", json=body)
            assert retried.status_code == 200, retried.text
            again = await http.post(f"/v1/sessions/{sid}/items", json=body)
            assert again.json()["item_ids"] == retried.json()["item_ids"]
        rows = await store.list_items(sid, lane="main", limit=100)
        assert [r.kind for r in rows] == ["system", "user", "note"]  # once each
        assert [r.item_id for r in rows[1:]] == retried.json()["item_ids"]
        assert await store.count_observations(sid) == 1
    finally:
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)


async def test_a_message_cut_by_an_api_kill_makes_one_task_when_retried(api_stack, api_settings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = _start_api(api_settings, port)
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": f"msg-{uuid.uuid4().hex}"}
    try:
        await _ready(base, api)
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
            sid = (await http.post("/v1/sessions", json={"mode": "hosted"})).json()["session_id"]
            # ?wait holds the answer while the task runs (its model is unreachable: it keeps retrying)
            sending = asyncio.create_task(http.post(f"/v1/sessions/{sid}/messages?wait=30", json={"text": "go"}))
            deadline = time.monotonic() + 30
            while not (await http.get(f"/v1/sessions/{sid}/status")).json()["tasks"]:  # accepted: now kill
                assert time.monotonic() < deadline and not sending.done()
                await asyncio.sleep(0.02)
            os.killpg(api.pid, signal.SIGKILL)
            try:
                await sending
                raise AssertionError("the answer came out before the kill")
            except httpx.HTTPError:
                pass  # the connection died with the API: the client cannot know the outcome
        api.wait(10)
        api = _start_api(api_settings, port)
        await _ready(base, api)
        async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
            retried = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "go"})
            assert retried.status_code == 202 and retried.json()["repeated"], retried.text
            tasks = (await http.get(f"/v1/sessions/{sid}/status")).json()["tasks"]
            assert [t["task_id"] for t in tasks] == [retried.json()["task_id"]]  # one task, not two
            await http.post(f"/v1/sessions/{sid}/cancel", json={})
    finally:
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)
