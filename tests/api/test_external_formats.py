"""Items in and requests out in the providers' formats (issue 14, part 4), on the real stack:
Responses API items appended verbatim with their reasoning, the next request as Chat
Completions messages, Responses input or an Anthropic Messages request."""

from __future__ import annotations

import json

import httpx
import pytest

from lanes_client.client import LanesAPIError, assistant_item, user_item


def _reasoning(n: int) -> dict:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": f"plan {n}"}],
            "encrypted_content": f"gAAAAB{n}" + "q" * 600, "status": None}


def _call(n: int, k: int = 0) -> dict:
    return {"type": "function_call", "id": f"fc_{n}_{k}", "call_id": f"call_{n}_{k}", "name": "bash",
            "arguments": json.dumps({"command": f"cat part{n}.txt"}), "status": "completed"}


def _output(n: int, k: int = 0, size: int = 40) -> dict:
    return {"type": "function_call_output", "call_id": f"call_{n}_{k}", "output": f"part {n}\n" * size}


def _turn(n: int, size: int = 40) -> list[dict]:
    return [_reasoning(n), _call(n), _output(n, size=size)]


async def _raw(client, sid: str) -> list:
    page = await client.list_items(sid, limit=500)
    return [i.model_dump() for i in page.items]


async def test_responses_items_in_and_the_request_in_every_format(client_a):
    sid = (await client_a.create_session(mode="external", system_prompt="You are terse.")).session_id
    items = [{"role": "user", "content": "summarise the parts"}, *_turn(1), *_turn(2),
             _reasoning(3), {"type": "message", "id": "msg_3", "role": "assistant", "status": "completed",
                             "content": [{"type": "output_text", "text": "Two parts.", "annotations": []}]},
             {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]
    appended = await client_a.append_items(sid, responses_items=items)
    # user, (reasoning + call), output, (reasoning + call), output, (reasoning + answer), user
    assert len(appended.item_ids) == 7
    stored = await _raw(client_a, sid)
    assert [i["kind"] for i in stored[-7:]] == ["user", "assistant", "tool_result", "assistant", "tool_result",
                                                "assistant", "user"]
    assert stored[-6]["responses_items"] == items[1:3]  # verbatim, reasoning with the turn it precedes
    assert stored[-6]["tool_calls"][0]["id"] == "call_1_0"

    responses = await client_a.next_request(sid, format="responses")
    assert responses.format == "responses" and responses.instructions == "You are terse."
    assert responses.messages == []
    assert responses.input[1:] == items[1:-1] + [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]
    assert responses.tokenizer.startswith("cl100k_base")

    chat = await client_a.next_request(sid)
    assert [m["role"] for m in chat.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                  "assistant", "user"]
    assert "gAAAAB" not in json.dumps(chat.messages)  # OpenAI's reasoning has no chat form
    names = [t["function"]["name"] for t in chat.tools]
    assert [(t["type"], t["name"], t["strict"]) for t in responses.tools] == [("function", n, False) for n in names]
    assert chat.token_estimate == responses.token_estimate  # one count: the same text in every format

    anthropic = await client_a.next_request(sid, format="anthropic")
    assert anthropic.system[0]["text"] == "You are terse."
    assert [m["role"] for m in anthropic.messages] == ["user", "assistant", "user", "assistant", "user",
                                                       "assistant", "user"]
    assert anthropic.messages[1]["content"] == [{"type": "tool_use", "id": "call_1_0", "name": "bash",
                                                 "input": {"command": "cat part1.txt"}}]
    assert anthropic.messages[2]["content"][0]["tool_use_id"] == "call_1_0"
    assert anthropic.cache_breakpoints[-1] == len(chat.messages) - 1
    assert [t["name"] for t in anthropic.tools] == names and all("input_schema" in t for t in anthropic.tools)
    marked = [b for m in anthropic.messages for b in m["content"] if "cache_control" in b]
    assert marked and marked[-1]["text"] == "thanks"


async def test_reasoning_content_is_passed_back_in_chat_and_a_step_answers_in_the_format_asked(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    answer = assistant_item({"content": "42"}).model_copy(update={"reasoning_content": "6 times 7 is 42"})
    await client_a.step(sid, [user_item("6*7?"), answer])
    chat = await client_a.next_request(sid)
    assert chat.messages[-1] == {"role": "assistant", "content": "42", "reasoning_content": "6 times 7 is 42"}
    assert (await _raw(client_a, sid))[-1]["reasoning_content"] == "6 times 7 is 42"
    step = await client_a.step(sid, responses_items=[{"role": "user", "content": "and 7*8?"}], format="anthropic")
    assert step.request.format == "anthropic" and step.request.messages[-1]["role"] == "user"
    assert "6 times 7" not in json.dumps(step.request.messages)


async def test_reasoning_passes_back_while_its_turn_is_kept_and_goes_with_it_when_compacted(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000)).session_id
    await client_a.step(sid, responses_items=[{"role": "user", "content": "read every part"}])
    for n in range(1, 13):
        out = await client_a.step(sid, responses_items=_turn(n, size=60), format="responses")
        assert out.request.fits
    request = out.request
    assert (await client_a.context(sid)).compactions > 0
    sent = [i for i in request.input if i.get("type") == "reasoning"]
    assert _reasoning(12) in sent  # the newest turn is whole: its reasoning goes back verbatim
    assert _reasoning(1) not in sent  # the first turn was compacted: its reasoning is not sent
    for index, item in enumerate(request.input):  # passed back right before its own call
        if item.get("type") == "reasoning":
            n = int(item["id"].split("_")[1])
            assert request.input[index + 1] == _call(n)
    calls = [i["call_id"] for i in request.input if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in request.input if i.get("type") == "function_call_output"]
    assert calls == outputs  # paired, in every format
    # the raw history keeps every item verbatim, compacted or not
    stored = await _raw(client_a, sid)
    kept = [s for i in stored for s in i["responses_items"]]
    assert [s for s in kept if s.get("type") == "reasoning"] == [_reasoning(n) for n in range(1, 13)]


@pytest.mark.parametrize("body,words", [
    ({"responses_items": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]},
     ["responses_items.0", "web_search_call"]),
    ({"responses_items": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
     ["responses_items.0", "input_image"]),
    ({"responses_items": [{"type": "function_call", "name": "bash", "arguments": "{}"}]},
     ["responses_items.0", "call_id"]),
    ({"responses_items": [{"role": "tool", "content": "x"}]}, ["responses_items.0", "role"]),
    ({"items": [{"kind": "user", "text": "hi", "reasoning_content": "no"}]}, ["assistant item"]),
    ({"items": [{"kind": "user", "text": "hi"}], "responses_items": [{"role": "user", "content": "hi"}]},
     ["items or responses_items"]),
    ({}, ["items or responses_items"]),
    ({"responses_items": [{"type": "function_call_output", "call_id": "nobody", "output": "x"}]},
     ["nobody"]),
])
async def test_bad_items_are_refused_naming_what_is_wrong_and_change_nothing(client_a, api_stack, body, words):
    sid = (await client_a.create_session(mode="external")).session_id
    await client_a.append_items(sid, responses_items=[{"role": "user", "content": "start"}])
    before = await _raw(client_a, sid)
    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        response = await http.post(f"/v1/sessions/{sid}/items", json=body)
    assert response.status_code in (400, 422), response.text
    for word in words:
        assert word in response.json()["error"]["message"], response.text
    assert await _raw(client_a, sid) == before


async def test_an_unknown_format_is_refused(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    with pytest.raises(LanesAPIError) as raised:
        await client_a.next_request(sid, format="gemini")
    assert raised.value.status == 422 and "format" in raised.value.message
