"""Copies of one call sent at once (an agent's retries racing its first attempt, a client that
timed out and sent again) through each protocol, streamed or not, with the system prompt each
protocol carries: every copy is answered with the one answer, the conversation is one session,
and each turn is stored once, in order."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import anthropic
import openai
import pytest

from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import ANTHROPIC_TOOLS, stored
from tests.gateway.test_gateway_crash import ready, start_api
from tests.gateway.upstream import Scripted, ScriptedUpstream
from worker.local.stack import free_port
from worker.settings import Settings

COPIES = 5
CHAT_TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "read_file", "description": "Read a file.", "strict": False,
                               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def script(upstream: ScriptedUpstream) -> str:
    """A model whose answers to the first call's copies are one tool call (each copy may reach the
    upstream: the call is at least once; ``answers`` gives the next call's)."""
    name = f"copies-{uuid.uuid4().hex[:8]}"
    answers(upstream, name, Scripted(calls=[("call_1", "read_file", {"path": "a.txt"})]))
    return name


def answers(upstream: ScriptedUpstream, name: str, answer: Scripted) -> None:
    """What the upstream answers each copy of the next call (copies answered from the store
    leave theirs unused: replaced, not left for the call after)."""
    upstream.scripts[name] = [answer] * COPIES


def at_once(client: Any, call: Any) -> list[Any]:
    """``call(client)`` made COPIES times at once; ``client`` an async SDK client, closed after."""
    async def copies() -> list[Any]:
        async with client:
            return await asyncio.gather(*(call(client) for _ in range(COPIES)))
    return asyncio.run(copies())


def assert_stored_once(gateway: str, sid: str, question: str, *after: tuple[str, str]) -> None:
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        ("system", "You read files."), ("user", question), ("assistant", ""), ("tool_result", "hi"),
        ("assistant", "a.txt says hi."), *after]


def openai_at(base: str, timeout: float = 120) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{base}/gateway/openai/v1", api_key=TOKEN, max_retries=0, timeout=timeout)


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

    first = at_once(openai_at(gateway), call)
    sid = one_session(first)
    assert {answer for _, answer in first} == {(None, ("call_1",))}
    messages += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                                       "arguments": '{"path": "a.txt"}'}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "hi"}]
    answers(upstream, name, Scripted(text="a.txt says hi."))
    second = at_once(openai_at(gateway), call)
    assert one_session(second) == sid and {answer for _, answer in second} == {("a.txt says hi.", ())}
    assert_stored_once(gateway, sid, messages[1]["content"])


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

    def client() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0,
                                        timeout=120)

    first = at_once(client(), call)
    sid = one_session(first)
    assert {answer for _, answer in first} == {(("tool_use", "call_1"),)}
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "read_file",
                                                    "input": {"path": "a.txt"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "hi"}]}]
    answers(upstream, name, Scripted(text="a.txt says hi."))
    second = at_once(client(), call)
    assert one_session(second) == sid and {answer for _, answer in second} == {(("text", "a.txt says hi."),)}
    assert_stored_once(gateway, sid, messages[0]["content"])


def test_responses_copies(gateway: str, upstream: ScriptedUpstream):
    name = script(upstream)
    given: list[Any] = [{"role": "user", "content": f"What does a.txt say? {uuid.uuid4().hex}"}]

    async def call(client: openai.AsyncOpenAI) -> tuple[str, Any]:
        raw = await client.responses.with_raw_response.create(model=name, instructions="You read files.",
                                                              input=given, tools=RESPONSES_TOOLS)
        return raw.headers["x-lanes-session"], raw.parse()

    first = at_once(openai_at(gateway), call)
    sid = one_session(first)
    assert {tuple((i.type, getattr(i, "call_id", None)) for i in r.output) for _, r in first} == {
        (("function_call", "call_1"),)}
    given += [*(i.model_dump(exclude_none=True) for i in first[0][1].output),
              {"type": "function_call_output", "call_id": "call_1", "output": "hi"}]
    answers(upstream, name, Scripted(text="a.txt says hi."))
    second = at_once(openai_at(gateway), call)
    assert one_session(second) == sid and {r.output_text for _, r in second} == {"a.txt says hi."}
    assert_stored_once(gateway, sid, given[0]["content"])


def test_copies_across_two_api_processes(gateway: str, gateway_settings: Settings, upstream: ScriptedUpstream):
    """Copies split between two API processes of one deployment (a load balancer's retry lands
    on another replica): neither process knows the other's calls, and the outcome is the same."""
    name = script(upstream)
    port = free_port()
    other = f"http://127.0.0.1:{port}"
    api = start_api(gateway_settings, upstream, port)
    try:
        ready(other, api)
        messages: list[Any] = [{"role": "system", "content": "You read files."},
                               {"role": "user", "content": f"What does a.txt say? {uuid.uuid4().hex}"}]

        async def copies() -> list[tuple[str, Any]]:
            clients = [openai_at(base) for base in (gateway, other)]
            raws = await asyncio.gather(*(clients[n % 2].chat.completions.with_raw_response.create(
                model=name, messages=messages, tools=CHAT_TOOLS) for n in range(COPIES)))
            for client in clients:
                await client.close()
            return [(raw.headers["x-lanes-session"], raw.parse().choices[0].message) for raw in raws]

        first = asyncio.run(copies())
        sid = one_session(first)
        assert {tuple(c.id for c in m.tool_calls or ()) for _, m in first} == {("call_1",)}
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                                           "arguments": '{"path": "a.txt"}'}}]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "hi"}]
        answers(upstream, name, Scripted(text="a.txt says hi."))
        second = asyncio.run(copies())
        assert one_session(second) == sid and {m.content for _, m in second} == {"a.txt says hi."}
        messages += [{"role": "assistant", "content": "a.txt says hi."}, {"role": "user", "content": "Thanks."}]
        answers(upstream, name, Scripted(text="done."))
        third = asyncio.run(copies())
        assert one_session(third) == sid and {m.content for _, m in third} == {"done."}
        assert_stored_once(gateway, sid, messages[1]["content"], ("user", "Thanks."), ("assistant", "done."))
    finally:
        if api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)
