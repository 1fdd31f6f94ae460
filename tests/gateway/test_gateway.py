"""The gateway with the official SDKs, unchanged, pointed at it by base URL and a Lanes token:
the answer each SDK parses, the session that holds the conversation (stored exactly, once),
the bounded request the upstream received, branches, retries, recall and errors."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.gateway.conftest import TOKEN, TOKEN_B
from tests.gateway.upstream import Scripted, ScriptedUpstream

pytestmark = pytest.mark.timeout(180)

TOOLS: list[Any] = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]
ANTHROPIC_TOOLS: list[Any] = [{"name": "read_file", "description": "Read a file.",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def model() -> str:
    return f"up-{uuid.uuid4().hex[:8]}"


def openai_client(gateway: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0, **options)


def stored(gateway: str, session_id: str) -> list[dict]:
    """Every item stored in the session's main lane, in order (all pages)."""
    items: list[dict] = []
    while True:
        response = httpx.get(f"{gateway}/v1/sessions/{session_id}/items", headers={"Authorization": f"Bearer {TOKEN}"},
                             params={"limit": 500, "after_seq": items[-1]["seq"] if items else -1})
        response.raise_for_status()
        page = response.json()["items"]
        items += page
        if len(page) < 500:
            return items


def session_of(raw) -> str:
    return raw.headers["x-lanes-session"]


def test_openai_sdk_tool_loop_is_one_session_stored_exactly(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(calls=[("call_1", "read_file", {"path": "setup.py"})]),
                    Scripted(text="setup.py installs the package."))
    client = openai_client(gateway)
    messages: list[Any] = [{"role": "system", "content": "You are a careful agent."},
                            {"role": "user", "content": "What does setup.py do?"}]
    first = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS)
    answer = first.parse()
    call = answer.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1", "read_file", {"path": "setup.py"})
    assert answer.choices[0].finish_reason == "tool_calls" and answer.usage.prompt_tokens == 100
    messages += [answer.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_1", "content": "from setuptools import setup\nsetup()"}]
    second = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS)
    assert second.parse().choices[0].message.content == "setup.py installs the package."
    sid = session_of(first)
    assert session_of(second) == sid
    session = httpx.get(f"{gateway}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert session["config"]["tool_definitions"] == 1
    items = stored(gateway, sid)
    assert [(i["kind"], i["text"]) for i in items] == [
        ("system", "You are a careful agent."), ("user", "What does setup.py do?"), ("assistant", ""),
        ("tool_result", "from setuptools import setup\nsetup()"), ("assistant", "setup.py installs the package.")]
    assert items[2]["tool_calls"][0]["id"] == "call_1" and items[3]["tool_call_id"] == "call_1"
    sent = upstream.of(name)
    assert len(sent) == 2
    assert sent[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                       "content": "from setuptools import setup\nsetup()"}
    assert sent[1]["tools"] == TOOLS  # the agent's own tools, as it sent them
    assert upstream.requests[-1]["headers"]["authorization"] == "Bearer sk-upstream-secret"  # never the agent's


def test_openai_sdk_streaming_reads_text_tool_calls_and_usage(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(text="Reading it.", calls=[("call_9", "read_file", {"path": "a.py"})],
                                   usage=(250, 200, 12)))
    stream = openai_client(gateway).chat.completions.create(
        model=name, messages=[{"role": "user", "content": "read a.py"}], tools=TOOLS, stream=True,
        stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, {"id": call.id, "name": call.function.name, "arguments": ""})
                entry["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert text == "Reading it." and finish == "tool_calls"
    assert calls == {0: {"id": "call_9", "name": "read_file", "arguments": json.dumps({"path": "a.py"},
                                                                                      sort_keys=True)}}
    assert (usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details.cached_tokens) == (250, 12, 200)
    assert upstream.of(name)[-1]["stream"] is True  # the upstream's own events, forwarded as they came
    upstream.script(name, Scripted(text="no usage asked"))
    chunks = list(openai_client(gateway).chat.completions.create(
        model=name, messages=[{"role": "user", "content": "again, without usage"}], stream=True))
    assert chunks and all(chunk.choices for chunk in chunks)  # the usage-only chunk is not forwarded unasked
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "no usage asked"


def test_anthropic_sdk_tool_use_and_streaming(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(calls=[("toolu_1", "read_file", {"path": "README.md"})]),
                    Scripted(text="It is a README."))
    client = anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Summarise README.md"}]
    first = client.messages.with_raw_response.create(model=name, max_tokens=512, system="Be brief.",
                                                     messages=messages, tools=ANTHROPIC_TOOLS)
    message = first.parse()
    assert message.stop_reason == "tool_use" and message.content[0].type == "tool_use"
    assert message.content[0].input == {"path": "README.md"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                               "content": "# Lanes\nDurable context."}]}]
    with client.messages.stream(model=name, max_tokens=512, system="Be brief.", messages=messages,
                                tools=ANTHROPIC_TOOLS) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "It is a README." and final.stop_reason == "end_turn"
    assert upstream.of(name)[-1]["stream"] is True
    sid = session_of(first)
    items = stored(gateway, sid)
    assert [i["kind"] for i in items] == ["system", "user", "assistant", "tool_result", "assistant"]
    assert items[3]["text"] == "# Lanes\nDurable context." and items[3]["tool_call_id"] == "toolu_1"
    sent = upstream.of(name)
    assert sent[1]["system"][0]["text"] == "Be brief."
    assert sent[1]["messages"][-1]["content"][0]["type"] == "tool_result"
    assert any("cache_control" in block for m in sent[1]["messages"] for block in m["content"])  # breakpoints
    assert upstream.requests[-1]["headers"]["x-api-key"] == "ak-upstream-secret"


