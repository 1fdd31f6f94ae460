"""The OpenAI Responses API through the gateway, with the official SDK (created and streamed)
and with the OpenAI Agents SDK given nothing but a client with the gateway's base URL: function
calls, their outputs, reasoning items passed back upstream verbatim, one session stored exactly."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers

TOOLS: list[Any] = [{"type": "function", "name": "read_file", "description": "Read a file.", "strict": False,
                     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def model() -> str:
    return f"resp-{uuid.uuid4().hex[:8]}"


def test_responses_function_call_loop_and_stream(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(thinking="plan", calls=[("call_r", "read_file", {"path": "a.txt"})]),
                    Scripted(text="a.txt says hi."))
    client = openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    raw = client.responses.with_raw_response.create(model=name, instructions="You read files.",
                                                    input="What does a.txt say?", tools=TOOLS)
    first = raw.parse()
    calls = [i for i in first.output if i.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [("call_r", "read_file", '{"path": "a.txt"}')]
    assert first.usage is not None and first.usage.input_tokens == 100
    given: list[Any] = [{"role": "user", "content": "What does a.txt say?"},
                        *[i.model_dump(exclude_none=True) for i in first.output],
                        {"type": "function_call_output", "call_id": "call_r", "output": "hi"}]
    with client.responses.stream(model=name, instructions="You read files.", input=given, tools=TOOLS) as stream:
        final = stream.get_final_response()
    assert final.output_text == "a.txt says hi."
    assert upstream.of(name)[1]["stream"] is True  # the upstream's own events, forwarded as they came
    sent = upstream.of(name)[1]
    assert sent["instructions"] == "You read files."
    kinds = [i.get("type") for i in sent["input"]]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"]  # reasoning passed back verbatim
    assert sent["input"][-3]["encrypted_content"] == first.output[0].model_dump()["encrypted_content"]
    session = httpx.get(f"{gateway}/v1/sessions/{raw.headers['x-lanes-session']}",
                        headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert session["config"]["tool_definitions"] == 1  # the agent's flat function tool, measured in the budget
    items = stored(gateway, raw.headers["x-lanes-session"])
    assert [(i["kind"], i["text"]) for i in items] == [
        ("system", "You read files."), ("user", "What does a.txt say?"), ("assistant", ""),
        ("tool_result", "hi"), ("assistant", "a.txt says hi.")]


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: 42"


async def test_the_agents_sdk_runs_through_the_gateway_with_only_a_base_url(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(calls=[("call_a", "read_file", {"path": "answer.txt"})]),
                    Scripted(text="The answer is 42."))
    client = openai.AsyncOpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                  model=OpenAIResponsesModel(model=name, openai_client=client))
    result = await Runner.run(agent, "What is in answer.txt?")
    assert result.final_output == "The answer is 42."
    sent = upstream.of(name)
    assert len(sent) == 2
    assert sent[1]["input"][-1] == {"type": "function_call_output", "call_id": "call_a",
                                    "output": "contents of answer.txt: 42"}
    sessions = httpx.get(f"{gateway}/v1/sessions", params={"limit": 50},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"]
    held = [stored(gateway, s["session_id"]) for s in sessions if s["config"].get("model") == name]
    assert len(held) == 1 and [i["kind"] for i in held[0]] == ["system", "user", "assistant", "tool_result",
                                                               "assistant"]


async def test_the_agents_sdk_streamed_run_through_the_gateway(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(calls=[("call_s", "read_file", {"path": "s.txt"})]), Scripted(text="Streamed: 42."))
    client = openai.AsyncOpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    agent = Agent(name="reader", instructions="You read files.", tools=[read_file],
                  model=OpenAIResponsesModel(model=name, openai_client=client))
    run = Runner.run_streamed(agent, "What is in s.txt?")
    kinds = [event.type async for event in run.stream_events()]
    assert run.final_output == "Streamed: 42." and "raw_response_event" in kinds
    sent = upstream.of(name)
    assert [body["stream"] for body in sent] == [True, True]
    assert all("stream_options" not in body for body in sent)  # Chat's include_usage is no Responses field
    assert sent[1]["input"][0]["content"][0]["text"] == "What is in s.txt?"  # the task, in every call
