"""worker.replay.model_server driven through the real openai client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from recordings import Trajectory, load_trajectory, synthetic_trajectory
from worker.replay.model_server import (
    REPLAY_FINISHED_TEXT,
    REQUEST_LOG_SIZE,
    ReplayModelServer,
    ReplayState,
    estimate_tokens,
    replay_model_server,
)

from .conftest import CLAUDE, DEEPSEEK, GEMINI, require_data

REPO = Path(__file__).resolve().parents[2]
GEMINI_FILE = GEMINI / "astropy__astropy-13033.traj.json.gz"
DEEPSEEK_FILE = DEEPSEEK / "deepseek_chat_dev" / "pvlib__pvlib-python-1072.traj.json.gz"
CLAUDE_FILE = CLAUDE / "subagent.jsonl.gz"
SYNTH = synthetic_trajectory(12, seed=3)


@pytest.fixture(scope="module")
def trajs() -> dict[str, Trajectory]:
    require_data()
    loaded = [load_trajectory(p) for p in (GEMINI_FILE, DEEPSEEK_FILE, CLAUDE_FILE)] + [SYNTH]
    return {t.source_format: t for t in loaded}


@pytest.fixture(scope="module")
def module_server(trajs: dict[str, Trajectory]) -> Iterator[ReplayModelServer]:
    # real files by path (folder + file), the synthetic one as an object
    server = ReplayModelServer([CLAUDE, GEMINI_FILE, DEEPSEEK_FILE, SYNTH]).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(module_server: ReplayModelServer) -> Iterator[ReplayModelServer]:
    module_server.set_faults("none")
    yield module_server
    module_server.set_faults("none")


def client(server: ReplayModelServer, **kw: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0, **kw)


def hdr(traj: Trajectory | str, turn: int | str) -> dict[str, str]:
    tid = traj if isinstance(traj, str) else traj.id
    return {"X-Lanes-Trajectory": tid, "X-Lanes-Turn": str(turn)}


MSG = [{"role": "user", "content": "hi"}]


async def replay_whole(server: ReplayModelServer, traj: Trajectory) -> list[dict[str, Any]]:
    """Drive the recording like an agent loop would and check every answer."""
    c = client(server)
    messages: list[dict[str, Any]] = ([{"role": "system", "content": traj.system}]
                                      if traj.system else [])
    messages.append({"role": "user", "content": traj.task})
    prompt_tokens: list[int] = []
    for k in range(len(traj.turns) + 1):
        reply = await c.chat.completions.create(model="replay", messages=messages,
                                                extra_headers=hdr(traj, k))
        choice = reply.choices[0]
        prompt_tokens.append(reply.usage.prompt_tokens)
        assert reply.usage.completion_tokens > 0
        extra = reply.model_extra["x_lanes"]
        assert extra["turn"] == k and extra["turns"] == len(traj.turns)
        if k == len(traj.turns):
            assert choice.message.tool_calls is None and choice.finish_reason == "stop"
            assert choice.message.content == REPLAY_FINISHED_TEXT and extra["finished"]
            break
        turn = traj.turns[k]
        got = [(t.id, t.type, t.function.name, t.function.arguments)
               for t in choice.message.tool_calls or []]
        assert got == [(t.id, "function", t.name, t.arguments) for t in turn.tool_calls]
        assert choice.finish_reason == ("tool_calls" if turn.tool_calls else "stop")
        assert (choice.message.content or "") == turn.assistant_text
        assert extra["user_after"] == turn.user_after
        messages.append(choice.message.model_dump(exclude_none=True))
        for r in turn.results:
            messages.append({"role": "tool", "tool_call_id": r.tool_call_id, "content": r.output}
                            if r.render_role == "tool" else {"role": "user", "content": r.output})
        messages += [{"role": "user", "content": u} for u in turn.user_after]
    assert prompt_tokens == sorted(prompt_tokens)  # the naive prompt only grows
    await c.close()
    return messages


@pytest.mark.parametrize("fmt", ["mini-swe-agent-1", "mini-swe-agent-1.1", "claude-code",
                                 "synthetic"])
async def test_replays_recorded_turns_in_order(server: ReplayModelServer,
                                               trajs: dict[str, Trajectory], fmt: str) -> None:
    traj = trajs[fmt]
    server.state.clear_requests()
    messages = await replay_whole(server, traj)
    log = server.requests()
    assert [int(r["turn"]) for r in log] == list(range(len(traj.turns) + 1))
    assert {r["trajectory"] for r in log} == {traj.id}
    assert log[-1]["body"]["messages"] == messages  # the exact request body is recorded


async def test_text_protocol_answers_carry_the_bash_block_and_a_tool_call(
        server: ReplayModelServer, trajs: dict[str, Trajectory]) -> None:
    traj = trajs["mini-swe-agent-1"]
    reply = await client(server).chat.completions.create(model="replay", messages=MSG,
                                                         extra_headers=hdr(traj, 0))
    msg = reply.choices[0].message
    assert "```bash\nls -R astropy/timeseries\n```" in msg.content
    assert json.loads(msg.tool_calls[0].function.arguments) == {"command": "ls -R astropy/timeseries"}
    assert msg.tool_calls[0].id == "call-0"


async def test_suffix_id_and_far_turns(server: ReplayModelServer,
                                       trajs: dict[str, Trajectory]) -> None:
    c = client(server)
    reply = await c.chat.completions.create(model="replay", messages=MSG,
                                            extra_headers=hdr("astropy__astropy-13033.traj", 1))
    assert reply.choices[0].message.tool_calls[0].id == "call-1"
    reply = await c.chat.completions.create(model="replay", messages=MSG,
                                            extra_headers=hdr(SYNTH, 10_000))
    assert reply.choices[0].message.content == REPLAY_FINISHED_TEXT


async def test_models_endpoint(server: ReplayModelServer) -> None:
    models = await client(server).models.list()
    assert [m.id for m in models.data] == ["replay"]


@pytest.mark.parametrize(
    ("headers", "needle"),
    [
        ({}, "Missing header(s) X-Lanes-Trajectory, X-Lanes-Turn"),
        ({"X-Lanes-Trajectory": SYNTH.id}, "Missing header(s) X-Lanes-Turn"),
        ({"X-Lanes-Turn": "0"}, "Missing header(s) X-Lanes-Trajectory"),
        ({"X-Lanes-Trajectory": "no/such", "X-Lanes-Turn": "0"}, "Unknown trajectory 'no/such'"),
        ({"X-Lanes-Trajectory": SYNTH.id, "X-Lanes-Turn": "-1"}, "Invalid X-Lanes-Turn"),
        ({"X-Lanes-Trajectory": SYNTH.id, "X-Lanes-Turn": "two"}, "Invalid X-Lanes-Turn"),
    ],
)
async def test_bad_headers_are_400(server: ReplayModelServer, headers: dict[str, str],
                                   needle: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await client(server).chat.completions.create(model="replay", messages=MSG,
                                                     extra_headers=headers)
    assert info.value.status_code == 400 and needle in info.value.message


async def test_streaming_is_rejected(server: ReplayModelServer) -> None:
    with pytest.raises(openai.BadRequestError, match="does not support streaming"):
        await client(server).chat.completions.create(model="replay", messages=MSG, stream=True,
                                                     extra_headers=hdr(SYNTH, 0))


# ----------------------------------------------------------------- faults


async def test_fault_http_500_then_recovers(server: ReplayModelServer) -> None:
    server.set_faults("http_500", count=2)
    c = client(server)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError) as info:
            await c.chat.completions.create(model="replay", messages=MSG, extra_headers=hdr(SYNTH, 0))
        assert info.value.status_code == 500
    reply = await c.chat.completions.create(model="replay", messages=MSG, extra_headers=hdr(SYNTH, 0))
    assert reply.choices[0].message.tool_calls


async def test_fault_http_429_with_retry_after(server: ReplayModelServer) -> None:
    server.set_faults("http_429", count=1, retry_after=7)
    with pytest.raises(openai.RateLimitError) as info:
        await client(server).chat.completions.create(model="replay", messages=MSG,
                                                     extra_headers=hdr(SYNTH, 0))
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.code == "rate_limit_exceeded"


async def test_fault_context_length(server: ReplayModelServer) -> None:
    big = [{"role": "user", "content": "x" * 4_000}]
    limit = estimate_tokens({"messages": big, "tools": None}) - 1
    server.set_faults("context_length", count=-1, max_prompt_tokens=limit)  # until reset
    c = client(server)
    for _ in range(2):
        with pytest.raises(openai.BadRequestError) as info:
            await c.chat.completions.create(model="replay", messages=big,
                                            extra_headers=hdr(SYNTH, 0))
        assert info.value.code == "context_length_exceeded"
        assert info.value.type == "invalid_request_error"
        assert "maximum context length is" in info.value.message
    ok = await c.chat.completions.create(model="replay", messages=MSG, extra_headers=hdr(SYNTH, 0))
    assert ok.choices[0].message.tool_calls  # small prompts still pass
    assert server.state.faults()["remaining"] == -1


async def test_fault_timeout(server: ReplayModelServer) -> None:
    server.set_faults("timeout", count=1, delay_seconds=5)
    c = client(server, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        await c.chat.completions.create(model="replay", messages=MSG, extra_headers=hdr(SYNTH, 0))
    assert time.monotonic() - started < 2
    reply = await c.chat.completions.create(model="replay", messages=MSG, extra_headers=hdr(SYNTH, 0))
    assert reply.choices[0].message.tool_calls


async def test_fault_garbage(server: ReplayModelServer) -> None:
    server.set_faults("garbage", count=1)
    # The openai client does not wrap an unparseable 200 body: it raises json's ValueError.
    with pytest.raises(ValueError):
        await client(server).chat.completions.create(model="replay", messages=MSG,
                                                     extra_headers=hdr(SYNTH, 0))


async def test_admin_endpoints_over_http(server: ReplayModelServer) -> None:
    async with httpx.AsyncClient(base_url=server.root_url) as http:
        r = await http.post("/admin/faults", json={"mode": "http_500", "count": 1})
        assert r.status_code == 200 and r.json()["remaining"] == 1
        r = await http.post("/admin/faults", json={"mode": "bogus"})
        assert r.status_code == 400 and "Invalid fault config" in r.json()["error"]["message"]
        with pytest.raises(openai.InternalServerError):
            await client(server).chat.completions.create(model="replay", messages=MSG,
                                                         extra_headers=hdr(SYNTH, 0))
        assert (await http.get("/admin/faults")).json()["remaining"] == 0
        await http.delete("/admin/requests")
        await client(server).chat.completions.create(model="replay", messages=MSG,
                                                     extra_headers=hdr(SYNTH, 3))
        (entry,) = (await http.get("/admin/requests")).json()["requests"]
        assert entry["turn"] == "3" and entry["body"]["messages"] == MSG


def test_request_log_is_a_bounded_ring() -> None:
    state = ReplayState([])
    for i in range(REQUEST_LOG_SIZE + 50):
        state.record({}, {"i": i})
    log = state.requests()
    assert len(log) == REQUEST_LOG_SIZE
    assert log[0]["body"] == {"i": 50} and log[-1]["seq"] == REQUEST_LOG_SIZE + 50


async def test_async_context_manager() -> None:
    traj = synthetic_trajectory(3, seed=1)
    async with replay_model_server([traj]) as srv:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
        reply = await client(srv).chat.completions.create(model="replay", messages=MSG,
                                                          extra_headers=hdr(traj, 2))
        assert reply.choices[0].finish_reason == "stop"
    with pytest.raises(openai.APIConnectionError):
        await client(srv, timeout=1).models.list()


def test_command_line_entry_point() -> None:
    require_data()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.replay.model_server", "--port", str(port),
         "--trajectory", str(CLAUDE), "--trajectory", str(GEMINI_FILE)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                               json={"model": "replay", "messages": MSG},
                               headers=hdr("claude-code/short", 0), timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.1)
        assert r.status_code == 200
        assert [t["function"]["name"] for t in r.json()["choices"][0]["message"]["tool_calls"]] \
            == ["Bash", "Glob"]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