def test_a_retried_call_is_answered_from_the_store(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(text="the one answer"))
    client = openai_client(gateway)
    messages = [{"role": "user", "content": f"question {uuid.uuid4().hex}"}]
    first = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    again = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    assert again.parse().choices[0].message.content == "the one answer"
    assert session_of(again) == session_of(first)
    assert len(upstream.of(name)) == 1  # no second upstream call
    assert [i["kind"] for i in stored(gateway, session_of(first))] == ["user", "assistant"]


def test_the_same_call_to_another_model_is_answered_by_that_model(gateway: str, upstream: ScriptedUpstream):
    first_model, other_model = model(), model()
    upstream.script(first_model, Scripted(text="the first model's answer"))
    upstream.script(other_model, Scripted(text="the other model's answer"), Scripted(text="and its next"))
    client = openai_client(gateway)
    messages = [{"role": "user", "content": f"question {uuid.uuid4().hex}"}]
    first = client.chat.completions.with_raw_response.create(model=first_model, messages=messages)
    other = client.chat.completions.with_raw_response.create(model=other_model, messages=messages)
    assert other.parse().choices[0].message.content == "the other model's answer"  # not replayed
    assert len(upstream.of(other_model)) == 1
    assert session_of(other) != session_of(first)  # a branch: the first session is unchanged
    assert [i["text"] for i in stored(gateway, session_of(first))][-1] == "the first model's answer"
    # each branch continues with its own answer; a retry of either is still answered from the store
    again = client.chat.completions.with_raw_response.create(model=first_model, messages=messages)
    assert again.parse().choices[0].message.content == "the first model's answer" and len(upstream.of(first_model)) == 1
    follow = [*messages, {"role": "assistant", "content": "the other model's answer"}, {"role": "user", "content": "go on"}]
    next_call = client.chat.completions.with_raw_response.create(model=other_model, messages=follow)
    assert next_call.parse().choices[0].message.content == "and its next"
    assert session_of(next_call) == session_of(other)
    assert [i["kind"] for i in stored(gateway, session_of(other))] == ["user", "assistant", "user", "assistant"]


