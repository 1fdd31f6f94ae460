"""``GET /context?all=true`` (issue 15, part 5, "the whole ledger"): every stored item of the
lane with its state, projection, tokens and the reason of its last transition, matching the
``items`` table row for row across pages, filterable by state, with counts; the default
``/context`` answer unchanged; bad parameters refused naming the parameter."""

from __future__ import annotations

from typing import get_args

import asyncpg
import httpx
import pytest

from lanes_client import AsyncLanesClient, LanesClient, assistant_item, tool_result_item, user_item
from lanes_client.schemas import ContextOut, LedgerEntry, LedgerState
from workflows.context import ContextReport, ids

LANES = [ids.MAIN_LANE, ids.generated_lane(ids.MAIN_LANE)]
PAGE = 5


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


async def session_with_archived_items(client: AsyncLanesClient) -> str:
    """An external session whose small budget made it archive its oldest exchanges."""
    sid = (await client.create_session(mode="external", budget_tokens=1_500)).session_id
    await client.step(sid, [user_item("read everything")])
    for n in range(12):
        await client.step(sid, [assistant_item({"content": "", "tool_calls": [_call(f"c{n}")]}),
                                tool_result_item(f"c{n}", "bash", f"line {n}\n" * 80, 0)])
    return sid


@pytest.fixture(scope="module")
async def archived_session(client_a) -> str:
    return await session_with_archived_items(client_a)


@pytest.fixture(scope="module")
async def http(api_stack):
    async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=60,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as client:
        yield client


async def _sql(api_settings, query: str, *args):
    connection = await asyncpg.connect(api_settings.database_url)
    try:
        return await connection.fetch(query, *args)
    finally:
        await connection.close()


async def _all_pages(client_a, sid: str, state: LedgerState | None = None) -> tuple[list[LedgerEntry], int]:
    """Every entry of ``/context?all=true``, following next_cursor; and how many pages it took."""
    entries: list[LedgerEntry] = []
    cursor, pages = None, 0
    while True:
        answer = await client_a.context(sid, all=True, state=state, cursor=cursor, limit=PAGE)
        assert answer.ledger is not None and len(answer.ledger.items) <= PAGE
        entries.extend(answer.ledger.items)
        pages += 1
        cursor = answer.ledger.next_cursor
        if cursor is None:
            return entries, pages


async def test_context_all_lists_every_stored_row_once_with_its_reason(client_a, api_settings, archived_session):
    sid = archived_session
    entries, pages = await _all_pages(client_a, sid)
    rows = await _sql(api_settings, "SELECT item_id, lane, seq, kind, role FROM items"
                                    " WHERE session_id = $1 AND lane = ANY($2::text[]) ORDER BY lane, seq", sid, LANES)
    assert pages == -(-len(rows) // PAGE) > 2
    assert [(e.item_id, e.lane, e.seq, e.kind, e.role) for e in entries] == [tuple(r) for r in rows]  # row for row

    events = await _sql(api_settings, "SELECT payload->>'item_id' AS item_id, payload->>'reason' AS reason FROM events"
                                      " WHERE session_id = $1 AND lane = $2 AND kind = 'item.archived' ORDER BY id",
                        sid, ids.events_lane(ids.MAIN_LANE))
    left = {e["item_id"]: e["reason"] for e in events}  # the last archival of each item wins
    answer = await client_a.context(sid, all=True, limit=1)
    working = {i.id: i for i in answer.items}
    archived = [e for e in entries if e.state == "archived"]
    assert archived and all(e.reason for e in entries)
    for entry in entries:
        if entry.item_id in working:
            item = working[entry.item_id]
            assert entry.in_working_set and (entry.state, entry.projection, entry.tokens, entry.reason) == (
                item.lifecycle, item.projection, item.tokens, item.reason)
        else:
            assert not entry.in_working_set and entry.tokens == 0 and entry.reason == left[entry.item_id], entry
            assert entry.full_tokens > 0

    assert answer.ledger is not None
    counts = answer.ledger.counts
    observations = await _sql(api_settings, "SELECT count(*) FROM observations WHERE session_id = $1", sid)
    assert (counts.history, counts.working_set, counts.archived, counts.observations) == (
        len(rows), len(working), len(archived), observations[0][0])
    assert counts.by_state == {**answer.count_by_lifecycle, "archived": len(archived)}


async def test_the_state_filter_keeps_one_state_across_pages(client_a, archived_session):
    everything, _ = await _all_pages(client_a, archived_session)
    seen = set()
    for state in get_args(LedgerState):
        only, _ = await _all_pages(client_a, archived_session, state)
        assert [e.item_id for e in only] == [e.item_id for e in everything if e.state == state]
        seen |= {state} if only else set()
    assert {"pinned", "archived"} <= seen  # the filter was seen to keep rows, not only to drop them


async def test_the_default_answer_is_the_report_alone_and_ledger_pages_are_the_same(client_a, http, archived_session):
    sid = archived_session
    plain = await http.get(f"/v1/sessions/{sid}/context")
    assert plain.status_code == 200, plain.text
    assert set(plain.json()) == set(ContextReport.model_fields)  # no ledger key: today's answer
    with_ledger = (await http.get(f"/v1/sessions/{sid}/context", params={"all": "true", "limit": PAGE})).json()
    assert {k: v for k, v in with_ledger.items() if k != "ledger"} == plain.json()  # a quiet session: one report
    ledger = (await http.get(f"/v1/sessions/{sid}/ledger", params={"limit": PAGE})).json()
    assert with_ledger["ledger"] == ledger  # one implementation behind both
    assert (await client_a.context(sid)).ledger is None


@pytest.mark.parametrize(("params", "status", "named"), [
    ({"state": "pinned"}, 422, "state"),
    ({"cursor": "main/3"}, 422, "cursor"),
    ({"limit": 5}, 422, "limit"),
    ({"all": "true", "cursor": "not a cursor"}, 400, "cursor"),
    ({"all": "true", "limit": 0}, 422, "limit"),
    ({"all": "true", "limit": 1001}, 422, "limit"),
    ({"all": "true", "state": "evicted"}, 422, "state"),
    ({"all": "maybe"}, 422, "all"),
])
async def test_bad_parameters_are_refused_naming_them(http, archived_session, params, status, named):
    refused = await http.get(f"/v1/sessions/{archived_session}/context", params=params)
    assert refused.status_code == status, refused.text
    assert named in refused.json()["error"]["message"]


def test_the_sync_client_reads_a_ledger_page_and_refuses_a_filter_without_all(api_stack, archived_session):
    with LanesClient(api_stack.base_url, api_stack.token_a) as lanes:
        answer = lanes.context(archived_session, all=True, state="archived", limit=2)
        assert isinstance(answer, ContextOut) and answer.ledger is not None
        assert [e.state for e in answer.ledger.items] == ["archived", "archived"]
        assert answer.ledger.next_cursor is not None
        with pytest.raises(ValueError, match="all=True"):
            lanes.context(archived_session, state="archived")


async def test_openapi_describes_the_all_parameter_and_the_ledger(http):
    spec = (await http.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/sessions/{session_id}/context"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"all", "state", "cursor", "limit"}
    assert "every item the store holds" in operation["description"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert "ledger" in spec["components"]["schemas"][schema]["properties"]
