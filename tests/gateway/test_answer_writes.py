"""The gateway answers once the answer is durable in its own table and stores the answer's
items in the session after: what the agent was answered ends up in the session exactly once,
with its usage counted once, whether the background write ran, was lost with its process, or
ran at the same time as the conversation's next call; and a read through the API after a call
sees the answer."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from temporalio.api.enums.v1 import EventType

from tests.api.stack import TOKENS, LanesServer
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import model, stored
from tests.gateway.upstream import Scripted, ScriptedUpstream
from worker.api.gateway.answer_writes import AnswerWrites
from worker.api.gateway.timing import parse_header
from worker.settings import Settings
from worker.worker import connect

pytestmark = pytest.mark.timeout(180)
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class LostWrites(AnswerWrites):
    """Every background write lost, as if the API process died right after answering."""

    def start(self, key, write, delay: float = 0.0) -> None:
        write().close()  # the coroutine never runs


def _server(gateway_settings: Settings, sweep_seconds: float) -> Iterator[LanesServer]:
    settings = gateway_settings.model_copy(update={"task_queue": f"gw-writes-{uuid.uuid4().hex[:6]}",
                                                   "gateway_sweep_seconds": sweep_seconds})
    started = LanesServer(settings, TOKENS).start()
    yield started
    started.stop()


@pytest.fixture
def server(gateway_settings: Settings) -> Iterator[LanesServer]:
    """An API of its own (with its worker), whose answer writes a test may replace; its sweep
    waits an hour (these tests show what the conversation's next call does)."""
    yield from _server(gateway_settings, 3600)


@pytest.fixture
def plain(gateway_settings: Settings) -> Iterator[LanesServer]:
    """As ``server``, without continued requests (every call takes its step first)."""
    yield from _server(gateway_settings.model_copy(update={"gateway_continue": False}), 3600)


@pytest.fixture
def sweeping(gateway_settings: Settings) -> Iterator[LanesServer]:
    """An API whose sweep stores answers left unstored for half a second."""
    yield from _server(gateway_settings, 0.5)


def _until(check, seconds: float = 30):
    """``check()``'s first truthy value, asked every 0.2 s for up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
    return value


def _chat(base: str, name: str, messages: list[dict[str, Any]]) -> httpx.Response:
    response = httpx.post(f"{base}/gateway/openai/v1/chat/completions", json={"model": name, "messages": messages},
                          headers=HEADERS, timeout=60)
    assert response.status_code == 200, response.text
    return response


def _usage_calls(base: str, sid: str) -> int:
    status = httpx.get(f"{base}/v1/sessions/{sid}/status", headers=HEADERS, timeout=30).json()
    return status["usage"]["calls"]


def test_an_answer_whose_write_was_lost_is_stored_once_by_the_next_call(server: LanesServer,
                                                                        upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(text="first answer", usage=(120, 20, 7)), Scripted(text="second answer"),
                    Scripted(text="third answer"))
    server.app.state.answer_writes = LostWrites()
    base = server.base_url
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You log."},
                                      {"role": "user", "content": f"one {uuid.uuid4().hex}"}]
    first = _chat(base, name, messages)
    sid = first.headers["x-lanes-session"]
    assert [i["kind"] for i in stored(base, sid)] == ["system", "user"]  # the agent has it; the session not yet
    for n, text in enumerate(("second answer", "third answer")):
        messages += [{"role": "assistant", "content": ["first answer", "second answer"][n]},
                     {"role": "user", "content": f"turn {n + 2}"}]
        answered = _chat(base, name, messages)
        assert answered.headers["x-lanes-session"] == sid
        assert answered.json()["choices"][0]["message"]["content"] == text
    # each call stored the answer before it (from its row), once, in order; the last is still pending
    assert [(i["kind"], i["text"]) for i in stored(base, sid)] == [
        ("system", "You log."), ("user", messages[1]["content"]), ("assistant", "first answer"),
        ("user", "turn 2"), ("assistant", "second answer"), ("user", "turn 3")]
    assert _usage_calls(base, sid) == 2  # the two stored answers' usage, once each
    server.app.state.answer_writes = AnswerWrites()  # the API restarted: a retry of the last call
    again = _chat(base, name, messages)
    assert again.json()["choices"][0]["message"]["content"] == "third answer"  # from the row, not upstream
    assert [i["text"] for i in stored(base, sid)][-2:] == ["turn 3", "third answer"]  # read after: it is there
    assert len(upstream.of(name)) == 3 and _usage_calls(base, sid) == 3


def test_the_next_call_arriving_during_the_write_stores_nothing_twice(server: LanesServer,
                                                                      upstream: ScriptedUpstream):
    """Many conversations at once, each sending its next call the moment it has an answer (its
    write still running): every session holds its conversation exactly, each answer once."""
    names = [model() for _ in range(12)]
    for name in names:
        upstream.script(name, *[Scripted(text=f"{name} answer {n}") for n in range(4)])

    async def converse(http: httpx.AsyncClient, name: str) -> tuple[str, list[dict[str, Any]]]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You log."},
                                          {"role": "user", "content": f"{name} turn 0"}]
        sid = ""
        for n in range(4):
            response = await http.post(f"{server.base_url}/gateway/openai/v1/chat/completions",
                                       json={"model": name, "messages": messages}, headers=HEADERS)
            assert response.status_code == 200, response.text
            sid = sid or response.headers["x-lanes-session"]
            assert response.headers["x-lanes-session"] == sid
            messages += [{"role": "assistant", "content": response.json()["choices"][0]["message"]["content"]},
                         {"role": "user", "content": f"{name} turn {n + 1}"}]
        return sid, messages[:-1]

    async def all_at_once() -> list[tuple[str, list[dict[str, Any]]]]:
        async with httpx.AsyncClient(timeout=120) as http:
            return await asyncio.gather(*(converse(http, name) for name in names))

    for sid, messages in asyncio.run(all_at_once()):
        items = stored(server.base_url, sid)
        assert [(i["kind"], i["text"]) for i in items] == [
            ("assistant" if m["role"] == "assistant" else m["role"], m["content"]) for m in messages]
        assert _usage_calls(server.base_url, sid) == 4


def test_a_session_ended_before_its_answer_was_stored_continues_in_a_new_one(server: LanesServer,
                                                                             upstream: ScriptedUpstream):
    """The answer's write was lost and the session was terminated before the next call: that
    call continues the whole conversation in a new session (the agent's copy of the answer in
    it), instead of failing on the answer it cannot store in the ended one."""
    name = model()
    upstream.script(name, Scripted(text="before the end"), Scripted(text="after the end"))
    server.app.state.answer_writes = LostWrites()
    base = server.base_url
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"ending {uuid.uuid4().hex}"}]
    first = _chat(base, name, messages)
    ended = first.headers["x-lanes-session"]
    cancelled = httpx.post(f"{base}/v1/sessions/{ended}/cancel", json={"action": "terminate"}, headers=HEADERS,
                           timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    messages += [{"role": "assistant", "content": "before the end"}, {"role": "user", "content": "still there?"}]
    later = _chat(base, name, messages)
    assert later.headers["x-lanes-session"] != ended
    assert later.json()["choices"][0]["message"]["content"] == "after the end"
    assert [i["text"] for i in stored(base, later.headers["x-lanes-session"])][:3] == [m["content"] for m in messages]


def test_a_last_answer_whose_write_was_lost_is_stored_by_the_sweep_once(sweeping: LanesServer,
                                                                        upstream: ScriptedUpstream):
    """A conversation's last answer has no next call to store it: when its process's write was
    lost, the sweep stores it from its row (the session then holds it once, its usage counted
    once), and the agent's retry of that call is answered from the row, storing nothing again."""
    name = model()
    upstream.script(name, Scripted(text="the final answer", usage=(90, 10, 5)))
    sweeping.app.state.answer_writes = LostWrites()  # the calls' writes; the sweep keeps its own
    base = sweeping.base_url
    messages = [{"role": "system", "content": "You finish."}, {"role": "user", "content": f"last {uuid.uuid4().hex}"}]
    first = _chat(base, name, messages)
    sid = first.headers["x-lanes-session"]
    _until(lambda: [i["kind"] for i in stored(base, sid)] == ["system", "user", "assistant"])
    assert [i["text"] for i in stored(base, sid)][-1] == "the final answer"
    assert _usage_calls(base, sid) == 1
    retried = _chat(base, name, messages)
    assert retried.json()["choices"][0]["message"]["content"] == "the final answer"
    time.sleep(1.5)  # sweeps come and go: none stores it again
    assert [i["text"] for i in stored(base, sid)] == ["You finish.", messages[1]["content"], "the final answer"]
    assert _usage_calls(base, sid) == 1 and len(upstream.of(name)) == 1


def test_the_sweep_leaves_an_answer_whose_session_ended_and_says_why(sweeping: LanesServer,
                                                                     gateway_settings: Settings,
                                                                     upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(text="too late"))
    sweeping.app.state.answer_writes = LostWrites()
    base = sweeping.base_url
    messages = [{"role": "user", "content": f"ending {uuid.uuid4().hex}"}]
    sid = _chat(base, name, messages).headers["x-lanes-session"]
    cancelled = httpx.post(f"{base}/v1/sessions/{sid}/cancel", json={"action": "terminate"}, headers=HEADERS,
                           timeout=30)
    assert cancelled.status_code == 200, cancelled.text

    async def why() -> str | None:
        connection = await asyncpg.connect(gateway_settings.database_url)
        try:
            return await connection.fetchval("SELECT unstorable FROM gateway_turns WHERE session_id = $1 "
                                             "AND answer IS NOT NULL", sid)
        finally:
            await connection.close()

    assert _until(lambda: asyncio.run(why())) in ("session_ended", "session_closed")
    assert [i["kind"] for i in stored(base, sid)] == ["user"]  # nothing appended to the ended session


async def _updates(settings: Settings, sid: str) -> list[str]:
    """The names of the updates the session's workflow accepted, in order (every run)."""
    client = await connect(settings)
    names: list[str] = []
    async for info in client.list_workflows(f'WorkflowId = "{sid}"'):
        async for event in client.get_workflow_handle(sid, run_id=info.run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                names.append(event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name)
    return names


def test_an_agent_that_calls_again_at_once_stores_each_answer_with_its_next_step(plain: LanesServer,
                                                                                 upstream: ScriptedUpstream):
    """An agent whose tools are quick calls again before the answer's write began: that call's
    step appends the answer (as its row holds it, with its usage) and the new turns in one
    workflow update. Each answer is in the session once, in order, counted once. (With
    continued requests the answer's write begins at once, for the plan it makes.)"""
    server = plain
    name = model()
    upstream.script(name, *[Scripted(text=f"answer {n}", usage=(100 + n, 0, 3)) for n in range(4)])
    base = server.base_url
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are quick."},
                                      {"role": "user", "content": f"go {uuid.uuid4().hex}"}]
    sid = ""
    for n in range(4):
        answered = _chat(base, name, messages)
        sid = sid or answered.headers["x-lanes-session"]
        messages += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": f"next {n}"}]
    steps = asyncio.run(_updates(server.settings, sid))
    assert steps == ["step"] * 4, steps  # the answers before the last went with the next call's step
    assert [(i["kind"], i["text"]) for i in stored(base, sid)] == [  # the read starts the last answer's write
        ("assistant" if m["role"] == "assistant" else m["role"], m["content"]) for m in messages[:-1]]
    assert asyncio.run(_updates(server.settings, sid)) == ["step"] * 4 + ["append_items"]
    assert _usage_calls(base, sid) == 4


def test_a_step_that_carried_the_answer_but_was_not_marked_stores_nothing_twice(server: LanesServer,
                                                                                gateway_settings: Settings,
                                                                                upstream: ScriptedUpstream):
    """The process died after the step that carried the previous answer, before it marked the
    rows stored: the next call (to any process) finds the answer and the turns unmarked, and
    appends none of them again (each item is known by its client id)."""
    name = model()
    upstream.script(name, *[Scripted(text=f"answer {n}", usage=(50, 0, 2)) for n in range(3)])
    base = server.base_url
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"carry {uuid.uuid4().hex}"}]
    sid = _chat(base, name, messages).headers["x-lanes-session"]
    messages += [{"role": "assistant", "content": "answer 0"}, {"role": "user", "content": "again"}]
    _chat(base, name, messages)  # its step carried answer 0

    async def unmark() -> int:
        connection = await asyncpg.connect(gateway_settings.database_url)
        try:
            status = await connection.execute("UPDATE gateway_turns SET stored = false WHERE session_id = $1 "
                                              "AND position IN (1, 2)", sid)
            return int(status.split()[-1])
        finally:
            await connection.close()

    assert asyncio.run(unmark()) == 2
    server.app.state.answer_writes = AnswerWrites()  # a restarted process: no write of its own
    messages += [{"role": "assistant", "content": "answer 1"}, {"role": "user", "content": "and again"}]
    assert _chat(base, name, messages).json()["choices"][0]["message"]["content"] == "answer 2"
    assert [(i["kind"], i["text"]) for i in stored(base, sid)] == [
        (m["role"], m["content"]) for m in messages] + [("assistant", "answer 2")]
    assert _usage_calls(base, sid) == 3