def test_conversations_stay_apart_and_an_edited_history_branches(gateway: str, upstream: ScriptedUpstream):
    name = model()
    client = openai_client(gateway)
    system = {"role": "system", "content": "shared system prompt"}
    a = client.chat.completions.with_raw_response.create(model=name, messages=[system, {"role": "user", "content": "A"}])
    b = client.chat.completions.with_raw_response.create(model=name, messages=[system, {"role": "user", "content": "B"}])
    assert session_of(a) != session_of(b)
    answer_a = a.parse().choices[0].message.content
    follow: list[Any] = [system, {"role": "user", "content": "A"}, {"role": "assistant", "content": answer_a},
              {"role": "user", "content": "A2"}]
    assert session_of(client.chat.completions.with_raw_response.create(model=name, messages=follow)) == session_of(a)
    edited = [system, {"role": "user", "content": "A"}, {"role": "assistant", "content": "an edited answer"},
              {"role": "user", "content": "A2"}]
    branch = client.chat.completions.with_raw_response.create(model=name, messages=edited)
    assert session_of(branch) not in (session_of(a), session_of(b))
    assert [i["text"] for i in stored(gateway, session_of(branch))][:3] == [
        "shared system prompt", "A", "an edited answer"]
    assert [i["text"] for i in stored(gateway, session_of(a))][:4] == ["shared system prompt", "A", answer_a, "A2"]


def test_identical_conversations_of_two_users_are_two_sessions(gateway: str, upstream: ScriptedUpstream):
    name = model()
    client = openai_client(gateway)
    messages = [{"role": "user", "content": "hello"}]
    alice = client.chat.completions.with_raw_response.create(model=name, messages=messages, user="alice")
    bob = client.chat.completions.with_raw_response.create(model=name, messages=messages, user="bob")
    pinned = client.chat.completions.with_raw_response.create(model=name, messages=messages,
                                                              extra_headers={"X-Lanes-Conversation": "c-7"})
    assert len({session_of(alice), session_of(bob), session_of(pinned)}) == 3
    assert len(upstream.of(name)) == 3  # each its own upstream call, none a replay of another's


def test_concurrent_conversations_are_never_misrouted(gateway: str, upstream: ScriptedUpstream):
    name = model()
    client = openai_client(gateway, timeout=120)

    def converse(n: int) -> tuple[int, str, list[str]]:
        messages: list[Any] = [{"role": "system", "content": "one prompt for all"}, {"role": "user", "content": f"task {n}"}]
        first = client.chat.completions.with_raw_response.create(model=name, messages=messages)
        messages += [{"role": "assistant", "content": first.parse().choices[0].message.content},
                     {"role": "user", "content": f"more of task {n}"}]
        second = client.chat.completions.with_raw_response.create(model=name, messages=messages)
        assert session_of(second) == session_of(first)
        return n, session_of(first), [m["content"] for m in messages]

    with ThreadPoolExecutor(24) as pool:
        results = list(pool.map(converse, range(24)))
    assert len({sid for _, sid, _ in results}) == 24
    for n, sid, sent in results:
        texts = [i["text"] for i in stored(gateway, sid)]
        assert texts[:4] == sent and texts[1] == f"task {n}" and len(texts) == 5


