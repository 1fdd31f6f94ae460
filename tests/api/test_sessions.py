"""Every endpoint of the HTTP API against the real stack: sessions, hosted mode, inspection,
recall, events (paged and streamed), health, auth, limits and error shapes."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from lanes_client import LanesAPIError
from tests.api.stack import TRAJECTORY, replay_body


@pytest.fixture(scope="module")
async def http(api_stack):
    async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=60,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as client:
        yield client


@pytest.fixture(scope="module")
async def finished(client_a, trajectory, replay):
    """A hosted session that replayed the recording to its end (compacting on the way)."""
    created = await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=5000))
    sid = created.session_id
    task = await client_a.send_message(sid, trajectory.task)
    status = await client_a.wait_task(sid, task.task_id, timeout=120)
    return sid, task.task_id, status


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    return body["error"]


async def test_health_and_readiness(http):
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok"}  # unauthenticated: nothing more


async def test_readiness_reports_unreachable_dependencies(api_settings):
    from worker.api.app import create_app

    broken = api_settings.model_copy(update={"temporal_address": "127.0.0.1:9", "database_url": None})
    app = create_app(broken, tokens={"token-xxxxxxxx": "t"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json() == {"status": "unavailable"}  # no addresses, no causes
        listed = await client.get("/v1/sessions", headers={"Authorization": "Bearer token-xxxxxxxx"})
        assert listed.status_code == 503 and "DATABASE_URL" in error_of(listed)["message"]


async def test_openapi_documents_every_endpoint(http):
    spec = (await http.get("/openapi.json")).json()
    paths = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    assert {
        ("POST", "/v1/sessions"), ("GET", "/v1/sessions"), ("GET", "/v1/sessions/{session_id}"),
        ("POST", "/v1/sessions/{session_id}/cancel"), ("POST", "/v1/sessions/{session_id}/messages"),
        ("POST", "/v1/sessions/{session_id}/items"), ("GET", "/v1/sessions/{session_id}/request"),
        ("POST", "/v1/sessions/{session_id}/episodes"), ("POST", "/v1/sessions/{session_id}/episodes/{episode_id}/end"),
        ("POST", "/v1/sessions/{session_id}/condense"), ("GET", "/v1/sessions/{session_id}/context"),
        ("GET", "/v1/sessions/{session_id}/observations/{obs_id}"), ("GET", "/v1/sessions/{session_id}/events"),
        ("GET", "/v1/sessions/{session_id}/events/stream"), ("GET", "/healthz"), ("GET", "/readyz"),
    } <= paths
    assert "bearer" in str(spec["components"]["securitySchemes"]).lower()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-123"}, {"Authorization": "Basic eDp5"},
                                     {"Authorization": "Bearer"}])
async def test_missing_or_bad_token_is_401_before_anything_else(api_stack, headers):
    async with httpx.AsyncClient(base_url=api_stack.base_url, headers=headers) as anon:
        for method, path, body in [("GET", "/v1/sessions", None), ("POST", "/v1/sessions", {"mode": "nope"}),
                                   ("GET", "/v1/sessions/ses-doesnotexist/context", None),
                                   ("POST", "/v1/sessions/%%%/items", "not json")]:
            response = await anon.request(method, path, json=body)
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
            assert error_of(response)["code"] == "unauthorized"


async def test_create_list_show_and_cancel(client_a, http, api_stack):
    created = await client_a.create_session(mode="external", model="gpt-4o-mini", budget_tokens=20_000,
                                            context_window=64_000, max_output_tokens=2_000,
                                            system_prompt="Be brief.", max_turns_per_task=10)
    sid = created.session_id
    assert created.config["budget_tokens"] == 20_000 and created.config["mode"] == "external"
    listed = await client_a.list_sessions(limit=500)
    assert sid in [s.session_id for s in listed.sessions]
    info = await client_a.get_session(sid)
    assert info.workflow.status == "RUNNING" and info.mode == "external"
    assert info.status is not None and info.status.closed is False
    report = await _context_when_started(client_a, sid)
    assert report.usable_input == 20_000 and report.items[0].kind == "system"

    # paging: two sessions per page, following next_cursor, covers the same list
    await client_a.create_session(mode="external")
    async def every_page(limit: int) -> list[str]:
        seen, cursor = [], None
        for _ in range(10_000):  # however many sessions the tenant holds (other tests add theirs)
            page = await client_a.list_sessions(limit=limit, cursor=cursor)
            seen += [s.session_id for s in page.sessions]
            cursor = page.next_cursor
            if cursor is None:
                return seen
        raise AssertionError("the cursor never ended")

    assert await every_page(2) == await every_page(500)
    bad_cursor = await http.get("/v1/sessions", params={"cursor": "garbage!"})
    assert bad_cursor.status_code == 400 and "cursor" in error_of(bad_cursor)["message"]

    closed = await client_a.cancel_session(sid)
    assert closed.action == "close"
    await _eventually(lambda: client_a.get_session(sid), lambda i: i.workflow.status == "COMPLETED")
    again = await client_a.cancel_session(sid)
    assert again.action == "none" and again.workflow_status == "COMPLETED"

    other = (await client_a.create_session(mode="hosted")).session_id
    terminated = await client_a.cancel_session(other, terminate=True, reason="test over")
    assert terminated.action == "terminate" and terminated.workflow_status == "TERMINATED"
    response = await http.post(f"/v1/sessions/{other}/messages", json={"text": "hello"})
    assert response.status_code == 409 and "ended" in error_of(response)["message"]


@pytest.mark.parametrize("body, status, words", [
    ({"mode": "sideways"}, 422, "mode"),
    ({"budget_tokens": 0}, 422, "budget_tokens"),
    ({"budget_tokens": "lots"}, 422, "budget_tokens"),
    ({"context_window": -5}, 422, "context_window"),
    ({"system_prompt": ""}, 422, "system_prompt"),
    ({"surprise": 1}, 422, "surprise"),
    ({"tools": "every"}, 422, "tools"),
    ({"subagents": {"enabled": True, "max_concurrent": 0}}, 422, "max_concurrent"),
    ({"mode": "external", "replay": {"trajectory_path": str(TRAJECTORY), "trajectory_id": "x",
                                     "model_base_url": "http://127.0.0.1:1/v1"}}, 400, "hosted"),
    ({"replay": {"trajectory_path": "/nonexistent.json", "trajectory_id": "x",
                 "model_base_url": "http://127.0.0.1:1/v1"}}, 400, "replay folders"),
    ({"replay": {"trajectory_path": "/etc/passwd", "trajectory_id": "x",
                 "model_base_url": "http://127.0.0.1:1/v1"}}, 400, "replay folders"),  # exists: same answer
    ({"replay": {"trajectory_path": str(TRAJECTORY.parent / ".." / ".." / ".." / "DESIGN.md"), "trajectory_id": "x",
                 "model_base_url": "http://127.0.0.1:1/v1"}}, 400, "replay folders"),
    ({"replay": {"trajectory_path": str(TRAJECTORY), "trajectory_id": "x",
                 "model_base_url": "http://169.254.169.254/latest"}}, 400, "allow-list"),
    ([1, 2], 422, "body"),
])
async def test_create_rejects_bad_input_clearly(http, body, status, words):
    before = len((await http.get("/v1/sessions", params={"limit": 500})).json()["sessions"])
    response = await http.post("/v1/sessions", json=body)
    assert response.status_code == status, response.text
    assert words in error_of(response)["message"]
    after = len((await http.get("/v1/sessions", params={"limit": 500})).json()["sessions"])
    assert after == before  # nothing half-created


async def test_malformed_json_and_oversized_bodies(http):
    response = await http.post("/v1/sessions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 422 and error_of(response)["code"] == "invalid"
    huge = b'{"text": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    response = await http.post("/v1/sessions/ses-whatever/messages", content=huge,
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and error_of(response)["code"] == "too_large"
    # it says what to do: the limit, and that a call can carry less
    assert "2,097,152 bytes" in error_of(response)["message"] and "fewer items" in error_of(response)["message"]

    async def chunks():  # no Content-Length: counted while read
        for _ in range(40):
            yield b"y" * 65_536

    response = await http.post("/v1/sessions/ses-whatever/items", content=chunks(),
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 413


async def test_a_body_that_never_arrives_whole_is_408_and_frees_the_connection(api_settings):
    from tests.threaded_server import ThreadedServer
    from worker.api.app import create_app

    server = ThreadedServer(create_app(api_settings, tokens={"body-token-0123456789": "t"}, body_seconds=1.0))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer body-token-0123456789\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"mode\":")  # then nothing
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)  # the server answers and closes
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer[:200]
        assert json.loads(body)["error"]["code"] == "body_timeout"
    finally:
        server.stop()


async def test_unknown_session_and_route_are_404(http):
    for method, path in [("GET", "/v1/sessions/ses-nope"), ("GET", "/v1/sessions/ses-nope/context"),
                         ("POST", "/v1/sessions/ses-nope/cancel"), ("GET", "/v1/nothing-here")]:
        response = await http.request(method, path)
        assert response.status_code == 404, (path, response.text)
        assert error_of(response)["code"] == "not_found"
    bad_id = await http.get("/v1/sessions/..%2F..%2Fetc")
    assert bad_id.status_code in (404, 422)


async def test_hosted_message_runs_a_task(finished, client_a, trajectory):
    sid, task_id, status = finished
    task = next(t for t in status.tasks if t.task_id == task_id)
    assert task.state == "completed" and task.turns == len(trajectory.turns) + 1
    info = await client_a.get_session(sid)
    assert info.status.turns == task.turns
    assert (await client_a.status(sid)).tasks == status.tasks


async def test_hosted_message_validation(finished, http, client_a):
    sid, _, _ = finished
    for body, status in [({"text": ""}, 422), ({"text": "   "}, 400), ({"text": 42}, 422), ({}, 422),
                         ({"text": "hi", "extra": 1}, 422)]:
        response = await http.post(f"/v1/sessions/{sid}/messages", json=body)
        assert response.status_code == status, (body, response.text)
        assert error_of(response)["message"]
    for path in ("items", "request"):
        method = "POST" if path == "items" else "GET"
        response = await http.request(method, f"/v1/sessions/{sid}/{path}",
                                      json={"items": [{"kind": "user", "text": "x"}]} if method == "POST" else None)
        assert response.status_code == 409 and error_of(response)["code"] == "wrong_mode"


async def test_context_reports_every_item(finished, client_a):
    sid, _, _ = finished
    report = await client_a.context(sid)
    assert report.compactions >= 1
    assert report.budget == 5000 - report.tool_definition_tokens
    for item in report.items:
        assert item.lifecycle in ("pinned", "active", "retained", "archived")
        assert item.projection in item.tokens_by_projection and item.reason
    assert report.working_set_tokens == sum(i.tokens for i in report.items if i.lifecycle != "archived")


async def test_item_content_and_exact_recall(finished, client_a, http, trajectory):
    sid, _, _ = finished
    user = await client_a.item(sid, "itm-000001")
    assert user.kind == "user" and user.text == trajectory.task
    events = (await client_a.events(sid, limit=1000)).events
    results = [e.payload["item_id"] for e in events if e.kind == "item.added" and e.payload["kind"] == "tool_result"]
    recorded = [r.output for t in trajectory.turns for r in t.results]
    biggest = max(range(len(recorded)), key=lambda i: len(recorded[i]))
    item = await client_a.item(sid, results[biggest])
    obs = item.metadata["observation_id"]
    full = recorded[biggest]
    for offset, limit in [(0, 10), (7, 500), (len(full) // 2, 333), (len(full) - 5, 50), (len(full) + 10, 5)]:
        piece = await client_a.read_observation(sid, obs, offset=offset, limit=limit)
        assert piece.text == full[offset: offset + limit]
        assert piece.total_chars == len(full) and piece.eof == (offset + limit >= len(full))
    whole = await client_a.read_observation(sid, f"observation://{obs}?offset=0&limit=65536")
    assert whole.text == full and whole.address == f"observation://{obs}"

    for params, words in [({"offset": -1}, "offset"), ({"limit": 0}, "limit"), ({"limit": 10**6}, "limit"),
                          ({"offset": "x"}, "offset")]:
        response = await http.get(f"/v1/sessions/{sid}/observations/{obs}", params=params)
        assert response.status_code == 422, response.text
        assert words in error_of(response)["message"]
    missing = await http.get(f"/v1/sessions/{sid}/observations/obs-not-there")
    assert missing.status_code == 404
    bad = await http.get(f"/v1/sessions/{sid}/observations/not-an-obs")
    assert bad.status_code == 422
    assert (await http.get(f"/v1/sessions/{sid}/items/itm-999999")).status_code == 404
    truncated = await client_a.item(sid, "itm-000001", max_chars=10)
    assert truncated.truncated and truncated.text == trajectory.task[:10]


async def test_events_are_paged_and_streamed(finished, client_a, http):
    sid, _, _ = finished
    everything = (await client_a.events(sid, limit=1000)).events
    assert any(e.kind.startswith("context.compaction") for e in everything)
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    paged, after = [], 0
    while True:
        page = await client_a.events(sid, after=after, limit=7)
        paged += page.events
        after = page.next_after
        if not page.has_more:
            break
    assert [e.id for e in paged] == [e.id for e in everything]

    streamed = [e async for e in client_a.stream_events(sid, after=everything[3].id, timeout=1.0)]
    assert [e.id for e in streamed] == [e.id for e in everything[4:]]
    # Last-Event-ID resumes a dropped stream
    response = await http.get(f"/v1/sessions/{sid}/events/stream", params={"timeout": 0.3},
                              headers={"Last-Event-ID": str(everything[-2].id)})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.count("\ndata: ") + response.text.startswith("data: ") == 1
    for params in ({"after": -1}, {"limit": 0}, {"limit": 5000}):
        assert (await http.get(f"/v1/sessions/{sid}/events", params=params)).status_code == 422


async def test_stream_delivers_new_events_live(client_a):
    sid = (await client_a.create_session(mode="external", system_prompt="You take notes.")).session_id
    await _context_when_started(client_a, sid)
    start = (await client_a.events(sid)).next_after

    async def collect():
        got = []
        async for event in client_a.stream_events(sid, after=start, timeout=10):
            if event.kind == "item.added":  # the user message also starts a task (task.started)
                got.append(event)
            if len(got) == 2:
                return got
        return got

    collecting = asyncio.create_task(collect())
    await asyncio.sleep(0.5)
    await client_a.append_items(sid, [{"kind": "user", "text": "one"}, {"kind": "note", "text": "two"}])
    got = await asyncio.wait_for(collecting, 15)
    assert [e.payload["kind"] for e in got] == ["user", "note"]


async def _context_when_started(client, sid):
    async def attempt():
        try:
            return await client.context(sid)
        except LanesAPIError as exc:
            assert exc.status == 503 and exc.code == "starting", exc
            return None

    return await _eventually(attempt, lambda r: r is not None and r.items)  # the system item is in


async def _eventually(fetch, ok, timeout: float = 30.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await fetch()
        if ok(value):
            return value
        assert loop.time() < deadline, f"not reached: {value!r}"
        await asyncio.sleep(0.1)
