"""An external agent's own world (issue 14, parts 3 and 5): its tool definitions rendered and
charged, no prompt of ours, placeholders that never name a tool it lacks, client item ids,
and texts Lanes writes that do not read as user turns.

Every refusal is a 4xx naming what was wrong and leaves the stored raw history as it was.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from activities.tokens import count_tool_definitions
from lanes_client import assistant_item, tool_result_item
from tests.api.test_external_steps import refused

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
RECALL = {"type": "function", "function": {
    "name": "recall_observation", "description": "Read an archived range.",
    "parameters": {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}}}


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat log"}'}}


def _big_exchange(n: int, chars: int = 12_000) -> list:
    """A call whose output is far over the item bound of a small budget: it enters bounded."""
    lines = "".join(f"line {i} of output {n}: {'x' * 40}\n" for i in range(chars // 60))
    return [assistant_item({"content": f"reading log {n}", "tool_calls": [_call(f"c{n}")]}),
            tool_result_item(f"c{n}", "bash", lines, 0)]


async def _raw(client, sid: str) -> list[tuple]:
    page = await client.list_items(sid, limit=500)
    assert page.next_after_seq is None
    return [(i.item_id, i.kind, i.text, i.client_id) for i in page.items]


async def test_the_agents_own_tools_are_rendered_and_charged_with_no_prompt_of_ours(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=3_000, tool_definitions=[BASH])).session_id
    steps = [await client_a.step(sid, [{"kind": "user", "text": "Summarise the logs."}])]
    report = await client_a.context(sid)
    assert report.tool_definition_tokens == count_tool_definitions([BASH], steps[0].request.model) > 0
    for n in range(4):
        steps.append(await client_a.step(sid, _big_exchange(n)))
    request = steps[-1].request
    # each step's request is in the event log for the inspector's timeline, once
    samples = [e for e in (await client_a.events(sid, limit=1000)).events if e.kind == "context.request"]
    assert [e.payload["request_tokens"] for e in samples] == [s.request.plan_tokens for s in steps]
    assert request.tools == [BASH]  # exactly the agent's definitions, none of the catalog's
    assert all(m["role"] != "system" or "careful software engineering" not in m["content"] for m in request.messages)
    assert request.messages[0] == {"role": "user", "content": "Summarise the logs."}
    assert request.fits and request.token_estimate <= request.budget + report.tool_definition_tokens
    # Bounded outputs say how to read the rest: the API's recall endpoint, never a tool it lacks.
    text = "\n".join(str(m.get("content") or "") for m in request.messages)
    assert "recall_observation" not in text
    assert "GET /v1/sessions/{session}/observations/{obs-id}?offset=&limit=" in text
    # and that endpoint does give the omitted text back
    address = re.search(r"observation://(obs-[A-Za-z0-9_.-]+)\?offset=(\d+)&limit=(\d+)", text)
    assert address is not None, text
    offset = int(address.group(2))
    recalled = await client_a.read_observation(sid, address.group(1), offset=offset, limit=200)
    outputs = [text for _, kind, text, _ in await _raw(client_a, sid) if kind == "tool_result"]
    assert any(recalled.text == output[offset:offset + 200] for output in outputs) and len(recalled.text) == 200


async def test_a_declared_recall_tool_is_named_in_placeholders(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=3_000, tool_definitions=[BASH, RECALL],
                                         system_prompt="You read logs.")).session_id
    await client_a.step(sid, [{"kind": "user", "text": "Summarise the logs."}])
    request = (await client_a.step(sid, _big_exchange(0))).request
    assert request.messages[0] == {"role": "system", "content": "You read logs."}
    text = "\n".join(str(m.get("content") or "") for m in request.messages)
    assert "recall_observation(address, offset, limit)" in text and "/observations/" not in text


async def test_bad_tool_declarations_are_refused_and_create_nothing(client_a):
    before = len((await client_a.list_sessions(limit=500)).sessions)
    await refused(client_a.create_session(mode="hosted", tool_definitions=[BASH]), 422, "invalid",
                   "external sessions")
    await refused(client_a.create_session(mode="external", tool_definitions=[BASH, BASH]), 422, "invalid",
                   "'bash'", "tool_definitions[1]")
    await refused(client_a.create_session(mode="external", tools="recall", tool_definitions=[RECALL]), 422,
                   "invalid", "'recall_observation'", "by tools")
    await refused(client_a.create_session(mode="external", recall="tool", tool_definitions=[BASH]), 422,
                   "invalid", "recall 'tool' needs a tool named 'recall_observation'")
    await refused(client_a.create_session(mode="hosted", recall="endpoint"), 422, "invalid", "hosted")
    bad_name = {"type": "function", "function": {"name": "no spaces allowed"}}
    await refused(client_a.create_session(mode="external", tool_definitions=[bad_name]), 422, "invalid", "name")
    assert len((await client_a.list_sessions(limit=500)).sessions) == before


async def test_client_item_ids_store_an_item_once_and_refuse_other_content(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    first = await client_a.append_items(sid, [{"kind": "user", "text": "hello", "item_id": "u-1"}])
    # the same text again under another id is another message (nothing collapses by content)
    second = await client_a.append_items(sid, [{"kind": "user", "text": "hello", "item_id": "u-2"}])
    assert first.item_ids != second.item_ids
    raw = await _raw(client_a, sid)
    assert [(kind, text, cid) for _, kind, text, cid in raw] == [("user", "hello", "u-1"), ("user", "hello", "u-2")]

    # resending a known item (a framework that sends its whole history) stores only what is new
    again = await client_a.append_items(sid, [{"kind": "user", "text": "hello", "item_id": "u-2"},
                                              {"kind": "note", "text": "new note", "item_id": "n-1"}])
    assert again.already_stored == ["u-2"] and again.item_ids[0] == second.item_ids[0]
    assert len(await _raw(client_a, sid)) == 3
    resent = await client_a.append_items(sid, [{"kind": "user", "text": "hello", "item_id": "u-1"}])
    assert resent.already_stored == ["u-1"] and resent.item_ids == first.item_ids and resent.repeated

    # a retried step mixing an item stored before it, one it stored and one without a client id
    # answers the same ids in the same places
    mixed = [{"kind": "user", "text": "hello", "item_id": "u-1"}, {"kind": "note", "text": "m", "item_id": "m-1"},
             {"kind": "note", "text": "plain"}]
    stepped = await client_a.step(sid, mixed, step_id="mixed")
    assert stepped.item_ids[0] == first.item_ids[0] and len(set(stepped.item_ids)) == 3
    retried = await client_a.step(sid, mixed, step_id="mixed")
    assert retried.repeated and retried.item_ids == stepped.item_ids

    stored = await _raw(client_a, sid)
    await refused(client_a.append_items(sid, [{"kind": "user", "text": "changed", "item_id": "u-1"}]), 409,
                   "item_id_conflict", "'u-1'", first.item_ids[0])
    await refused(client_a.step(sid, [{"kind": "note", "text": "a", "item_id": "n-9"},
                                       {"kind": "note", "text": "b", "item_id": "n-9"}]), 422, "invalid", "'n-9'")
    assert await _raw(client_a, sid) == stored


async def test_two_calls_racing_with_one_new_item_id_store_one_item(client_a, api_stack):
    sid = (await client_a.create_session(mode="external")).session_id
    async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=60,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        responses = await asyncio.gather(*(
            http.post(f"/v1/sessions/{sid}/items", json={"items": [{"kind": "note", "text": f"version {n}",
                                                                    "item_id": "race"}]})
            for n in range(4)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409], [r.text for r in responses]
    assert all(r.json()["error"]["code"] == "item_id_conflict" for r in responses if r.status_code == 409)
    raw = await _raw(client_a, sid)
    assert [cid for *_, cid in raw] == ["race"]


@pytest.mark.parametrize("declared, role", [(None, "system"), ("user", "user")])
async def test_the_checkpoint_does_not_read_as_a_user_turn(client_a, declared, role):
    body = {"generated_role": declared} if declared else {}
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000, tool_definitions=[BASH],
                                         **body)).session_id
    await client_a.step(sid, [{"kind": "user", "text": "Summarise the logs."}])
    for n in range(12):
        request = (await client_a.step(sid, _big_exchange(n, chars=3_000))).request
    checkpoints = [m for m in request.messages if str(m.get("content", "")).startswith("[Context checkpoint]")]
    assert len(checkpoints) == 1, [m["role"] for m in request.messages]
    assert checkpoints[0]["role"] == role
    assert "recall_observation" not in checkpoints[0]["content"] and "/observations/" in checkpoints[0]["content"]