def test_errors_come_in_each_protocols_shape(gateway: str, upstream: ScriptedUpstream):
    name = model()
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key="not-a-token", max_retries=0) \
            .chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key="not-a-token", max_retries=0) \
            .messages.create(model=name, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="tool result"):
        openai_client(gateway).chat.completions.create(model=name, messages=[
            {"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    raw = httpx.post(f"{gateway}/gateway/anthropic/v1/messages", content=b"{not json",
                     headers={"x-api-key": TOKEN, "content-type": "application/json"})
    assert raw.status_code == 400 and raw.json()["type"] == "error"
    upstream.script(name, Scripted(status=429))
    with pytest.raises(openai.RateLimitError):  # the upstream's own status, passed through
        openai_client(gateway).chat.completions.create(model=name, messages=[{"role": "user", "content": "busy?"}])


def test_archived_output_is_recalled_by_the_gateway_never_by_the_agent(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(recall_first_address=True), Scripted(text="line 1999 says: needle-1999"))
    output = "\n".join(f"line {n} of the log: needle-{n}" for n in range(3000))  # ~100 k characters
    messages: list[Any] = [
        {"role": "system", "content": "You read logs."}, {"role": "user", "content": "What does line 1999 say?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_log", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "log"}'}}]},
        {"role": "tool", "tool_call_id": "call_log", "content": output}]
    raw = openai_client(gateway).chat.completions.with_raw_response.create(
        model=name, messages=messages, tools=TOOLS, extra_headers={"X-Lanes-Budget-Tokens": "4000"})
    answer = raw.parse().choices[0].message
    assert answer.content == "line 1999 says: needle-1999" and not answer.tool_calls  # the agent sees no recall
    first, second = upstream.of(name)
    assert output not in json.dumps(first)  # bounded: the output went as a preview with its address
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "recall_observation"]
    recalled = second["messages"][-1]
    assert recalled["role"] == "tool" and recalled["tool_call_id"] == "call_recall"
    assert "line 0 of the log: needle-0" in recalled["content"]  # exact text, read back from the store
    kinds = [(i["kind"], i.get("tool_call_id")) for i in stored(gateway, session_of(raw))]
    assert kinds[-3:] == [("assistant", None), ("tool_result", "call_recall"), ("assistant", None)]  # in the inspector


def test_a_long_conversation_passes_and_an_oversized_message_is_refused(gateway: str, upstream: ScriptedUpstream):
    """A gateway call carries the whole conversation: 4 MB of tool output (above the API's 2 MiB
    limit for other calls) is taken; one message larger than an item is refused, shaped."""
    name = model()
    messages: list[Any] = [{"role": "user", "content": "read the logs"}]
    for n in range(5):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"log {n} " + "x" * 800_000}]
    client = openai_client(gateway, timeout=120)
    raw = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS,
                                                           extra_headers={"X-Lanes-Budget-Tokens": "16000"})
    assert raw.parse().choices[0].message.content
    assert len(json.dumps(upstream.of(name)[-1])) < 200_000  # bounded: previews, not 4 MB
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model=name, messages=[{"role": "user", "content": "y" * 1_200_000}])
    assert refused.value.status_code == 413 and "larger than a session stores" in str(refused.value)


def test_a_tenant_with_its_own_upstream_key_is_sent_with_it(gateway: str, upstream: ScriptedUpstream):
    name = model()
    own = openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN_B, max_retries=0)
    own.chat.completions.create(model=name, messages=[{"role": "user", "content": "whose key?"}])
    openai_client(gateway).chat.completions.create(model=name, messages=[{"role": "user", "content": "and now?"}])
    keys = [r["headers"]["authorization"] for r in upstream.requests if r["body"].get("model") == name]
    assert keys == ["Bearer sk-tenant-b-own", "Bearer sk-upstream-secret"]


@pytest.mark.parametrize("system", [None, "You answer briefly."])
def test_the_same_call_at_once_and_after_an_upstream_failure_stores_each_turn_once(gateway: str,
                                                                                  upstream: ScriptedUpstream,
                                                                                  system: str | None):
    """Five copies of one call at once (an agent's retries racing its first attempt), then a call
    whose upstream failed, sent again: the turns are stored once, every copy gets the one answer.
    With a system prompt, the copies that did not open the session may read its row unmarked."""
    name = model()
    upstream.script(name, *[Scripted(text="the answer")] * 5)
    client = openai_client(gateway, timeout=120)
    messages: list[Any] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": f"at once {uuid.uuid4().hex}"})
    with ThreadPoolExecutor(5) as pool:
        raws = list(pool.map(lambda _: client.chat.completions.with_raw_response.create(model=name, messages=messages),
                             range(5)))
    assert {session_of(r) for r in raws} == {session_of(raws[0])}
    assert {r.parse().choices[0].message.content for r in raws} == {"the answer"}
    sid = session_of(raws[0])
    lead = ["system"] if system else []
    assert [i["kind"] for i in stored(gateway, sid)] == [*lead, "user", "assistant"]  # once, whoever answered first

    upstream.scripts[name] = [Scripted(status=503), Scripted(text="after the failure")]
    messages += [{"role": "assistant", "content": "the answer"}, {"role": "user", "content": "and then?"}]
    with pytest.raises(openai.InternalServerError):  # the upstream's 503, passed through
        client.chat.completions.create(model=name, messages=messages)
    again = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    assert again.parse().choices[0].message.content == "after the failure" and session_of(again) == sid
    assert [(i["kind"], i["text"]) for i in stored(gateway, sid)] == [
        *((m["role"], m["content"]) for m in messages[:-3]),
        ("user", messages[-3]["content"]), ("assistant", "the answer"), ("user", "and then?"),
        ("assistant", "after the failure")]


