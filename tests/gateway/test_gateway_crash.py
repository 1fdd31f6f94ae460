"""The API process killed in the middle of a gateway call (the new turn stored, the upstream
still answering): the agent's retry of the same call, to a restarted API, continues the same
session, stores the turn once and the answer once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable

import httpx

from tests.api.stack import CHECKOUT_PYTHONPATH
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.upstream import Scripted, ScriptedUpstream
from tests.integration.support import REPO
from worker.local.stack import free_port
from worker.settings import Settings


def start_api(settings: Settings, upstream: ScriptedUpstream, port: int, sweep_seconds: float = 3600,
              env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, **(env_extra or {}),
           "TEMPORAL_ADDRESS": settings.temporal_address, "DATABASE_URL": settings.database_url or "",
           "LANES_TASK_QUEUE": settings.task_queue, "LANES_DATA_DIR": str(settings.data_dir),
           "LANES_API_PORT": str(port), "LANES_API_TOKENS": f"tenant-a:{TOKEN}", "PYTHONPATH": CHECKOUT_PYTHONPATH,
           "LANES_GATEWAY_OPENAI_BASE_URL": f"{upstream.root}/v1", "LANES_GATEWAY_OPENAI_API_KEY": "sk-crash",
           "LANES_GATEWAY_SWEEP_SECONDS": str(sweep_seconds)}
    return subprocess.Popen([sys.executable, "-m", "worker.api.main", "--log-level", "warning"], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def ready(base: str, proc: subprocess.Popen, path: str = "/readyz", seconds: float = 60,
          why: Callable[[], str] = lambda: "the API did not become ready") -> None:
    """Wait until ``proc`` answers ``path`` with 200 (it must not exit meanwhile)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{base}{path}", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, why()
        time.sleep(0.2)


def cut_and_restarted(settings: Settings, upstream: ScriptedUpstream, port: int, body: dict, headers: dict,
                      cut_when: Callable[[], bool], moment: str,
                      after_kill: Callable[[], None] = lambda: None) -> subprocess.Popen:
    """An API process on ``port`` sent ``body``, SIGKILLed as soon as ``cut_when()`` holds
    (``moment`` names it, for a failure); ``after_kill`` runs then. Returns a restarted API on
    the same port, ready (the caller stops it)."""
    base = f"http://127.0.0.1:{port}"
    api = start_api(settings, upstream, port)
    try:
        ready(base, api)
        sending = threading.Thread(target=lambda: _send_ignoring_errors(base, body, headers), daemon=True)
        sending.start()
        deadline = time.monotonic() + 60
        while not cut_when():
            assert time.monotonic() < deadline, f"{moment} never came"
            time.sleep(0.02)
    finally:
        os.killpg(api.pid, signal.SIGKILL)
        api.wait(10)
        after_kill()
    sending.join(30)
    api = start_api(settings, upstream, port)
    try:
        ready(base, api)
    except BaseException:
        os.killpg(api.pid, signal.SIGKILL)
        raise
    return api


