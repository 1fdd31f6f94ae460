"""External agents for the long haul (issue 14): one round trip per step, sessions that
continue as new under a client without it noticing, and nothing that vanishes silently.

Every refusal here is a 4xx naming what was wrong, and leaves the stored raw history
(``GET /items``) exactly as it was.
"""

from __future__ import annotations

import httpx
import pytest

from activities.metrics import REGISTRY
from lanes_client import LanesAPIError, assistant_item, tool_result_item, user_item


def _call(call_id: str, command: str = "ls") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "{command}"}}'}}


def _exchange(n: int) -> list[dict]:
    return [assistant_item({"content": f"step {n}", "tool_calls": [_call(f"call-{n}")]}),
            tool_result_item(f"call-{n}", "bash", f"file{n}.py\n", 0)]


async def _raw(client, sid: str) -> list[tuple]:
    """The whole stored history, page by page."""
    rows, after = [], -1
    while True:
        page = await client.list_items(sid, after_seq=after, limit=7)
        rows += [(i.item_id, i.seq, i.kind, i.text) for i in page.items]
        if page.next_after_seq is None:
            return rows
        after = page.next_after_seq


async def refused(call, status: int, code: str, *words: str) -> LanesAPIError:
    """The typed API error ``call`` raises, checked for its status, code and message words."""
    with pytest.raises(LanesAPIError) as raised:
        await call
    assert (raised.value.status, raised.value.code) == (status, code), raised.value
    for word in words:
        assert word in raised.value.message, raised.value.message
    return raised.value


async def test_one_call_per_step_appends_and_returns_the_next_request(client_a):
    sid = (await client_a.create_session(mode="external", system_prompt="You are terse.")).session_id
    first = await client_a.step(sid, [user_item("list the files")], step_id="s-1")
    assert len(first.item_ids) == 1 and not first.repeated
    assert [m["role"] for m in first.request.messages] == ["system", "user"]
    second = await client_a.step(sid, _exchange(1), step_id="s-2")
    assert second.request.messages[-1] == {"role": "tool", "tool_call_id": "call-1", "content": "file1.py\n"}
    assert second.request.messages[: len(first.request.messages)] == first.request.messages
    # a retried step (the answer was lost) stores nothing again and answers the same items
    before = await _raw(client_a, sid)
    again = await client_a.step(sid, _exchange(1), step_id="s-2")
    assert again.item_ids == second.item_ids and again.repeated and not second.repeated
    assert await _raw(client_a, sid) == before
    # the same step id for another body is refused, naming the id
    await refused(client_a.step(sid, _exchange(2), step_id="s-2"), 422, "idempotency_key_reused", "s-2")
    assert await _raw(client_a, sid) == before
    # no items: just the next request
    empty = await client_a.step(sid)
    assert empty.item_ids == [] and empty.request.messages == second.request.messages


async def test_an_idempotency_key_reused_for_another_body_is_refused(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    first = await client_a.append_items(sid, [user_item("hello")], idempotency_key="k-1")
    same = await client_a.append_items(sid, [user_item("hello")], idempotency_key="k-1")
    assert same.item_ids == first.item_ids and same.repeated and not first.repeated
    before = await _raw(client_a, sid)
    await refused(client_a.append_items(sid, [user_item("something else")], idempotency_key="k-1"),
                   422, "idempotency_key_reused", "k-1")
    big = "x" * 20_000  # stored by reference: still compared by its text
    await client_a.append_items(sid, [{"kind": "user", "text": big}], idempotency_key="k-2")
    await refused(client_a.append_items(sid, [{"kind": "user", "text": big + "y"}], idempotency_key="k-2"),
                   422, "idempotency_key_reused")
    assert len(await _raw(client_a, sid)) == len(before) + 1


async def test_tool_calls_and_results_must_pair_or_the_call_is_refused(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    await client_a.append_items(sid, [user_item("go")])
    before = await _raw(client_a, sid)
    await refused(client_a.append_items(sid, [tool_result_item("ghost", "bash", "out", 0)]),
                   422, "unpaired_tool_call", "ghost")
    await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [_call("c1"), _call("c2")]})])
    answered = await _raw(client_a, sid)
    assert len(answered) == len(before) + 1
    # the next turn cannot start while a call has no result; nor can a result answer it twice
    await refused(client_a.append_items(sid, [tool_result_item("c1", "bash", "a", 0), user_item("next")]),
                   422, "unpaired_tool_call", "c2")
    await refused(client_a.append_items(sid, [tool_result_item("c1", "bash", "a", 0),
                                                tool_result_item("c1", "bash", "a", 0)]),
                   422, "unpaired_tool_call", "c1")
    await refused(client_a.step(sid, [assistant_item({"content": "again", "tool_calls": []})]),
                   422, "unpaired_tool_call", "c1")
    assert await _raw(client_a, sid) == answered
    done = await client_a.step(sid, [tool_result_item("c1", "bash", "a", 0), tool_result_item("c2", "bash", "b", 0)])
    assert [m["role"] for m in done.request.messages][-3:] == ["assistant", "tool", "tool"]


async def test_the_raw_history_lists_every_stored_item_even_after_compaction(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=1_500)).session_id
    await client_a.step(sid, [user_item("read everything")])
    for n in range(12):
        await client_a.step(sid, [assistant_item({"content": "", "tool_calls": [_call(f"c{n}")]}),
                                  tool_result_item(f"c{n}", "bash", f"line {n}\n" * 80, 0)])
    report = await client_a.context(sid)
    assert report.compactions > 0  # the working set let go of the oldest exchanges
    raw = await _raw(client_a, sid)
    appended = [r for r in raw if r[2] in ("user", "assistant", "tool_result")]
    assert len(appended) == 1 + 12 * 2 and [r[1] for r in raw] == sorted(r[1] for r in raw)
    assert len({r[0] for r in raw}) == len(raw)
    outputs = [r[3] for r in raw if r[2] == "tool_result"]
    assert outputs == [f"line {n}\n" * 80 for n in range(12)]  # exact, archived or not


