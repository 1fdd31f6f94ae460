"""The retry policy's decisions and the typed errors of answers (no server needed)."""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx
import pytest

from lanes_client import endpoints as api
from lanes_client.errors import (
    AuthenticationError,
    BadRequest,
    Conflict,
    LanesAPIError,
    NotFound,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unprocessable,
    error_from_response,
    retry_after_seconds,
)
from lanes_client.retry import RetryPolicy

POLICY = RetryPolicy(max_retries=3, base_delay=0.5, max_delay=10.0, max_elapsed=60.0)


def _answer(status: int, retry_after: str | None = None) -> LanesAPIError:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return error_from_response(httpx.Response(status, headers=headers,
                                              json={"error": {"code": "c", "message": "m", "details": [1]}}))


@pytest.mark.parametrize(("status", "cls"), [
    (400, BadRequest), (401, AuthenticationError), (403, AuthenticationError), (404, NotFound), (409, Conflict),
    (422, Unprocessable), (429, RateLimited), (503, ServiceUnavailable), (504, ServerError), (500, ServerError),
    (418, LanesAPIError),
])
def test_each_status_has_its_error(status, cls):
    error = _answer(status)
    assert type(error) is cls and (error.status, error.code, error.message, error.details) == (status, "c", "m", [1])


def test_a_body_that_is_not_the_api_shape_still_gives_a_message():
    error = error_from_response(httpx.Response(502, text="Bad Gateway from the proxy"))
    assert isinstance(error, ServerError) and error.code == "error" and "Bad Gateway" in error.message


def test_retry_after_in_seconds_or_as_an_http_date():
    assert retry_after_seconds("3") == 3.0 and retry_after_seconds("0.5") == 0.5 and retry_after_seconds("-2") == 0
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.5 <= (retry_after_seconds(in_ten) or 0) <= 10.5
    assert retry_after_seconds(email.utils.formatdate(time.time() - 60, usegmt=True)) == 0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_retryable_answers_and_failures():
    for failure in (_answer(429), _answer(503), httpx.ConnectError("refused"), httpx.ReadTimeout("slow"),
                    httpx.RemoteProtocolError("dropped")):
        wait = POLICY.delay(0, failure, safe=True, elapsed=0)
        assert wait is not None and 0 <= wait <= 0.5, failure
    final: list[BaseException] = [_answer(400), _answer(404), _answer(409), _answer(422), _answer(500), _answer(504),
                                   ValueError()]
    for error in final:
        assert POLICY.delay(0, error, safe=True, elapsed=0) is None, error


def test_a_call_not_safe_to_repeat_is_retried_only_when_nothing_happened():
    assert POLICY.delay(0, _answer(429), safe=False, elapsed=0) is not None  # busy: did nothing
    assert POLICY.delay(0, httpx.ConnectError("refused"), safe=False, elapsed=0) is not None  # never sent
    for maybe_done in (_answer(503), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped"),
                       httpx.ReadError("reset")):
        assert POLICY.delay(0, maybe_done, safe=False, elapsed=0) is None, maybe_done


def test_backoff_grows_and_retry_after_wins_within_the_caps():
    ceilings = [max(POLICY.delay(n, httpx.ConnectError("x"), safe=True, elapsed=0) or 0 for _ in range(200))
                for n in range(3)]
    assert ceilings[0] <= 0.5 < ceilings[1] <= 1.0 < ceilings[2] <= 2.0
    assert POLICY.delay(0, _answer(429, "4"), safe=True, elapsed=0) == 4.0
    assert POLICY.delay(0, _answer(503, "3600"), safe=True, elapsed=0) == 10.0  # max_delay
    assert POLICY.delay(3, _answer(429, "1"), safe=True, elapsed=0) is None  # max_retries
    assert POLICY.delay(0, _answer(429, "5"), safe=True, elapsed=56.0) is None  # would pass max_elapsed
    assert RetryPolicy(max_retries=0).delay(0, _answer(429), safe=True, elapsed=0) is None


def test_appends_carry_a_key_per_logical_call_and_the_unsafe_calls_are_marked():
    first, second = api.append_items("s", [{"kind": "user", "text": "a"}]), api.append_items("s", [])
    assert first.safe and first.headers["Idempotency-Key"] != second.headers["Idempotency-Key"]
    assert api.append_items("s", [], idempotency_key="mine").headers["Idempotency-Key"] == "mine"
    assert api.step("s").json["step_id"] and api.step("s", step_id="k").json["step_id"] == "k"
    # a message is keyed too: its retries answer the first call's task
    message, other = api.send_message("s", "t"), api.send_message("s", "t")
    assert message.safe and message.headers["Idempotency-Key"] != other.headers["Idempotency-Key"]
    assert api.send_message("s", "t", idempotency_key="m").headers["Idempotency-Key"] == "m"
    unsafe: list[api.Call[Any]] = [api.create_session(), api.begin_episode("s", "e", "action", "g"),
              api.end_episode("s", "e"), api.condense("s", {}), api.spawn_subagent("s", "b")]
    assert not any(call.safe for call in unsafe)
    assert all(call.safe for call in (api.status("s"), api.context("s"), api.cancel_session("s"), api.ready()))


def test_paths_escape_their_segments_and_observation_addresses_are_read():
    assert api.item("a/b", "x?y").path == "/v1/sessions/a%2Fb/items/x%3Fy"
    call = api.read_observation("s", "observation://obs-1?offset=10&limit=20")
    assert call.path == "/v1/sessions/s/observations/obs-1" and call.query == {"offset": 10, "limit": 20}
    assert api.read_observation("s", "observation://obs-1?offset=10", offset=3).query == {"offset": 3}
    with pytest.raises(ValueError):
        api.read_observation("s", "observation://obs-1?what=1")