def test_thinking_of_a_tool_using_turn_is_passed_back_upstream(gateway: str, upstream: ScriptedUpstream):
    """Anthropic wants a tool-using turn's signed thinking sent back with it: the agent sends it,
    the gateway passes it on with that turn of the bounded request."""
    name = model()
    upstream.script(name, Scripted(thinking="I should read the file.", calls=[("toolu_t", "read_file", {"path": "x"})]),
                    Scripted(text="x holds 42."))
    client = anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is in x?"}]
    first = client.messages.create(model=name, max_tokens=1024, messages=messages, tools=ANTHROPIC_TOOLS,
                                   thinking={"type": "enabled", "budget_tokens": 512})
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_t", "content": "42"}]}]
    second = client.messages.create(model=name, max_tokens=1024, messages=messages, tools=ANTHROPIC_TOOLS,
                                    thinking={"type": "enabled", "budget_tokens": 512})
    assert second.content[0].text == "x holds 42."
    sent = upstream.of(name)[1]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 512}  # the agent's parameters, passed through
    turn = next(m for m in sent["messages"] if m["role"] == "assistant")
    assert [b["type"] for b in turn["content"]] == ["thinking", "tool_use"]
    assert turn["content"][0] == {"type": "thinking", "thinking": "I should read the file.", "signature": "sig-23"}


def test_a_closed_session_is_continued_in_a_new_one_and_a_model_switch_keeps_the_session(
        gateway: str, upstream: ScriptedUpstream):
    name, other = model(), model()
    client = openai_client(gateway)
    messages: list[Any] = [{"role": "user", "content": f"closing {uuid.uuid4().hex}"}]
    first = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    messages += [{"role": "assistant", "content": first.parse().choices[0].message.content},
                 {"role": "user", "content": "now with another model"}]
    switched = client.chat.completions.with_raw_response.create(model=other, messages=messages)
    assert session_of(switched) == session_of(first)  # documented: a model switch continues the session
    assert upstream.of(other)  # and the call goes upstream with the model the agent named
    closed = httpx.post(f"{gateway}/v1/sessions/{session_of(first)}/cancel", json={"action": "terminate"},
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert closed.status_code == 200, closed.text
    messages += [{"role": "assistant", "content": switched.parse().choices[0].message.content},
                 {"role": "user", "content": "after the session ended"}]
    later = client.chat.completions.with_raw_response.create(model=name, messages=messages)
    assert later.status_code == 200 and session_of(later) != session_of(first)
    assert [i["text"] for i in stored(gateway, session_of(later))] == [
        m["content"] for m in messages] + [later.parse().choices[0].message.content]


def test_a_conversation_that_cannot_fit_answers_as_the_provider_would(gateway: str, upstream: ScriptedUpstream):
    """A system prompt alone over the budget: the provider's "context length exceeded", so the
    agent's own overflow handling runs (and nothing is sent upstream)."""
    name = model()
    prompt = "Follow every rule. " * 400  # ~2,000 tokens
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client(gateway).chat.completions.create(
            model=name, messages=[{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}],
            extra_headers={"X-Lanes-Budget-Tokens": "300"})
    assert refused.value.code == "context_length_exceeded"
    assert upstream.of(name) == []
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0).messages.create(
            model=name, max_tokens=64, system=prompt, messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Lanes-Budget-Tokens": "300"})