async def test_sessions_continue_as_new_under_a_client_that_does_not_notice(client_a, api_stack, temporal_client):
    sid = (await client_a.create_session(mode="external", updates_per_run=10, budget_tokens=3_000)).session_id
    await client_a.step(sid, [user_item("a long task")], step_id="0")
    for n in range(1, 61):  # 60 steps at 10 calls per run: at least five hand-overs
        out = await client_a.step(sid, _exchange(n), step_id=str(n))
        assert out.request.fits and len(out.item_ids) == 2
        if n % 20 == 0:  # the two-call form too
            await client_a.append_items(sid, [{"kind": "note", "text": f"note {n}"}], idempotency_key=f"note-{n}")
            assert (await client_a.next_request(sid)).fits
    runs = [r async for r in temporal_client.list_workflows(f'WorkflowId = "{sid}"')]
    assert len(runs) >= 6
    raw = await _raw(client_a, sid)
    assert len([r for r in raw if r[2] == "tool_result"]) == 60 and len({r[0] for r in raw}) == len(raw)
    # a step retried after a hand-over still finds its items (the key survived continue-as-new:
    # Temporal's own deduplication of an update id holds within one run only)
    again = await client_a.step(sid, _exchange(30), step_id="30")
    assert again.repeated and len(again.item_ids) == 2 and await _raw(client_a, sid) == raw
    # also a step of tool results only: checked again, its result would pair with itself
    await client_a.step(sid, [assistant_item({"content": "", "tool_calls": [_call("late")]})], step_id="late-call")
    answered = await client_a.step(sid, [tool_result_item("late", "bash", "late output", 0)], step_id="late-result")
    for n in range(61, 73):  # past the next hand-over
        await client_a.step(sid, _exchange(n), step_id=str(n))
    assert len([r async for r in temporal_client.list_workflows(f'WorkflowId = "{sid}"')]) > len(runs)
    raw = await _raw(client_a, sid)
    retried = await client_a.step(sid, [tool_result_item("late", "bash", "late output", 0)], step_id="late-result")
    assert retried.repeated and retried.item_ids == answered.item_ids and await _raw(client_a, sid) == raw
    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        assert (await http.get(f"/v1/sessions/{sid}/status")).status_code == 200


async def test_reported_usage_gives_totals_cost_and_a_calibrated_budget(client_a, api_stack):
    """An agent reporting its provider's counts with each step (1.3× ours): the session's
    totals are their sum, the ratio converges on 1.3 and the budget is planned against it;
    a retried step is counted once, and bad counts are refused naming the field."""
    budget = 6_000
    sid = (await client_a.create_session(mode="external", model="ext-usage", budget_tokens=budget, updates_per_run=10,
                                         prices={"ext-usage": {"input": 2.0, "cached_input": 0.5, "output": 8.0}})
           ).session_id
    step = await client_a.step(sid, [user_item("walk the tree")], step_id="u-0")
    sent: list[tuple[int, int, int]] = []
    for n in range(1, 15):  # more steps than a run takes: the totals go on across continue-as-new
        prompt = round(step.request.token_estimate * 1.3)
        counts = (prompt, prompt // 2, 40)
        sent.append(counts)
        usage = {"prompt_tokens": counts[0], "cached_tokens": counts[1], "completion_tokens": counts[2]}
        step = await client_a.step(sid, _exchange(n), step_id=f"u-{n}", usage=usage)
        if n == 3:  # the answer was lost: the retry is not counted again
            again = await client_a.step(sid, _exchange(n), step_id=f"u-{n}", usage=usage)
            assert again.item_ids == step.item_ids
    usage = (await client_a.status(sid)).usage
    assert (usage.prompt, usage.cached, usage.completion, usage.calls) == (
        sum(p for p, _, _ in sent), sum(c for _, c, _ in sent), sum(o for _, _, o in sent), len(sent))
    expected_cost = sum(((p - c) * 2.0 + c * 0.5 + o * 8.0) / 1_000_000 for p, c, o in sent)
    assert usage.cost == pytest.approx(expected_cost)
    assert usage.by_kind["agent"].calls == len(sent)
    calibration = usage.calibration["ext-usage"]
    assert calibration.samples == len(sent) and calibration.ratio == pytest.approx(1.3, abs=0.01)
    assert step.request.budget <= int(budget / calibration.ratio)  # planned against budget / ratio
    events = [e async for e in client_a.iter_events(sid) if e.kind == "model.usage"]
    assert [e.payload["prompt"] for e in events] == [p for p, _, _ in sent]
    # the (in-process) worker that wrote the events counted them in its metrics
    for kind, index in (("prompt", 0), ("cached", 1), ("completion", 2)):
        counted = REGISTRY.get_sample_value("lanes_model_tokens_total",
                                            {"purpose": "agent", "model": "ext-usage", "type": kind})
        assert counted == sum(counts[index] for counts in sent), kind

    async with httpx.AsyncClient(base_url=api_stack.base_url, timeout=30,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as raw:
        for bad, field in (({"prompt_tokens": -1}, "prompt_tokens"),
                           ({"prompt_tokens": 10, "cached_tokens": 11}, "cached_tokens"),
                           ({"cached_tokens": 1}, "prompt_tokens")):
            answer = await raw.post(f"/v1/sessions/{sid}/steps", json={"items": [], "usage": bad})
            assert answer.status_code == 422 and field in answer.text, answer.text
    assert (await client_a.status(sid)).usage.calls == len(sent)
