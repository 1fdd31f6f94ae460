"""The sync and the async client against the real stack (Temporal dev server, PostgreSQL, a
worker, the API): the same calls answer the same way, the iterators page through
everything, errors come typed, and every answer the client parses lost no field the
server sent (its wire models cannot drift from the server's without failing here)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lanes_client import (
    AsyncLanesClient,
    AuthenticationError,
    Conflict,
    LanesAPIError,
    LanesClient,
    NotFound,
    Unprocessable,
    assistant_item,
    note_item,
    tool_result_item,
    user_item,
)
from lanes_client import endpoints as api
from lanes_client.shapes import ContextReport, SessionStatus

pytestmark = pytest.mark.integration


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


def _exchange(n: int) -> list:
    return [assistant_item({"content": f"step {n}", "tool_calls": [_call(f"call-{n}")]}),
            tool_result_item(f"call-{n}", "bash", f"file{n}.py\n", 0)]


def _same_keys(raw: Any, parsed: Any, where: str = "$") -> None:
    """Every key the server sent survived parsing, and the client invented none."""
    if isinstance(raw, dict):
        assert isinstance(parsed, dict) and set(raw) == set(parsed), f"{where}: {sorted(set(raw) ^ set(parsed))}"
        for key in raw:
            _same_keys(raw[key], parsed[key], f"{where}.{key}")
    elif isinstance(raw, list):
        assert isinstance(parsed, list) and len(raw) == len(parsed), where
        for i, (a, b) in enumerate(zip(raw, parsed, strict=True)):
            _same_keys(a, b, f"{where}[{i}]")


def _dump(value: Any) -> Any:
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def test_sync_client_drives_an_external_session(api_stack):
    with LanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        sid = lanes.create_session(mode="external", system_prompt="You are terse.").session_id
        first = lanes.step(sid, [user_item("list the files")])
        assert [m["role"] for m in first.request.messages] == ["system", "user"]
        appended = lanes.append_items(sid, [*_exchange(1), note_item("remember: tests first")])
        assert len(appended.item_ids) == 3 and not appended.repeated
        request = lanes.next_request(sid)
        assert request.messages[-1]["role"] in ("tool", "user", "system")
        lanes.begin_episode(sid, "ep-1", "exploration", "find the tests")
        assert lanes.episodes(sid).active == ["ep-1"]
        lanes.end_episode(sid, "ep-1", "they are under tests/")
        status = lanes.status(sid)
        assert isinstance(status, SessionStatus) and status.session_id == sid and not status.closed
        report = lanes.context(sid)
        assert isinstance(report, ContextReport) and report.episodes[0].status == "completed"
        every = list(lanes.iter_items(sid, page_size=2))  # paged by 2: three pages
        assert [i.kind for i in every] == ["system", "user", "assistant", "tool_result", "note"]
        assert [i.seq for i in every] == sorted(i.seq for i in every)
        assert [i.item_id for i in every] == [i.item_id for i in lanes.list_items(sid, limit=500).items]
        item = lanes.item(sid, every[1].item_id)
        assert item.text == "list the files"
        events = list(lanes.iter_events(sid, page_size=1))  # a page per event
        assert [e.kind for e in events if e.kind.startswith("episode.")] == ["episode.begun", "episode.ended"]
        assert len(events) > 2 and [e.id for e in events] == sorted({e.id for e in events})
        assert [e.id for e in events] == [e.id for e in lanes.events(sid, limit=1000).events]
        streamed = list(lanes.stream_events(sid, timeout=1.0))
        assert [e.id for e in streamed] == [e.id for e in events]
        assert lanes.health()["status"] == "ok" and lanes.ready().status == "ok"
        assert lanes.cancel_session(sid).action == "close"


async def test_async_client_drives_an_external_session(api_stack):
    async with AsyncLanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        sid = (await lanes.create_session(mode="external", system_prompt="You are terse.")).session_id
        await lanes.append_items(sid, [user_item("list the files")])
        stepped = await lanes.step(sid, _exchange(1))
        assert stepped.request.messages[-1] == {"role": "tool", "tool_call_id": "call-1", "content": "file1.py\n"}
        for n in range(3):  # six events: begun and ended per episode
            await lanes.begin_episode(sid, f"ep-{n}", "exploration", f"look {n}")
            await lanes.end_episode(sid, f"ep-{n}", f"found {n}")
        events = [e async for e in lanes.iter_events(sid, page_size=4)]
        assert [e.kind for e in events if e.kind.startswith("episode.")] == ["episode.begun", "episode.ended"] * 3
        assert [e.id for e in events] == [e.id for e in (await lanes.events(sid, limit=1000)).events]
        streamed = [e async for e in lanes.stream_events(sid, after=events[2].id, timeout=1.0)]
        assert [e.id for e in streamed] == [e.id for e in events[3:]]
        items = [i async for i in lanes.iter_items(sid, page_size=1)]
        assert [i.kind for i in items] == ["system", "user", "assistant", "tool_result"]
        report = await lanes.context(sid)
        assert {e.id for e in report.episodes} == {"ep-0", "ep-1", "ep-2"}
        assert (await lanes.status(sid)).session_id == sid


async def test_iter_sessions_pages_through_every_session(api_stack):
    async with AsyncLanesClient(api_stack.base_url, api_stack.token_b) as lanes:
        created = [(await lanes.create_session(mode="external")).session_id for _ in range(3)]
        listed = [s.session_id async for s in lanes.iter_sessions(page_size=1)]
    assert len(listed) == len(set(listed)) and set(created) <= set(listed)
    assert listed[: 3] == created[::-1]  # newest first
    with LanesClient(api_stack.base_url, api_stack.token_b) as sync:
        assert [s.session_id for s in sync.iter_sessions(page_size=2)] == listed


async def test_errors_are_typed(api_stack):
    async with AsyncLanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        with pytest.raises(NotFound) as missing:
            await lanes.get_session("ses-does-not-exist")
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        sid = (await lanes.create_session(mode="external")).session_id
        with pytest.raises(Conflict) as wrong_mode:
            await lanes.send_message(sid, "hosted only")
        assert wrong_mode.value.code == "wrong_mode"
        await lanes.append_items(sid, [user_item("one")], idempotency_key="key-1")
        with pytest.raises(Unprocessable) as reused:
            await lanes.append_items(sid, [user_item("two")], idempotency_key="key-1")
        assert reused.value.code == "idempotency_key_reused" and isinstance(reused.value, LanesAPIError)
    with LanesClient(api_stack.base_url, "not-a-token") as stranger, pytest.raises(AuthenticationError) as denied:
        stranger.list_sessions()
    assert denied.value.status == 401


async def test_every_answer_parses_without_losing_a_field(api_stack):
    """Raw JSON of the live server vs what the client's parser keeps: a field the server adds
    (or renames) without the client's wire model fails here."""
    async with AsyncLanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        sid = (await lanes.create_session(mode="external")).session_id
        await lanes.step(sid, [user_item("go")])
        await lanes.append_items(sid, _exchange(1))
        await lanes.begin_episode(sid, "ep-1", "exploration", "look around")
        item_id = (await lanes.list_items(sid)).items[0].item_id
    calls: list[api.Call[Any]] = [api.get_session(sid), api.status(sid), api.context(sid), api.episodes(sid), api.list_items(sid),
             api.events(sid), api.next_request(sid), api.item(sid, item_id), api.list_sessions(limit=2),
             api.subagents(sid)]
    headers = {"Authorization": f"Bearer {api_stack.token_a}"}
    with httpx.Client(base_url=api_stack.base_url, headers=headers, timeout=60) as http:
        for call in calls:
            raw = http.request(call.method, call.path, params=call.query).raise_for_status().json()
            _same_keys(raw, _dump(call.parse(raw)), call.path)