def test_a_call_cut_by_an_api_kill_is_stored_once_when_retried(gateway: str, gateway_settings: Settings,
                                                               upstream: ScriptedUpstream):
    name = f"crash-{uuid.uuid4().hex[:8]}"
    held = threading.Event()
    upstream.script(name, Scripted(text="first, never delivered", hold=held), Scripted(text="the answer"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    body = {"model": name, "messages": [{"role": "system", "content": "You survive crashes."},
                                        {"role": "user", "content": f"question {uuid.uuid4().hex}"}]}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    api = None
    try:
        # the turn is stored and the upstream is answering: kill the API
        api = cut_and_restarted(gateway_settings, upstream, port, body, headers, lambda: bool(upstream.of(name)),
                                "the call reaching the upstream", after_kill=held.set)
        retry = httpx.post(f"{base}/gateway/openai/v1/chat/completions", json=body, headers=headers, timeout=60)
        assert retry.status_code == 200, retry.text
        assert retry.json()["choices"][0]["message"]["content"] == "the answer"
        items = stored(base, retry.headers["x-lanes-session"])  # the API that answered: its answer write is waited for
        assert [(i["kind"], i["text"]) for i in items] == [
            ("system", "You survive crashes."), ("user", body["messages"][1]["content"]), ("assistant", "the answer")]
        assert len(upstream.of(name)) == 2  # at least once upstream: the cut call was sent again
    finally:
        held.set()
        if api is not None and api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)


def answered_then_killed(settings: Settings, upstream: ScriptedUpstream, port: int, body: dict) -> httpx.Response:
    """One gateway call to an API process of its own, SIGKILLed the moment the answer is in
    (the answer's background write waiting, running or done)."""
    api = start_api(settings, upstream, port)
    try:
        ready(f"http://127.0.0.1:{port}", api)
        return httpx.post(f"http://127.0.0.1:{port}/gateway/openai/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    finally:
        os.killpg(api.pid, signal.SIGKILL)
        api.wait(10)


def _send_ignoring_errors(base: str, body: dict, headers: dict) -> None:
    try:
        httpx.post(f"{base}/gateway/openai/v1/chat/completions", json=body, headers=headers, timeout=60)
    except httpx.HTTPError:
        pass  # the API was killed under it


def test_an_api_killed_right_after_answering_loses_nothing(gateway: str, gateway_settings: Settings,
                                                           upstream: ScriptedUpstream):
    """The answer is durable before the agent gets it; its items reach the session in the
    background. The API is killed the moment the agent has the answer (its write running, or
    not begun, or done): the next call, to a restarted API, finds the session holding the
    conversation exactly, each answer once, its usage counted once."""
    name = f"answered-{uuid.uuid4().hex[:8]}"
    upstream.script(name, Scripted(text="first answer"), Scripted(text="second answer"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    messages = [{"role": "system", "content": "You survive crashes."},
                {"role": "user", "content": f"question {uuid.uuid4().hex}"}]
    first = answered_then_killed(gateway_settings, upstream, port, {"model": name, "messages": messages})
    api: subprocess.Popen | None = None
    try:
        assert first.status_code == 200, first.text
        assert first.json()["choices"][0]["message"]["content"] == "first answer"
        api = start_api(gateway_settings, upstream, port)
        ready(base, api)
        messages += [{"role": "assistant", "content": "first answer"}, {"role": "user", "content": "and then?"}]
        second = httpx.post(f"{base}/gateway/openai/v1/chat/completions", json={"model": name, "messages": messages},
                            headers=headers, timeout=60)
        assert second.status_code == 200, second.text
        sid = second.headers["x-lanes-session"]
        assert sid == first.headers["x-lanes-session"]
        items = stored(base, sid)
        assert [(i["kind"], i["text"]) for i in items] == [
            ("system", "You survive crashes."), ("user", messages[1]["content"]), ("assistant", "first answer"),
            ("user", "and then?"), ("assistant", "second answer")]
        status = httpx.get(f"{base}/v1/sessions/{sid}/status", headers=headers, timeout=30).json()
        assert status["usage"]["calls"] == 2 and len(upstream.of(name)) == 2
    finally:
        if api is not None and api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)


def test_the_last_answer_of_an_api_killed_right_after_answering_reaches_the_session(
        gateway: str, gateway_settings: Settings, upstream: ScriptedUpstream):
    """The conversation ends with that answer (no next call will store it): the restarted API's
    sweep does, once, whether the killed process's write was lost, cut or done."""
    name = f"last-{uuid.uuid4().hex[:8]}"
    upstream.script(name, Scripted(text="the last answer"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    messages = [{"role": "system", "content": "You end."}, {"role": "user", "content": f"final {uuid.uuid4().hex}"}]
    answered = answered_then_killed(gateway_settings, upstream, port, {"model": name, "messages": messages})
    api: subprocess.Popen | None = None
    try:
        assert answered.status_code == 200, answered.text
        sid = answered.headers["x-lanes-session"]
        api = start_api(gateway_settings, upstream, port, sweep_seconds=1)
        ready(base, api)
        deadline = time.monotonic() + 60
        while len(items := stored(base, sid)) < 3:
            assert time.monotonic() < deadline, f"the answer never reached the session: {items}"
            time.sleep(0.3)
        time.sleep(2.5)  # more sweeps: none stores it twice
        assert [(i["kind"], i["text"]) for i in stored(base, sid)] == [
            ("system", "You end."), ("user", messages[1]["content"]), ("assistant", "the last answer")]
        status = httpx.get(f"{base}/v1/sessions/{sid}/status", headers=headers, timeout=30).json()
        assert status["usage"]["calls"] == 1 and len(upstream.of(name)) == 1
    finally:
        if api is not None and api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)
