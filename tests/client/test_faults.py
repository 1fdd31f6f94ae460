"""Retries and reconnection through a fault-injecting proxy in front of the real API: the
client waits what Retry-After says, gives up with the typed error when retries run out,
retries an append whose answer was lost without storing it twice, never repeats a call
that is not safe to repeat, and resumes an event stream where it dropped."""

from __future__ import annotations

import json
import time

import pytest

from lanes_client import (
    AsyncLanesClient,
    LanesClient,
    LanesConnectionError,
    LanesTimeout,
    RateLimited,
    RetryPolicy,
    ServiceUnavailable,
    user_item,
)
from tests.client.faults import FaultProxy, Rule

pytestmark = pytest.mark.integration

SESSION = r"/v1/sessions/[^/]+"
FAST = RetryPolicy(max_retries=3, base_delay=0.05, max_delay=5.0)


def _texts(lanes: LanesClient, sid: str) -> list[str]:
    return [i.text for i in lanes.iter_items(sid) if i.kind == "user"]


def test_429_waits_what_retry_after_says_then_succeeds(api_stack, proxy: FaultProxy):
    with LanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        sid = lanes.create_session(mode="external").session_id
        proxy.add(Rule("GET", SESSION + "/status", "429", times=2, retry_after="1"))
        started = time.monotonic()
        assert lanes.status(sid).session_id == sid
        elapsed = time.monotonic() - started
    attempts = proxy.requests("GET", SESSION + "/status")
    assert [a.action for a in attempts] == ["429", "429", None]
    gaps = [b.at - a.at for a, b in zip(attempts, attempts[1:], strict=False)]
    assert all(0.9 <= gap < 3.0 for gap in gaps), gaps  # Retry-After: 1, not the 0.05 s backoff
    assert 1.8 <= elapsed < 6.0


def test_503_until_retries_run_out_raises_the_typed_error(api_stack, proxy: FaultProxy):
    proxy.add(Rule("GET", r"/v1/sessions", "503", times=10, retry_after="0"))
    with LanesClient(proxy.base_url, api_stack.token_a, retry=RetryPolicy(max_retries=2, base_delay=0.05)) as lanes, \
            pytest.raises(ServiceUnavailable) as raised:
        lanes.list_sessions()
    assert raised.value.status == 503 and raised.value.code == "injected" and raised.value.retry_after == 0
    assert len(proxy.requests("GET", r"/v1/sessions")) == 3  # the first attempt and two retries


async def test_rate_limited_is_raised_after_the_last_retry_async(api_stack, proxy: FaultProxy):
    proxy.add(Rule("GET", r"/v1/sessions", "429", times=10))
    async with AsyncLanesClient(proxy.base_url, api_stack.token_a, retry=RetryPolicy(max_retries=1,
                                                                                     base_delay=0.05)) as lanes:
        with pytest.raises(RateLimited):
            await lanes.list_sessions()
    assert len(proxy.requests("GET", r"/v1/sessions")) == 2


def test_an_append_whose_answer_was_lost_is_retried_and_stored_once(api_stack, proxy: FaultProxy):
    with LanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        sid = lanes.create_session(mode="external").session_id
        # the API stores the items, then the connection drops before the answer: the retry
        # carries the same key and answers what the first attempt stored
        proxy.add(Rule("POST", SESSION + "/items", "drop_after"), Rule("POST", SESSION + "/items", "drop"))
        appended = lanes.append_items(sid, [user_item("only once")])
        # (``repeated`` may be False: Temporal answers a repeated update id with its first result)
        assert appended.item_ids == [i.item_id for i in lanes.iter_items(sid) if i.kind == "user"]
        attempts = proxy.requests("POST", SESSION + "/items")
        assert [a.action for a in attempts] == ["drop_after", "drop", None]
        assert len({a.headers["idempotency-key"] for a in attempts}) == 1
        # the same for a step (its step id)
        proxy.add(Rule("POST", SESSION + "/steps", "drop_after"))
        stepped = lanes.step(sid, [user_item("also once")])
        assert stepped.request.messages[-1]["content"] == "also once"
        steps = proxy.requests("POST", SESSION + "/steps")
        assert [a.action for a in steps] == ["drop_after", None] and len({json.loads(a.body)["step_id"] for a in steps}) == 1
        assert _texts(lanes, sid) == ["only once", "also once"]
        # a new logical call gets a new key
        lanes.append_items(sid, [user_item("only once")])
        keys = {a.headers["idempotency-key"] for a in proxy.requests("POST", SESSION + "/items")}
        assert len(keys) == 2