def test_a_client_without_a_token_reads_the_token_file_the_cli_reads(api_stack, tmp_path, monkeypatch):
    monkeypatch.delenv("LANES_API_TOKEN", raising=False)
    monkeypatch.setenv("LANES_DATA_DIR", str(tmp_path))
    (tmp_path / "api-token").write_text(api_stack.token_a + "\n")  # as the API writes it
    with LanesClient(api_stack.base_url) as lanes:
        assert isinstance(lanes.list_sessions(limit=1).sessions, list)
    (tmp_path / "api-token").write_text("token-that-the-api-never-issued\n")
    with LanesClient(api_stack.base_url) as lanes, pytest.raises(AuthenticationError) as refused:
        lanes.list_sessions(limit=1)
    assert f"the token file {tmp_path / 'api-token'}" in str(refused.value)  # says which file was read
    (tmp_path / "api-token").unlink()
    with LanesClient(api_stack.base_url) as lanes, pytest.raises(AuthenticationError) as missing:
        lanes.list_sessions(limit=1)
    assert f"the token file {tmp_path / 'api-token'} does not exist" in str(missing.value)
    monkeypatch.setenv("LANES_API_TOKEN", api_stack.token_a)  # the variable comes before the file
    with LanesClient(api_stack.base_url) as lanes:
        assert isinstance(lanes.list_sessions(limit=1).sessions, list)
