"""Each gateway answer says where its time went (``Server-Timing``): the phases a call took, the
upstream's share told apart from Lanes' own, and none of a phase it skipped."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from tests.gateway.test_gateway import TOOLS, model, openai_client, session_of
from tests.gateway.upstream import Scripted, ScriptedUpstream
from worker.api.gateway.timing import CallTiming, parse_header

pytestmark = pytest.mark.timeout(180)
UPSTREAM_SECONDS = 0.3  # how long the scripted upstream holds its answer
AGENT_SECONDS = 0.3  # the agent running its tool between two calls


def _held(**answer: Any) -> Scripted:
    """An answer the upstream sends UPSTREAM_SECONDS after the request came (a timer sets it free
    once the gateway's request is recorded: the hold starts then)."""
    hold = threading.Event()
    scripted = Scripted(hold=hold, **answer)
    original = hold.wait

    def wait(timeout: float | None = None) -> bool:
        threading.Timer(UPSTREAM_SECONDS, hold.set).start()
        return original(timeout)

    hold.wait = wait  # type: ignore[method-assign]
    return scripted


def _timing(raw) -> dict[str, float]:
    return parse_header(raw.headers["server-timing"])


def test_the_answer_tells_the_upstreams_time_from_lanes_own(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, _held(calls=[("call_1", "read_file", {"path": "a.py"})]), _held(text="done"))
    client = openai_client(gateway)
    messages: list[Any] = [{"role": "user", "content": f"read a.py {uuid.uuid4().hex}"}]
    first = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS)
    opened = _timing(first)
    assert {"read", "find", "open", "step", "render", "upstream", "keep", "total"} <= set(opened)
    assert opened["upstream"] >= UPSTREAM_SECONDS * 1000
    assert sum(ms for phase, ms in opened.items() if phase != "total") <= opened["total"]

    messages += [first.parse().choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"}]
    time.sleep(AGENT_SECONDS)  # the agent runs its tool: the answer's write ends meanwhile
    second = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS)
    assert session_of(second) == session_of(first)
    continued = _timing(second)
    assert "open" not in continued  # the session holds the conversation: nothing opened
    # the tool's output continues the plan made after the first answer: sent with no update first
    assert {"read", "find", "render", "upstream", "keep"} <= set(continued) and "step" not in continued
    assert continued["upstream"] >= UPSTREAM_SECONDS * 1000

    again = client.chat.completions.with_raw_response.create(model=name, messages=messages, tools=TOOLS)
    replayed = _timing(again)  # a retry: answered from the store, no step and no upstream call
    assert "upstream" not in replayed and "step" not in replayed and "find" in replayed
    assert len(upstream.of(name)) == 2


def test_a_streamed_answer_times_the_upstream_until_its_stream_opens(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, _held(text="streamed"))
    client = openai_client(gateway)
    with client.chat.completions.with_streaming_response.create(
            model=name, messages=[{"role": "user", "content": f"hi {uuid.uuid4().hex}"}], stream=True) as raw:
        timing = _timing(raw)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices)
    assert text == "streamed"
    assert timing["upstream"] >= UPSTREAM_SECONDS * 1000 and "keep" not in timing  # kept after the stream


def test_a_failed_call_says_how_far_it_got(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(status=429))
    client = openai_client(gateway)
    raw = client.chat.completions.with_raw_response
    try:
        raw.create(model=name, messages=[{"role": "user", "content": f"hi {uuid.uuid4().hex}"}])
    except Exception as error:  # the SDK raises the upstream's 429 as it would without Lanes
        timing = parse_header(error.response.headers["server-timing"])  # type: ignore[attr-defined]
    else:
        raise AssertionError("the upstream's 429 was not passed through")
    assert "upstream" in timing and "keep" not in timing


def test_laps_and_timed_waits_charge_their_own_phase():
    import asyncio
    import time

    timing = CallTiming()
    time.sleep(0.02)
    timing.lap("read")
    asyncio.run(timing.timed("upstream", asyncio.sleep(0.05)))
    time.sleep(0.01)
    timing.lap("keep")
    timing.lap("keep")  # a second lap adds to the phase
    phases = parse_header(timing.header())
    assert list(phases) == ["read", "upstream", "keep", "total"]
    assert phases["read"] >= 20 and phases["upstream"] >= 50 and 10 <= phases["keep"] < phases["upstream"]
    assert phases["total"] >= phases["read"] + phases["upstream"] + phases["keep"]


def test_the_header_parser_skips_entries_without_a_duration():
    assert parse_header('cache;desc="hit", db;dur=53.2, app;dur=x, total;dur=60') == {"db": 53.2, "total": 60.0}