async def test_a_call_that_is_not_safe_to_repeat_is_retried_only_when_it_did_nothing(api_stack, proxy: FaultProxy):
    async with AsyncLanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        # 429: the server did nothing; retried
        proxy.add(Rule("POST", r"/v1/sessions", "429", retry_after="0"))
        sid = (await lanes.create_session(mode="external")).session_id
        assert len(proxy.requests("POST", r"/v1/sessions")) == 2
        # dropped before forwarding, the client cannot know: not retried
        proxy.add(Rule("POST", SESSION + "/episodes", "drop_after"))
        with pytest.raises(LanesConnectionError):
            await lanes.begin_episode(sid, "ep-1", "exploration", "look")
        assert len(proxy.requests("POST", SESSION + "/episodes")) == 1
        assert (await lanes.episodes(sid)).active == ["ep-1"]  # the lost call did take effect


def test_a_dropped_connection_is_retried_and_a_stalled_one_times_out(api_stack, proxy: FaultProxy):
    with LanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        proxy.add(Rule("GET", r"/v1/sessions", "drop", times=2))
        lanes.list_sessions()
        assert [a.action for a in proxy.requests("GET", r"/v1/sessions")] == ["drop", "drop", None]
    proxy.add(Rule("GET", r"/healthz", "stall", times=5))
    with LanesClient(proxy.base_url, api_stack.token_a, timeout=0.3,
                     retry=RetryPolicy(max_retries=1, base_delay=0.05)) as impatient, pytest.raises(LanesTimeout):
        impatient.health()
    assert len(proxy.requests("GET", r"/healthz")) == 2


def test_nothing_listening_is_a_connection_error_after_the_retries():
    started = time.monotonic()
    with LanesClient("http://127.0.0.1:9", "token", retry=RetryPolicy(max_retries=2, base_delay=0.05)) as lanes, \
            pytest.raises(LanesConnectionError, match="cannot reach"):
        lanes.status("ses-x")
    assert time.monotonic() - started < 5


def _episodes(lanes: LanesClient, sid: str, n: int) -> None:
    for i in range(n):
        lanes.begin_episode(sid, f"ep-{i}", "exploration", f"look {i}")
        lanes.end_episode(sid, f"ep-{i}", f"found {i}")


def test_sync_stream_reconnects_with_last_event_id(api_stack, proxy: FaultProxy):
    with LanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        sid = lanes.create_session(mode="external").session_id
        _episodes(lanes, sid, 3)
        logged = [e.id for e in lanes.iter_events(sid)]
        proxy.add(Rule("GET", SESSION + "/events/stream", "cut_stream", times=2, events=1))
        streamed = [e.id for e in lanes.stream_events(sid, timeout=2.0)]
    assert streamed == logged  # nothing lost, nothing twice
    connections = proxy.requests("GET", SESSION + "/events/stream")
    assert len(connections) >= 2 and "last-event-id" not in connections[0].headers
    resumed = [int(c.headers["last-event-id"]) for c in connections[1:]]
    assert resumed == sorted(resumed) and set(resumed) <= set(logged)


async def test_async_stream_reconnects_and_delivers_what_was_logged_meanwhile(api_stack, proxy: FaultProxy):
    async with AsyncLanesClient(proxy.base_url, api_stack.token_a, retry=FAST) as lanes:
        sid = (await lanes.create_session(mode="external", system_prompt="You look.")).session_id  # an event
        await lanes.begin_episode(sid, "ep-0", "exploration", "look")
        logged = [e async for e in lanes.iter_events(sid)]
        assert logged[-1].kind == "episode.begun"
        proxy.add(Rule("GET", SESSION + "/events/stream", "cut_stream", events=1))
        seen = []
        async for event in lanes.stream_events(sid, after=logged[-2].id, timeout=5.0):
            seen.append(event)
            if len(seen) == 1:  # logged while the stream is down or reconnecting
                await lanes.end_episode(sid, "ep-0", "found it")
            if event.kind == "episode.ended":
                break
        assert seen[0].id == logged[-1].id and [e.id for e in seen] == sorted({e.id for e in seen})
        assert [e.id for e in seen] == [e.id async for e in lanes.iter_events(sid, after=logged[-2].id)][: len(seen)]
    first, second = proxy.requests("GET", SESSION + "/events/stream")[:2]
    assert "last-event-id" not in first.headers and second.headers["last-event-id"] == str(seen[0].id)
