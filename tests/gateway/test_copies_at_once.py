"""Copies of one call sent at once (an agent's retries racing its first attempt, a client that
timed out and sent again) through each protocol, streamed or not, with the system prompt each
protocol carries: every copy is answered with the one answer, the conversation is one session,
and each turn is stored once, in order."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import anthropic
import openai
import pytest

from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import ANTHROPIC_TOOLS, stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

COPIES = 5
CHAT_TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "read_file", "description": "Read a file.", "strict": False,
                               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def script(upstream: ScriptedUpstream) -> str:
    name = f"copies-{uuid.uuid4().hex[:8]}"
    upstream.script(name, *[Scripted(calls=[("call_1", "read_file", {"path": "a.txt"})])] * COPIES,
                    *[Scripted(text="a.txt says hi.")] * COPIES)
    return name


def one_session(results: list[tuple[str, Any]]) -> str:
    sessions = {sid for sid, _ in results}
    assert len(sessions) == 1, sessions  # a copy that saw the others' claims as a divergence branched
    return sessions.pop()


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_copies(gateway: str, upstream: ScriptedUpstream, stream: bool):
    name = script(upstream)
    messages: list[Any] = [{"role": "system", "content": "You read files."},
                           {"role": "user", "content": f"What does a.txt say? {uuid.uuid4().hex}"}]

    async def call(client: openai.AsyncOpenAI) -> tuple[str, Any]:
        if not stream:
            raw = await client.chat.completions.with_raw_response.create(model=name, messages=messages,
                                                                         tools=CHAT_TOOLS)
            message = raw.parse().choices[0].message
            return raw.headers["x-lanes-session"], (message.content, tuple(c.id for c in message.tool_calls or ()))
        async with client.chat.completions.with_streaming_response.create(
                model=name, messages=messages, tools=CHAT_TOOLS, stream=True) as response:
            text, calls = "", []
            async for chunk in await response.parse():
                delta = chunk.choices[0].delta if chunk.choices else None
                text += (delta.content or "") if delta else ""
                calls += [c.id for c in (delta.tool_calls or ()) if c.id] if delta else []
            return response.headers["x-lanes-session"], (text or None, tuple(calls))

    async def copies() -> list[tuple[str, Any]]:
        async with openai.AsyncOpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0,
                                      timeout=120) as client:
            return await asyncio.gather(*(call(client) for _ in range(COPIES)))

    first = asyncio.run(copies())
    sid = one_session(first)
    assert {answer for _, answer in first} == {(None, ("call_1",))}
    messages += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                                       "arguments": '{"path": "a.txt"}'}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "hi"}]
    second = asyncio.run(copies())
    assert one_session(second) == sid and {answer for _, answer in second} == {("a.txt says hi.", ())}
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        ("system", "You read files."), ("user", messages[1]["content"]), ("assistant", ""), ("tool_result", "hi"),
        ("assistant", "a.txt says hi.")]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_copies(gateway: str, upstream: ScriptedUpstream, stream: bool):
    name = script(upstream)
    messages: list[Any] = [{"role": "user", "content": f"What does a.txt say? {uuid.uuid4().hex}"}]

    async def call(client: anthropic.AsyncAnthropic) -> tuple[str, Any]:
        options: dict[str, Any] = {"model": name, "max_tokens": 512, "system": "You read files.",
                                   "messages": messages, "tools": ANTHROPIC_TOOLS}
        if stream:
            async with client.messages.stream(**options) as events:
                message = await events.get_final_message()
                sid = events.response.headers["x-lanes-session"]
        else:
            raw = await client.messages.with_raw_response.create(**options)
            message, sid = await raw.parse(), raw.headers["x-lanes-session"]
        return sid, tuple((b.type, getattr(b, "text", None) or getattr(b, "id", None)) for b in message.content)

    async def copies() -> list[tuple[str, Any]]:
        async with anthropic.AsyncAnthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0,
                                            timeout=120) as client:
            return await asyncio.gather(*(call(client) for _ in range(COPIES)))

    first = asyncio.run(copies())
    sid = one_session(first)
    assert {answer for _, answer in first} == {(("tool_use", "call_1"),)}
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "read_file",
                                                    "input": {"path": "a.txt"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "hi"}]}]
    second = asyncio.run(copies())
    assert one_session(second) == sid and {answer for _, answer in second} == {(("text", "a.txt says hi."),)}
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        ("system", "You read files."), ("user", messages[0]["content"]), ("assistant", ""), ("tool_result", "hi"),
        ("assistant", "a.txt says hi.")]


def test_responses_copies(gateway: str, upstream: ScriptedUpstream):
    name = script(upstream)
    given: list[Any] = [{"role": "user", "content": f"What does a.txt say? {uuid.uuid4().hex}"}]

    async def copies() -> list[tuple[str, Any]]:
        async with openai.AsyncOpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0,
                                      timeout=120) as client:
            raws = await asyncio.gather(*(client.responses.with_raw_response.create(
                model=name, instructions="You read files.", input=given, tools=RESPONSES_TOOLS)
                for _ in range(COPIES)))
        return [(raw.headers["x-lanes-session"], raw.parse()) for raw in raws]

    first = asyncio.run(copies())
    sid = one_session(first)
    assert {tuple((i.type, getattr(i, "call_id", None)) for i in r.output) for _, r in first} == {
        (("function_call", "call_1"),)}
    given += [*(i.model_dump(exclude_none=True) for i in first[0][1].output),
              {"type": "function_call_output", "call_id": "call_1", "output": "hi"}]
    second = asyncio.run(copies())
    assert one_session(second) == sid and {r.output_text for _, r in second} == {"a.txt says hi."}
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        ("system", "You read files."), ("user", given[0]["content"]), ("assistant", ""), ("tool_result", "hi"),
        ("assistant", "a.txt says hi.")]
