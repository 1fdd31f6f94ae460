"""Subagent lanes over HTTP: start one, list them, read a lane's context; other tenants see nothing."""

from __future__ import annotations

import asyncio

import httpx

from tests.integration.subagent_script import (
    child_trajectory,
    parent_trajectory,
    replay_field,
    write_recordings,
)
from worker.replay.model_server import ReplayModelServer


async def test_subagent_lanes_over_http(api_stack):
    folder = api_stack.settings.replay_roots[-1] / "subagents-http"
    parent, children = write_recordings(folder, parent_trajectory([]), [child_trajectory(0)])
    auth_a = {"Authorization": f"Bearer {api_stack.token_a}"}
    auth_b = {"Authorization": f"Bearer {api_stack.token_b}"}
    with ReplayModelServer([parent[0], children[0][0]]) as server:
        async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=60, headers=auth_a) as http:
            created = await http.post("/v1/sessions", json={
                "replay": replay_field(*parent, server, [replay_field(*children[0], server)]),
                "tools": "recall", "subagents": {"enabled": True, "max_concurrent": 2}})
            assert created.status_code == 201, created.text
            sid = created.json()["session_id"]
            assert created.json()["config"]["subagents"] is True

            bad = await http.post(f"/v1/sessions/{sid}/subagents", json={"brief": ""})
            assert bad.status_code == 422 and "brief" in bad.text
            unknown = await http.post(f"/v1/sessions/{sid}/subagents", json={"brief": "x", "tools": ["bash"]})
            assert unknown.status_code in (400, 409) and "not available in this session" in unknown.text
            started = await http.post(f"/v1/sessions/{sid}/subagents", json={"brief": "Inspect module 0."})
            assert started.status_code == 201, started.text
            assert started.json() == {"lane": "sub-0001", "workflow_id": f"{sid}/sub-0001"}

            for _ in range(300):
                lanes = (await http.get(f"/v1/sessions/{sid}/subagents")).json()
                if lanes[0]["state"] != "running":
                    break
                await asyncio.sleep(0.1)
            assert lanes[0]["state"] == "completed" and lanes[0]["handoff_item_id"]
            context = (await http.get(f"/v1/sessions/{sid}/subagents/sub-0001/context")).json()
            assert context["shared_prefix_entries"] >= 1 and context["shared_prefix_tokens"] > 0
            assert any(i["kind"] == "handoff" for i in
                       (await http.get(f"/v1/sessions/{sid}/context")).json()["items"])
            missing = await http.get(f"/v1/sessions/{sid}/subagents/sub-0009/context")
            assert missing.status_code == 404
        async with api_stack.client(api_stack.token_a) as client:  # the typed client says the same
            assert [c.lane for c in await client.subagents(sid)] == ["sub-0001"]
            assert (await client.subagent_context(sid, "sub-0001")).shared_prefix_tokens > 0
        async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=60, headers=auth_b) as other:
            for method, path in (("GET", "/subagents"), ("POST", "/subagents"), ("GET", "/subagents/sub-0001/context")):
                response = await other.request(method, f"/v1/sessions/{sid}{path}", json={"brief": "steal"})
                assert response.status_code == 404, (method, path, response.text)
