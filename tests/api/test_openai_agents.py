"""The OpenAI Agents SDK on a Lanes session, end to end: a real ``Runner`` with a function
tool, a scripted OpenAI-compatible model over HTTP (the real ``openai`` client), and the
real stack (Temporal, PostgreSQL, worker, API)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

agents = pytest.importorskip("agents")

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from activities.tokens import count_message_tokens, count_tool_definitions  # noqa: E402
from lanes_client.integrations.openai_agents import LanesSession  # noqa: E402
from tests.threaded_server import ThreadedServer  # noqa: E402

PART_CHARS = 6_000
CALLS = 14
BUDGET = 4_000


def _part(n: int) -> str:
    return "".join(f"part {n} line {k}: {'x' * 50}\n" for k in range(PART_CHARS // 64))


class ScriptedAgentModel:
    """Chat Completions: for the current ``task``, ``CALLS`` reads of one part each, then an
    answer (counted by the server: compaction removes earlier turns from what it is sent)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.task = ""
        self.turn = 0
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            self.turn += 1
            if self.turn <= CALLS:
                n = self.turn + (100 if self.task.startswith("second") else 0)
                message = {"role": "assistant", "content": None, "reasoning_content": f"read part {n} next",
                           "tool_calls": [{"id": f"call-{n}", "type": "function",
                                           "function": {"name": "read_part", "arguments": json.dumps({"n": n})}}]}
            else:
                self.turn = 0
                message = {"role": "assistant", "content": f"Read {CALLS} parts for: {self.task}"}
            if body.get("stream"):  # Runner.run_streamed: the same answer as Chat Completions chunks
                return StreamingResponse(_chunks(f"r{len(self.requests)}", body["model"], message),
                                         media_type="text/event-stream")
            return {"id": f"r{len(self.requests)}", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

        self.http = ThreadedServer(app)


def _chunks(answer_id: str, model: str, message: dict) -> Iterator[bytes]:
    def chunk(delta: dict, finish: str | None = None) -> bytes:
        data = {"id": answer_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data)}\n\n".encode()
    yield chunk({"role": "assistant", "content": message.get("content") or ""})
    if message.get("reasoning_content"):
        yield chunk({"reasoning_content": message["reasoning_content"]})
    for n, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": n, "function": {"arguments": call["function"]["arguments"]}}]})
    yield chunk({}, "tool_calls" if message.get("tool_calls") else "stop")
    usage = {"id": answer_id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    yield f"data: {json.dumps(usage)}\n\n".encode()
    yield b"data: [DONE]\n\n"


@function_tool
def read_part(n: int) -> str:
    """Read one part of the document."""
    return _part(n)


@pytest.fixture
def scripted():
    set_tracing_disabled(True)
    model = ScriptedAgentModel()
    yield model
    model.http.stop()


def user_text(message: dict) -> str | None:
    """A user message's text, whether sent as a string or as text parts."""
    if message.get("role") != "user":
        return None
    content = message["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


async def run_agent(mode: str, agent: Agent, text: str, session: LanesSession) -> str:
    """One run as the SDK's ``Runner.run`` or ``Runner.run_streamed`` (its events read to the end)."""
    if mode == "run":
        done = await Runner.run(agent, text, session=session, run_config=session.run_config(), max_turns=CALLS + 5)
        return done.final_output
    streamed = Runner.run_streamed(agent, text, session=session, run_config=session.run_config(), max_turns=CALLS + 5)
    async for _ in streamed.stream_events():
        pass
    return streamed.final_output


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
async def test_a_long_run_stays_within_budget_and_the_session_keeps_every_item(client_a, scripted, mode):
    # a DeepSeek model: the SDK sends its reasoning back as reasoning_content when given it back
    model = OpenAIChatCompletionsModel(model="deepseek-chat",
                                       openai_client=AsyncOpenAI(base_url=scripted.http.base_url, api_key="test"))
    agent = Agent(name="reader", instructions="Read what you are asked to.", model=model, tools=[read_part])
    session = await LanesSession.create(client_a, agent=agent, budget_tokens=BUDGET)
    config = (await client_a.get_session(session.lanes_session_id)).config
    assert config["tool_definitions"] == 2  # read_part and the recall tool the session gave the agent
    assert config["model"] == "deepseek-chat" and config["recall"] == "tool"  # the agent's own model
    assert [t.name for t in agent.tools] == ["read_part", "recall_observation"]
    assert session.budget == BUDGET

    scripted.task = "first: read the parts"
    first = await run_agent(mode, agent, "first: read the parts", session)
    assert first == f"Read {CALLS} parts for: first: read the parts"
    # the first call of the run saw the run's input (a streamed run saves it only later)
    assert user_text(scripted.requests[0]["messages"][-1]) == "first: read the parts"
    assert len(scripted.requests) == CALLS + 1
    # every call's input was the compacted request: within budget although the run read far more
    # (the tools the SDK sends count too: the session declared them, so the budget is charged)
    sizes = [sum(count_message_tokens(m) for m in r["messages"]) + count_tool_definitions(r["tools"])
             for r in scripted.requests]
    raw_tokens = CALLS * count_message_tokens({"role": "tool", "content": _part(1)})
    assert raw_tokens > 3 * BUDGET
    assert max(sizes) <= BUDGET, sizes
    report = await client_a.context(session.lanes_session_id)
    assert report.compactions > 0
    # the budget is charged for the tools the SDK sends (declared from the agent), give or take
    # the SDK's own rendering of them
    sent = count_tool_definitions(scripted.requests[0]["tools"])
    assert abs(report.tool_definition_tokens - sent) <= 0.1 * sent, (report.tool_definition_tokens, sent)
    # ... while the session's raw history keeps every item as the SDK gave it
    history = await session.get_items()
    outputs = [i["output"] for i in history if i.get("type") == "function_call_output"]
    assert outputs == [_part(n) for n in range(1, CALLS + 1)]
    assert [i["content"] for i in history if i.get("role") == "user"] == ["first: read the parts"]
    reasoning = [i for i in history if i.get("type") == "reasoning"]
    assert len(reasoning) == CALLS and reasoning[0]["summary"][0]["text"] == "read part 1 next"
    assert await session.get_items(limit=2) == history[-2:]
    # the last call saw the newest exchange: its output bounded (over half the budget; its head is
    # a quarter of the preview) with the address of the exact text, and the turn's reasoning passed back
    last = scripted.requests[-1]["messages"]
    assert last[-1]["content"].startswith(_part(CALLS)[:400]) and "observation://" in last[-1]["content"]
    assert any(m.get("reasoning_content") == f"read part {CALLS} next" for m in last)
    assert not any(m.get("reasoning_content") == "read part 1 next" for m in last)  # compacted with its turn

    # a second run continues the session: the first run's answer is still in its context
    scripted.task = "second: read more"
    second = await run_agent(mode, agent, "second: read more", session)
    assert second == f"Read {CALLS} parts for: second: read more"
    assert len(scripted.requests) == 2 * (CALLS + 1)
    seen = scripted.requests[CALLS + 1]["messages"]
    assert user_text(seen[-1]) == "second: read more"
    assert any(m["role"] == "assistant" and m.get("content") == first for m in seen)
    history = await session.get_items()
    assert len([i for i in history if i.get("type") == "function_call_output"]) == 2 * CALLS
    assert [i["content"] for i in history if i.get("role") == "user"] == ["first: read the parts", "second: read more"]
    assert max(sum(count_message_tokens(m) for m in r["messages"]) + count_tool_definitions(r["tools"])
               for r in scripted.requests) <= BUDGET


async def test_pop_and_clear_on_an_append_only_store(client_a):
    session = await LanesSession.create(client_a)
    await session.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
    await session.add_items([{"role": "user", "content": "three"}])
    first = session.lanes_session_id
    assert await session.pop_item() == {"role": "user", "content": "three"}
    assert await session.get_items() == [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    assert session.lanes_session_id != first and session.session_id == first
    request = await client_a.next_request(session.lanes_session_id, format="responses")
    assert "three" not in json.dumps(request.input)  # gone from what the model is sent too
    # the previous session is untouched, for audit
    assert len((await client_a.list_items(first)).items) >= 3
    await session.clear_session()
    assert await session.get_items() == [] and await session.pop_item() is None


class RecallingModel:
    """Reads three parts, then recalls the first 300 characters of the first address its
    request shows, then answers with what the recall returned."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            body = await request.json()
            self.requests.append(body)
            turn = len(self.requests)
            if turn <= 3:
                call = {"name": "read_part", "arguments": json.dumps({"n": turn})}
            elif turn == 4:
                shown = json.dumps(body["messages"])
                address = re.search(r"observation://obs-[A-Za-z0-9_.-]+", shown)
                assert address is not None, "a compacted request shows an address"
                call = {"name": "recall_observation",
                        "arguments": json.dumps({"address": address.group(0), "offset": 0, "limit": 300})}
            else:
                call = None
            message = ({"role": "assistant", "content": None,
                        "tool_calls": [{"id": f"call-{turn}", "type": "function", "function": call}]}
                       if call else {"role": "assistant", "content": body["messages"][-1]["content"]})
            return {"id": f"r{turn}", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

        self.http = ThreadedServer(app)


async def test_a_compacted_run_reads_archived_output_back_with_the_recall_tool(client_a):
    set_tracing_disabled(True)
    upstream = RecallingModel()
    try:
        model = OpenAIChatCompletionsModel(model="gpt-4.1-mini",
                                           openai_client=AsyncOpenAI(base_url=upstream.http.base_url, api_key="test"))
        agent = Agent(name="reader", instructions="Read what you are asked to.", model=model, tools=[read_part])
        session = await LanesSession.create(client_a, agent=agent, budget_tokens=2_500)
        answer = (await Runner.run(agent, "read three parts", session=session, run_config=session.run_config(),
                                   max_turns=10)).final_output
    finally:
        upstream.http.stop()
    assert (await client_a.get_session(session.lanes_session_id)).config["model"] == "gpt-4.1-mini"
    unbounded = await LanesSession.create(client_a, agent=Agent(name="a", model=model), recall_tool=False)
    assert unbounded.budget == 1_047_576 - 4_096  # gpt-4.1-mini's usable window: the budget no one chose
    header, text = answer.split("\n", 1)
    # the exact text at the address: the first 300 characters of one of the parts read
    assert any(text == _part(n)[:300] and f"of {len(_part(n))}" in header for n in (1, 2, 3)), answer
    assert header.startswith("[observation://obs-") and "more from offset=300" in header
    outputs = [i["output"] for i in await session.get_items() if i.get("type") == "function_call_output"]
    assert outputs[-1] == answer  # the recall's result is in the session's history like any tool output


@pytest.mark.parametrize("mode", ["run", "run_streamed"])
async def test_a_responses_model_gets_each_runs_new_input_in_both_runner_modes(client_a, mode):
    """The SDK's default model (the Responses API) in ``Runner.run`` and ``Runner.run_streamed``:
    each run's first call carries that run's own input, and the earlier run's answer."""
    from agents import OpenAIResponsesModel

    from tests.gateway.upstream import Scripted, ScriptedUpstream

    upstream = ScriptedUpstream()
    try:
        upstream.script("gpt-4.1", Scripted(text="first answer"), Scripted(text="second answer"))
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=AsyncOpenAI(base_url=f"{upstream.root}/v1",
                                                                                 api_key="test"))
        agent = Agent(name="helper", instructions="You are terse.", model=model)
        session = await LanesSession.create(client_a, agent=agent, budget_tokens=BUDGET)
        assert await run_agent(mode, agent, "first question", session) == "first answer"
        assert await run_agent(mode, agent, "second question", session) == "second answer"
        first, second = (json.dumps(body["input"]) for body in upstream.of("gpt-4.1"))
        assert "first question" in first and "second question" not in first
        assert "second question" in second and "first answer" in second
        history = await session.get_items()
        assert [i["content"] for i in history if i.get("role") == "user"] == ["first question", "second question"]
    finally:
        upstream.stop()
