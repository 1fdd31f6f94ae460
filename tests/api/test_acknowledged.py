"""What the API acknowledged is stored, once, under the id it returned (issue 24, part 1).

The conflicts a lost workflow task left behind are made here directly: rows already at the
seqs the session hands out next, holding other content (what a step's local activity of
older code left when its workflow task was lost). A concurrent, killed and overloaded
version of all this is ``bench/external_chaos.py`` (its small run: tests/api/test_external_chaos.py).
"""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest

from lanes_client import LanesAPIError, assistant_item, tool_result_item, user_item
from tests.api.stack import replay_body


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


async def _rows(database_url: str, sid: str) -> dict[str, tuple[int, str]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT item_id, seq, content->'content'->>'text' AS text FROM items"
                                " WHERE session_id = $1 AND lane = 'main'", sid)
    finally:
        await conn.close()
    return {r["item_id"]: (r["seq"], r["text"]) for r in rows}


async def test_a_step_never_acknowledges_an_id_that_holds_other_content(client_a, database_url, store):
    sid = (await client_a.create_session(mode="external", system_prompt="You list files.")).session_id
    await client_a.step(sid, [user_item("list the files")])
    next_seq = (await client_a.status(sid)).next_seq
    # what a lost workflow task of older code left: rows (and an archived output) at the next seqs
    conn = await asyncpg.connect(database_url)
    try:
        for seq in (next_seq, next_seq + 1):
            await conn.execute(
                "INSERT INTO items (session_id, item_id, lane, seq, kind, role, content) VALUES"
                " ($1, $2, 'main', $3, 'user', 'user', $4::jsonb)", sid, f"itm-{seq:06d}", seq,
                f'{{"content": {{"text": "orphan {seq}"}}, "meta": {{}}}}')
    finally:
        await conn.close()
    before = await _rows(database_url, sid)
    step = await client_a.step(sid, [assistant_item({"content": "listing", "tool_calls": [_call("c-1")]}),
                                     tool_result_item("c-1", "bash", "a.py\nb.py\n", 0)])
    rows = await _rows(database_url, sid)
    assert [rows[i][1] for i in step.item_ids] == ["listing", "a.py\nb.py\n"]  # each id holds its own content
    assert all(rows[i][0] > next_seq + 1 for i in step.item_ids)  # stored past the taken seqs
    assert {k: v for k, v in rows.items() if k in before} == before  # the other rows untouched
    assert step.request.messages[-1] == {"role": "tool", "tool_call_id": "c-1", "content": "a.py\nb.py\n"}
    [result] = [i for i in (await client_a.list_items(sid, limit=100)).items if i.item_id == step.item_ids[1]]
    assert result.observation_id and (await store.read_observation(  # its archived output is its own too
        sid, result.observation_id.removeprefix("observation://"), 0, 100)).text == "a.py\nb.py\n"


async def test_a_message_sent_again_with_its_key_is_one_task(client_a, api_stack, trajectory, replay):
    sid = (await client_a.create_session(**replay_body(trajectory, replay))).session_id
    key = f"msg-{uuid.uuid4().hex}"
    first = await client_a.send_message(sid, "do the task", idempotency_key=key)
    again = await client_a.send_message(sid, "do the task", idempotency_key=key)
    assert again.task_id == first.task_id and again.repeated and not first.repeated
    with pytest.raises(LanesAPIError) as reused:
        await client_a.send_message(sid, "another task", idempotency_key=key)
    assert (reused.value.status, reused.value.code) == (422, "idempotency_key_reused")
    other = await client_a.send_message(sid, "do the task")  # a new call (the client's own new key)
    assert other.task_id != first.task_id and not other.repeated
    status = await client_a.status(sid)
    assert sorted(t.task_id for t in status.tasks) == sorted([first.task_id, other.task_id])
    async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=30,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        bad = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}, headers={"Idempotency-Key": "a b"})
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["error"]["message"]


async def test_a_step_whose_request_cannot_fit_says_its_items_were_stored(client_a, database_url):
    sid = (await client_a.create_session(mode="external", budget_tokens=1_000,
                                         system_prompt="rule " * 1_200)).session_id  # the prompt alone overflows
    with pytest.raises(LanesAPIError) as unfit:
        await client_a.step(sid, [user_item("hello")], step_id="s-1")
    assert (unfit.value.status, unfit.value.code) == (422, "request_unfit")
    [details] = unfit.value.details or [{}]
    rows = await _rows(database_url, sid)
    assert [rows[i][1] for i in details["item_ids"]] == ["hello"] and "stored" in unfit.value.message
    with pytest.raises(LanesAPIError) as again:  # sent again with its id: stored once, named again
        await client_a.step(sid, [user_item("hello")], step_id="s-1")
    assert again.value.details == unfit.value.details and await _rows(database_url, sid) == rows
