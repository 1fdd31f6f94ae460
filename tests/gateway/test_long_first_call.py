"""A conversation the gateway has not seen may arrive long: an agent that already ran for hours
points its base URL at Lanes, or a resumed coding CLI sends its whole history. A step takes at
most MAX_ITEMS_PER_CALL items, so the leading turns are appended first, keyed by the turns:
the call is answered, every turn is stored once in order, the upstream request fits the budget,
and a retry (after the upstream failed, or of the whole call) stores nothing twice."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import asyncpg
import httpx
import openai
import pytest

from activities.tokens import count_message_tokens
from tests.gateway.conftest import TOKEN
from tests.gateway.test_copies_at_once import COPIES, at_once, openai_at
from tests.gateway.test_gateway import model, openai_client, session_of, stored
from tests.gateway.test_gateway_crash import cut_and_restarted
from tests.gateway.upstream import Scripted, ScriptedUpstream
from worker.local.stack import free_port
from worker.settings import Settings
from workflows.contract.session import MAX_ITEMS_PER_CALL

pytestmark = pytest.mark.timeout(240)

BUDGET = 8_000


def conversation(pairs: int) -> list[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You keep the build log."}]
    for n in range(pairs):
        messages += [{"role": "user", "content": f"[{tag}] build {n} passed in {n % 97} s; log it."},
                     {"role": "assistant", "content": f"Logged build {n}."}]
    return messages + [{"role": "user", "content": f"[{tag}] Which builds took over 90 s?"}]


def test_a_long_first_call_is_stored_once_in_order_and_answered_within_the_budget(
        gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(status=503), Scripted(text="Builds 91 to 96."), Scripted(text="Noted."))
    client = openai_client(gateway, timeout=180)
    messages = conversation(130)  # 262 turns: appended in three batches before the step
    assert len(messages) > 2 * MAX_ITEMS_PER_CALL
    budget = {"X-Lanes-Budget-Tokens": str(BUDGET)}
    with pytest.raises(openai.InternalServerError):  # the upstream failed after the turns were stored
        client.chat.completions.create(model=name, messages=messages, extra_headers=budget)
    raw = client.chat.completions.with_raw_response.create(model=name, messages=messages, extra_headers=budget)
    assert raw.parse().choices[0].message.content == "Builds 91 to 96."
    again = client.chat.completions.with_raw_response.create(model=name, messages=messages, extra_headers=budget)
    assert again.parse().choices[0].message.content == "Builds 91 to 96."  # answered from the store
    sid = session_of(raw)
    assert session_of(again) == sid
    expected = [(m["role"], m["content"]) for m in messages]  # kinds are the roles here
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [*expected, ("assistant", "Builds 91 to 96.")]

    messages += [{"role": "assistant", "content": "Builds 91 to 96."}, {"role": "user", "content": "Log that."}]
    follow = client.chat.completions.with_raw_response.create(model=name, messages=messages, extra_headers=budget)
    assert follow.parse().choices[0].message.content == "Noted." and session_of(follow) == sid
    items = stored(gateway, sid)
    assert len(items) == len(messages) + 1 and items[-2:][0]["text"] == "Log that."
    sent = upstream.of(name)
    assert len(sent) == 3  # the failed call, the answered one, the follow-up; the copy was not sent
    for request in sent:
        assert sum(count_message_tokens(m, None) for m in request["messages"]) <= BUDGET
    assert sent[1]["messages"][-1]["content"] == messages[-3]["content"]  # the question, whole


def test_an_api_killed_between_the_batches_loses_and_repeats_nothing(gateway: str, gateway_settings: Settings,
                                                                     upstream: ScriptedUpstream):
    """The API process SIGKILLed once some of the leading batches are stored: the agent's retry,
    to a restarted API, stores the rest once, in order, and is answered."""
    name = model()
    upstream.script(name, Scripted(text="Builds 91 to 96."))
    messages = conversation(300)  # 602 turns: six batches, then the step
    tag = messages[1]["content"][1:9]
    body = {"model": name, "messages": messages}
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Lanes-Budget-Tokens": str(BUDGET)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    dsn = gateway_settings.database_url or ""
    api = None
    try:
        # killed once a batch is stored (five more and the step follow); whenever it lands, the
        # retry must leave each turn stored once, in order
        api = cut_and_restarted(gateway_settings, upstream, port, body, headers,
                                lambda: asyncio.run(_users_stored(dsn, tag)) > 0, "a stored batch")
        retry = httpx.post(f"{base}/gateway/openai/v1/chat/completions", json=body, headers=headers, timeout=180)
        assert retry.status_code == 200, retry.text
        items = stored(base, retry.headers["x-lanes-session"])
        assert [(i["kind"], i["text"]) for i in items] == [*((m["role"], m["content"]) for m in messages),
                                                          ("assistant", "Builds 91 to 96.")]
    finally:
        if api is not None and api.poll() is None:
            os.killpg(api.pid, signal.SIGKILL)
            api.wait(10)


async def _users_stored(dsn: str, tag: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval("SELECT count(*) FROM items WHERE content->'content'->>'text' LIKE $1", f"[{tag}]%")
    finally:
        await conn.close()


def test_an_answer_followed_by_many_turns_is_counted_once(gateway: str, upstream: ScriptedUpstream):
    """The previous answer, sent back with more turns after it than a step takes (it may ride in
    a leading batch): stored once, its provider usage counted once."""
    name = model()
    upstream.script(name, Scripted(text="Ready."), Scripted(text="Builds 91 to 96."))
    client = openai_client(gateway, timeout=180)
    messages: list[Any] = [{"role": "user", "content": f"Keep the build log {uuid.uuid4().hex[:8]}."}]
    first = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    messages += [{"role": "assistant", "content": "Ready."}, *conversation(70)[1:]]
    second = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    sid = session_of(first)
    assert session_of(second) == sid and second.parse().choices[0].message.content == "Builds 91 to 96."
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        *((m["role"], m["content"]) for m in messages), ("assistant", "Builds 91 to 96.")]
    status = httpx.get(f"{gateway}/v1/sessions/{sid}/status", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert status["usage"]["calls"] == 2


def test_copies_of_a_long_call_at_once_store_each_turn_once(gateway: str, upstream: ScriptedUpstream):
    """Five copies at once of a first call longer than two steps take, then five copies of a long
    second call (an agent's retries racing its first attempt): the copies race through the same
    keyed batches, every copy gets the one answer, each turn is stored once, in order."""
    name = model()
    upstream.script(name, *[Scripted(text="Builds 91 to 96.")] * COPIES)  # each copy may reach the upstream
    budget = {"X-Lanes-Budget-Tokens": str(BUDGET)}
    messages = conversation(110)  # 222 turns: two batches, then the step

    async def call(client: openai.AsyncOpenAI) -> Any:
        return await client.chat.completions.with_raw_response.create(model=name, messages=messages,
                                                                      extra_headers=budget)

    first = at_once(openai_at(gateway, timeout=180), call)
    sid = session_of(first[0])
    assert {session_of(r) for r in first} == {sid}
    assert {r.parse().choices[0].message.content for r in first} == {"Builds 91 to 96."}
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        *((m["role"], m["content"]) for m in messages), ("assistant", "Builds 91 to 96.")]

    messages += [{"role": "assistant", "content": "Builds 91 to 96."}, *conversation(60)[1:]]  # 122 new turns
    upstream.scripts[name] = [Scripted(text="Logged.")] * COPIES  # the first copies' unused answers dropped
    second = at_once(openai_at(gateway, timeout=180), call)
    assert {session_of(r) for r in second} == {sid}
    assert {r.parse().choices[0].message.content for r in second} == {"Logged."}
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        *((m["role"], m["content"]) for m in messages), ("assistant", "Logged.")]
    for request in upstream.of(name):
        assert sum(count_message_tokens(m, None) for m in request["messages"]) <= BUDGET
