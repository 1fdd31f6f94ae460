"""Bad input to every gateway endpoint: malformed JSON, wrong types, unknown roles and blocks,
unpaired tool results, odd tool calls. Each call answers 200 or a 4xx in its protocol's shape,
never a server error, and what is refused stores nothing."""

from __future__ import annotations

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.conftest import TOKEN

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)
roles = st.sampled_from(["user", "assistant", "tool", "system", "developer", "function", "robot", None])
blocks = st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking", "x"])},
                               optional={"text": scalars, "id": scalars, "name": scalars, "input": json_values,
                                         "tool_use_id": scalars, "content": json_values})
calls = st.fixed_dictionaries({}, optional={"id": scalars, "type": scalars, "function": st.fixed_dictionaries(
    {}, optional={"name": scalars, "arguments": json_values})})
messages = st.lists(st.fixed_dictionaries({"role": roles}, optional={
    "content": st.one_of(scalars, st.lists(blocks, max_size=3)), "tool_calls": st.lists(calls, max_size=2),
    "tool_call_id": scalars}), max_size=4)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={"model": scalars, "messages": messages, "max_tokens": scalars,
                                        "stream": st.booleans(), "tools": json_values, "system": json_values,
                                        "input": st.one_of(scalars, st.lists(json_values, max_size=3)),
                                        "instructions": scalars, "n": scalars}))
ROUTES = ["/gateway/openai/v1/chat/completions", "/gateway/openai/v1/responses", "/gateway/anthropic/v1/messages",
          "/gateway/anthropic/v1/messages/count_tokens"]


def _sessions(gateway: str) -> int:
    return len(httpx.get(f"{gateway}/v1/sessions", params={"limit": 500},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"])


def test_bad_bodies_get_a_shaped_4xx_and_never_a_server_error(gateway: str):
    http = httpx.Client(base_url=gateway, headers={"Authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN},
                        timeout=60)

    answered = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(route=st.sampled_from(ROUTES), body=bodies, raw=st.booleans())
    def check(route: str, body: object, raw: bool) -> None:
        response = (http.post(route, content=str(body).encode()[:200]) if raw else http.post(route, json=body))
        assert response.status_code < 500, (route, body, response.text[:300])
        if response.status_code == 200 and not route.endswith("count_tokens"):
            answered.append(route)
        if response.status_code >= 400:
            shaped = response.json()
            assert ("error" in shaped and (shaped.get("type") == "error" or "message" in shaped["error"])), shaped

    before = _sessions(gateway)
    check()
    # a refused call opens no session: at most one new session per call that was answered
    assert _sessions(gateway) - before <= len(answered)