class LostAfter(AnswerWrites):
    """The first ``kept`` background writes run; every later one is lost (the process died)."""

    def __init__(self, kept: int) -> None:
        super().__init__()
        self.kept = kept

    def start(self, key, write, delay: float = 0.0) -> None:
        if self.kept <= 0:
            write().close()
            return
        self.kept -= 1
        super().start(key, write, delay)


class LateAfter(AnswerWrites):
    """The first ``kept`` background writes run as usual; later ones wait ``delay`` before they
    begin (the next call may take them), or, ``slow``, begin at once and take that long."""

    def __init__(self, kept: int, delay: float = 30.0, slow: bool = False) -> None:
        super().__init__()
        self.kept, self.delay, self.slow = kept, delay, slow

    def start(self, key, write, delay: float = 0.0) -> None:
        self.kept -= 1
        if self.kept >= 0:
            super().start(key, write, delay)
        elif self.slow:
            async def slow_write() -> None:
                await asyncio.sleep(self.delay)
                await write()
            super().start(key, slow_write, 0.0)
        else:
            super().start(key, write, self.delay)


def _continued_conversation(base: str, name: str, upstream: ScriptedUpstream,
                            between: list[dict[str, Any]] | None = None) -> tuple[str, list[dict[str, Any]], bool]:
    """An answer calling a tool; the tool's output, which continues the plan (no step before the
    upstream call); a text answer; then the user's next message (after ``between``), at once."""
    upstream.script(name, Scripted(calls=[("call_1", "read_file", {"path": "a.py"})], usage=(150, 0, 9)),
                    Scripted(text="a.py prints a.", usage=(170, 0, 5)), Scripted(text="You are welcome."))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You read code."},
                                      {"role": "user", "content": f"What does a.py do? {uuid.uuid4().hex}"}]
    first = _chat(base, name, messages)
    sid = first.headers["x-lanes-session"]
    messages += [first.json()["choices"][0]["message"],
                 {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"}]
    time.sleep(0.3)  # the agent runs its tool: the answer's write ends meanwhile
    second = _chat(base, name, messages)
    assert "step" not in parse_header(second.headers["server-timing"])  # continued
    messages += [second.json()["choices"][0]["message"], *(between or []), {"role": "user", "content": "Thanks."}]
    third = _chat(base, name, messages)
    assert third.headers["x-lanes-session"] == sid
    return sid, messages, "step" not in parse_header(third.headers["server-timing"])


def _as_stored(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [("tool_result" if m["role"] == "tool" else m["role"], m["content"] or "") for m in messages]


def test_a_continued_calls_answer_carried_by_the_next_call_stores_its_turns_once(server: LanesServer,
                                                                                upstream: ScriptedUpstream):
    """The continued call's answer row holds its tool output and its answer; the next call
    comes before that row's write began, with turns that cannot continue a plan (the agent's
    own note as an assistant turn), so its step carries them: each once, in order."""
    server.app.state.answer_writes = LateAfter(1)  # the tool-calling answer's write runs: its plan is kept
    sid, messages, continued = _continued_conversation(server.base_url, name := model(), upstream,
                                                       between=[{"role": "assistant", "content": "(noted)"}])
    assert not continued
    assert [(i["kind"], i["text"]) for i in stored(server.base_url, sid)] == [*_as_stored(messages), (
        "assistant", "You are welcome.")]
    assert asyncio.run(_updates(server.settings, sid)) == ["step", "step", "step", "step"]  # open, answer, carry, last
    assert _usage_calls(server.base_url, sid) == 3 and len(upstream.of(name)) == 3


def test_the_next_call_waits_for_a_continued_answers_late_write_and_continues(server: LanesServer,
                                                                           upstream: ScriptedUpstream):
    """The continued call's answer row is still being written when the user's next message
    comes: that call waits for the write (it makes the plan), and continues the plan."""
    server.app.state.answer_writes = LateAfter(1, delay=1.0, slow=True)
    sid, messages, continued = _continued_conversation(server.base_url, name := model(), upstream)
    assert continued
    assert [(i["kind"], i["text"]) for i in stored(server.base_url, sid)] == [*_as_stored(messages), (
        "assistant", "You are welcome.")]
    assert asyncio.run(_updates(server.settings, sid)) == ["step"] * 4  # open, then each answer with its turns
    assert _usage_calls(server.base_url, sid) == 3 and len(upstream.of(name)) == 3


def test_a_continued_calls_answer_whose_write_was_lost_is_stored_once_by_the_next_call(
        server: LanesServer, upstream: ScriptedUpstream):
    """The process died before the continued call's answer was stored (its own turns with it):
    the next call stores them from the row, once, with the usage, then its own turn."""
    server.app.state.answer_writes = LostAfter(1)  # the tool-calling answer's write runs: its plan is kept
    sid, messages, continued = _continued_conversation(server.base_url, name := model(), upstream)
    assert not continued  # no plan: the process that would have written it is gone
    assert [(i["kind"], i["text"]) for i in stored(server.base_url, sid)] == _as_stored(messages)
    assert _usage_calls(server.base_url, sid) == 2 and len(upstream.of(name)) == 3
