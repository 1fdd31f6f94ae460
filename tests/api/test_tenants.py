"""Tenant isolation: a session belongs to the tenant that created it. Every other tenant gets
404 on every path under it (observations and items included), exactly as for a session that
does not exist, and cannot change it."""

from __future__ import annotations

import httpx
import pytest

from lanes_client import LanesAPIError, assistant_item, tool_result_item, user_item

BODIES = {
    "/v1/sessions/{session_id}/cancel": {"action": "terminate", "reason": "hijack"},
    "/v1/sessions/{session_id}/messages": {"text": "do something"},
    "/v1/sessions/{session_id}/items": {"items": [{"kind": "user", "text": "injected"}]},
    "/v1/sessions/{session_id}/episodes": {"episode_id": "x", "kind": "exploration", "goal": "g"},
    "/v1/sessions/{session_id}/episodes/{episode_id}/end": {"conclusion": "c"},
    "/v1/sessions/{session_id}/subagents": {"brief": "steal"},
    "/v1/sessions/{session_id}/condense": {"memory": {"completed_work": ["w"]}},
}


@pytest.fixture(scope="module")
async def owned_by_a(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    out = await client_a.append_items(sid, [user_item("secret task"),
                                            assistant_item({"content": "", "tool_calls": [call]}),
                                            tool_result_item("c1", "bash", "secret output", 0)])
    await client_a.begin_episode(sid, "ep-1", "exploration", "look around")
    item = await client_a.item(sid, out.item_ids[2])
    return sid, out.item_ids[2], item.metadata["observation_id"]


def _requests(spec: dict, sid: str, item_id: str, obs_id: str) -> list[tuple[str, str, dict | None]]:
    values = {"session_id": sid, "item_id": item_id, "obs_id": obs_id, "episode_id": "ep-1", "lane": "sub-0001",
              "task_id": "task-0000"}
    found: list[tuple[str, str, dict | None]] = []
    for path, operations in spec["paths"].items():
        if "{session_id}" not in path:
            continue
        for method in operations:
            found.append((method.upper(), path.format(**values), BODIES.get(path)))
    return found


async def test_other_tenants_get_404_on_every_path_of_a_session(owned_by_a, api_stack, client_a):
    sid, item_id, obs_id = owned_by_a
    before = await client_a.context(sid)
    headers_b = {"Authorization": f"Bearer {api_stack.token_b}"}
    async with httpx.AsyncClient(base_url=api_stack.base_url, headers=headers_b, timeout=30) as b:
        spec = (await b.get("/openapi.json")).json()
        requests = _requests(spec, sid, item_id, obs_id)
        assert len(requests) >= 15
        for method, path, body in requests:
            params = {"timeout": 0.2} if path.endswith("/stream") else None
            response = await b.request(method, path, json=body, params=params)
            assert response.status_code == 404, (method, path, response.status_code, response.text)
            error = response.json()["error"]
            assert error["code"] == "not_found" and "secret" not in response.text
            # indistinguishable from a session that does not exist
            ghost = await b.request(method, path.replace(sid, "ses-000000000000"), json=body, params=params)
            assert ghost.status_code == 404
            assert ghost.json()["error"]["message"] == error["message"].replace(sid, "ses-000000000000")
        listed = (await b.get("/v1/sessions", params={"limit": 500})).json()["sessions"]
        assert sid not in [s["session_id"] for s in listed]
    # and nothing B tried changed A's session
    after = await client_a.context(sid)
    assert after == before
    info = await client_a.get_session(sid)
    assert info.workflow.status == "RUNNING"
    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as a:
        for method, path, _ in _requests(spec, sid, item_id, obs_id):
            # (this session has no subagent lane: its lane's context is a 404 for the owner too)
            if method == "GET" and not path.endswith("/stream") and "/subagents/" not in path:
                assert (await a.get(path)).status_code == 200, path


async def test_sessions_of_other_tenants_are_invisible_both_ways(client_a, client_b):
    mine = (await client_b.create_session(mode="external")).session_id
    assert mine in [s.session_id for s in (await client_b.list_sessions(limit=500)).sessions]
    assert mine not in [s.session_id for s in (await client_a.list_sessions(limit=500)).sessions]
    with pytest.raises(LanesAPIError) as raised:
        await client_a.get_session(mine)
    assert raised.value.status == 404
    with pytest.raises(LanesAPIError) as raised:
        await client_a.read_observation(mine, "obs-anything")
    assert raised.value.status == 404
    await client_b.cancel_session(mine)
