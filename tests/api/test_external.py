"""External-agent mode through the API: an agent loop that runs outside the worker appends
items, asks for the next request, marks episodes and condenses."""

from __future__ import annotations

import httpx
import openai
import pytest

from lanes_client import LanesAPIError, assistant_item, tool_result_item, user_item
from recordings import recorded_outputs
from tests.api.stack import replay_body
from tests.integration.support import comparable, twin_session_ids
from workflows.context import INLINE_TEXT_LIMIT
from workflows.contract.tools import REPLAY_TOOLS, tool_specs

BUDGET = 4_000  # small enough that the recording forces compactions


async def drive_external_agent(client, session_id: str, trajectory, replay) -> int:
    """The recorded agent, turn by turn: GET /request -> the model -> POST /items (its answer and
    the tool outputs). The model is the replay server, called with the exact request the API built."""
    model = openai.AsyncOpenAI(base_url=replay.base_url, api_key="unused", max_retries=0)
    outputs = recorded_outputs(trajectory)
    await client.append_items(session_id, [user_item(trajectory.task)])
    turn = kept_prefix = 0
    previous = None
    while True:
        request = await client.next_request(session_id)
        assert request.fits, request.reason
        if previous is not None and request.entries[: len(previous.entries)] == previous.entries:
            # no compaction in between: the plan only grew at its end, so must the bytes sent
            # (provider prompt caches keep hitting)
            assert request.messages[: len(previous.messages)] == previous.messages
            kept_prefix += 1
        previous = request
        completion = await model.chat.completions.create(
            model=request.model, messages=request.messages, tools=request.tools,
            extra_headers={"X-Lanes-Trajectory": trajectory.id, "X-Lanes-Turn": str(turn)})
        message = completion.choices[0].message
        items = [assistant_item(message)]
        for call in message.tool_calls or ():
            recorded = outputs[call.id]
            exit_code = recorded.exit_code if recorded.exit_code is not None else 0
            items.append(tool_result_item(call.id, call.function.name, recorded.output, exit_code,
                                          role=recorded.render_role))
        await client.append_items(session_id, items)
        turn += 1
        if not message.tool_calls:
            await model.close()
            assert kept_prefix >= turn // 2
            assert previous.stable_prefix_messages > 0 and previous.stable_prefix_tokens > 0  # after compactions
            return turn


async def test_external_agent_ends_with_the_context_hosted_mode_produces(client_a, trajectory, replay, monkeypatch):
    # twin session ids: with ids of other shapes the two sessions' addresses count other tokens,
    # and a compaction decided on a token's margin could differ for that reason alone
    twins = iter(twin_session_ids())
    monkeypatch.setattr("worker.api.routes.new_session_id", lambda prefix="ses": next(twins))
    hosted = await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=BUDGET))
    assert hosted.session_id.endswith("-0001")
    task = await client_a.send_message(hosted.session_id, trajectory.task)
    status = await client_a.wait_task(hosted.session_id, task.task_id, timeout=120)
    hosted_report = await client_a.context(hosted.session_id)
    assert hosted_report.compactions >= 2

    # The external agent declares the tools the replayed one had (bash + recall): the same budget.
    external = await client_a.create_session(mode="external", model="replay", budget_tokens=BUDGET,
                                             tool_definitions=tool_specs(REPLAY_TOOLS),
                                             system_prompt=trajectory.system or "You are a helpful assistant.")
    sid = external.session_id
    turns = await drive_external_agent(client_a, sid, trajectory, replay)
    assert turns == status.tasks[0].turns
    # A hosted task ends when the model answers without tool calls; an external task ends when
    # the agent's next user message begins the next one.
    answered = await client_a.status(sid)  # its turns counted as the hosted task's, and it has answered
    assert (answered.turns, answered.tasks[0].turns, answered.tasks[0].state) == (turns, turns, "completed")
    await client_a.append_items(sid, [user_item("next task")])
    following = (await client_a.status(sid)).tasks
    assert [(t.state, t.turns) for t in following] == [("completed", turns), ("running", 0)]
    report = await client_a.context(sid)
    assert report.budget == hosted_report.budget

    newest = max(report.items, key=lambda i: i.seq)
    assert newest.kind == "user" and newest.lifecycle == "pinned"
    report.items.remove(newest)
    report.working_set_tokens -= newest.tokens
    assert comparable(report) == comparable(hosted_report)
    events = (await client_a.events(sid, limit=1000)).events
    assert len([e for e in events if e.kind.startswith("context.compaction")]) == hosted_report.compactions


async def test_request_is_materialised_from_postgres_with_a_stable_prefix(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=50_000,
                                         system_prompt="You are terse.")).session_id
    await client_a.append_items(sid, [user_item("list the files"), {"kind": "decision", "text": "use python 3.11"}])
    first = await client_a.next_request(sid)
    assert [m["role"] for m in first.messages] == ["system", "user", "user"]
    assert first.messages[0]["content"] == "You are terse." and first.messages[1]["content"] == "list the files"
    assert first.tools == []  # an external agent runs its own tools: none of ours unless declared
    # task assembly laid the stable segment out (the system prompt, the pinned submission and decision)
    assert first.stable_prefix_messages == first.stable_prefix_entries == 3
    assert first.token_estimate == first.plan_tokens > 0 and first.fits  # no tools: exactly what the engine measured
    assert [e.item_id for e in first.entries] == ["itm-000000", "itm-000001", "itm-000002"]

    call = {"id": "call-1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                      tool_result_item("call-1", "bash", "a.py\nb.py\n", 0)])
    second = await client_a.next_request(sid)
    # between compactions a request only grows at its end: the provider's prompt cache keeps hitting
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[-2]["tool_calls"][0]["id"] == "call-1"
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call-1", "content": "a.py\nb.py\n"}
    assert second.stable_prefix_messages >= first.stable_prefix_messages


async def test_large_content_is_stored_in_postgres_first_and_sent_by_reference(client_a, api_stack):
    sid = (await client_a.create_session(mode="external")).session_id
    big = "".join(f"line {i}: {'x' * 40}\n" for i in range(2_000))  # ~96 k characters
    assert len(big) > INLINE_TEXT_LIMIT
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "big.txt"}'}}
    out = await client_a.append_items(sid, [user_item("read big.txt"),
                                            assistant_item({"content": None, "tool_calls": [call]}),
                                            tool_result_item("c1", "read_file", big, 0),
                                            user_item("y" * (INLINE_TEXT_LIMIT + 1))])
    assert len(out.item_ids) == 4 and len(out.stored_observations) == 2
    assert all(o.startswith(f"obs-{sid}-ext-") for o in out.stored_observations)
    result = await client_a.item(sid, out.item_ids[2], max_chars=1_000_000)
    assert result.text == big and result.metadata["observation_id"] == out.stored_observations[0]
    piece = await client_a.read_observation(sid, out.stored_observations[0], offset=1234, limit=5000)
    assert piece.text == big[1234:6234] and piece.total_chars == len(big)
    request = await client_a.next_request(sid)
    tool_message = next(m for m in request.messages if m["role"] == "tool")
    assert len(tool_message["content"]) < len(big)  # large output reaches the model compacted
    assert f"observation://{out.stored_observations[0]}" in tool_message["content"]
    # a client cannot point content_ref at someone else's observation: the field is not accepted
    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        response = await http.post(f"/v1/sessions/{sid}/items", json={
            "items": [{"kind": "user", "content_ref": out.stored_observations[0]}]})
        assert response.status_code == 422 and "content_ref" in response.json()["error"]["message"]


async def test_idempotency_key_appends_once(client_a):
    sid = (await client_a.create_session(mode="external")).session_id
    items = [user_item("once"), {"kind": "note", "text": "z" * (INLINE_TEXT_LIMIT + 10)}]
    first = await client_a.append_items(sid, items, idempotency_key="turn-7")
    again = await client_a.append_items(sid, items, idempotency_key="turn-7")
    assert again.item_ids == first.item_ids
    assert again.stored_observations == first.stored_observations
    other = await client_a.append_items(sid, [user_item("twice")], idempotency_key="turn-8")
    assert other.item_ids != first.item_ids
    report = await client_a.context(sid)
    # (no system item: an external session without a system_prompt gets none of ours)
    assert [i.kind for i in sorted(report.items, key=lambda i: i.seq)] == ["user", "note", "user"]


async def test_an_external_conversation_can_be_one_task(client_a):
    """``tasks``: by default each user message begins a task; "conversation" makes the whole
    conversation one (only external sessions choose)."""
    with pytest.raises(LanesAPIError) as refused:
        await client_a.create_session(mode="hosted", tasks="conversation")
    assert refused.value.status == 400 and "tasks" in str(refused.value)
    tasks_of = {}
    for scope in ("conversation", None):
        sid = (await client_a.create_session(mode="external", tasks=scope)).session_id
        await client_a.append_items(sid, [user_item("first")])
        await client_a.append_items(sid, [assistant_item({"role": "assistant", "content": "ok"}), user_item("second"),
                                          user_item("third")])
        report = await client_a.context(sid)
        tasks_of[scope] = [i.task for i in sorted(report.items, key=lambda i: i.seq) if i.kind == "user"]
    one, each = tasks_of["conversation"], tasks_of[None]
    assert len(one) == 3 and len(set(one)) == 1 and None not in one
    assert each[0] != each[1] == each[2]  # a task per call's user messages (a batch of two: its last one's)


async def test_append_validation(client_a, api_stack):
    sid = (await client_a.create_session(mode="external")).session_id
    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        cases = [
            ({"items": []}, 422, "items"),
            ({"items": [{"kind": "user", "text": "x"}] * 101}, 422, "items"),
            ({"items": [{"kind": "user", "text": "x" * 1_000_001}]}, 422, "text"),
            ({"items": [{"kind": "User!", "text": "x"}]}, 422, "kind"),
            ({"items": [{"kind": "user", "role": "wizard", "text": "x"}]}, 422, "role"),
            ({"items": [{"kind": "memory", "text": "x"}]}, 400, "cannot be appended"),
            ({"items": [{"kind": "tool_result", "text": "x"}]}, 400, "tool_call_id"),
            ({"items": [{"kind": "assistant", "tool_calls": [{"id": "", "name": "bash"}]}]}, 422, "tool_calls"),
            ({"items": "nope"}, 422, "items"),
        ]
        for body, status, words in cases:
            response = await http.post(f"/v1/sessions/{sid}/items", json=body)
            assert response.status_code == status, (body, response.text)
            assert words in response.json()["error"]["message"], response.text
        bad_key = await http.post(f"/v1/sessions/{sid}/items", json={"items": [{"kind": "user", "text": "x"}]},
                                  headers={"Idempotency-Key": "has space"})
        assert bad_key.status_code == 400
    report = await client_a.context(sid)
    assert report.items == []  # every rejected call changed nothing (and no prompt of ours was added)


async def test_episodes_and_condensation(client_a, api_stack):
    sid = (await client_a.create_session(mode="external")).session_id
    await client_a.append_items(sid, [user_item("fix the auth bug")])
    await client_a.begin_episode(sid, "inspect-auth", "exploration", "find where JWTs are validated")
    call = {"id": "r1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "auth.ts"}'}}
    await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                      tool_result_item("r1", "read_file", "export function validate() {}", 0)])
    listed = await client_a.episodes(sid)
    assert listed.active == ["inspect-auth"]
    assert listed.episodes[0].id == "inspect-auth" and listed.episodes[0].items == 2
    rejected = await client_a.condense(sid, {"completed_work": ["read auth.ts"]})
    assert rejected.status == "rejected" and "active" in rejected.reason

    with pytest.raises(LanesAPIError) as raised:
        await client_a.end_episode(sid, "inspect-auth")  # an exploration needs a conclusion
    assert raised.value.status == 400 and "conclusion" in raised.value.message
    await client_a.end_episode(sid, "inspect-auth", "JWT validation runs before route dispatch")
    with pytest.raises(LanesAPIError) as raised:
        await client_a.begin_episode(sid, "inspect-auth", "exploration", "again")
    assert raised.value.status == 409 and "already exists" in raised.value.message
    with pytest.raises(LanesAPIError) as raised:
        await client_a.begin_episode(sid, "fix", "action", "edit", depends_on=["no-such-episode"])
    assert raised.value.status == 400 and "no-such-episode" in raised.value.message
    await client_a.begin_episode(sid, "fix-auth", "action", "move validation", depends_on=["inspect-auth"])
    graph = await client_a.episodes(sid)
    assert graph.active == ["fix-auth"]
    by_id = {e.id: e for e in graph.episodes}
    assert by_id["fix-auth"].depends_on == ["inspect-auth"] and by_id["fix-auth"].kind == "action"
    assert by_id["inspect-auth"].status == "completed"
    assert by_id["inspect-auth"].conclusion == "JWT validation runs before route dispatch"
    await client_a.end_episode(sid, "fix-auth")
    with pytest.raises(LanesAPIError) as raised:
        await client_a.end_episode(sid, "fix-auth")
    assert raised.value.status == 409

    bad_ref = await client_a.condense(sid, {"completed_work": ["x"], "references": ["observation://obs-unknown"]})
    assert bad_ref.status == "rejected" and "obs-unknown" in bad_ref.reason
    # the current task's items are protected: nothing is eligible, and nothing is written
    nothing = await client_a.condense(sid, {"completed_work": ["fixed auth"]})
    assert nothing.status == "no-op" and (await client_a.context(sid)).live_memory_id is None
    await client_a.append_items(sid, [user_item("next: add tests")])  # the episodes' task is over
    accepted = await client_a.condense(sid, {"completed_work": ["fixed auth"], "references": ["src/auth.ts"]})
    assert accepted.status == "accepted" and accepted.memory_id
    report = await client_a.context(sid)
    assert report.live_memory_id == accepted.memory_id
    kinds = [e.kind for e in (await client_a.events(sid, limit=1000)).events]
    assert "context.condense.rejected" in kinds

    async with httpx.AsyncClient(base_url=api_stack.base_url,
                                 headers={"Authorization": f"Bearer {api_stack.token_a}"}) as http:
        bodies: list[dict] = [{"memory": {"completed_work": "not a list"}}, {"memory": {"unknown": []}}, {"memory": []}, {}]
        for body in bodies:
            assert (await http.post(f"/v1/sessions/{sid}/condense", json=body)).status_code == 422
        for body in ({"episode_id": "e", "kind": "detour", "goal": "g"}, {"episode_id": "", "kind": "action",
                                                                          "goal": "g"},
                     {"episode_id": "e/../x", "kind": "action", "goal": "g"}):
            assert (await http.post(f"/v1/sessions/{sid}/episodes", json=body)).status_code == 422
        too_long = await http.post(f"/v1/sessions/{sid}/episodes/fix-auth/end", json={"conclusion": "c" * 5000})
        assert too_long.status_code == 422


async def test_a_request_that_cannot_fit_is_refused_with_what_does_not_fit(client_a):
    prompt = "Follow every house rule to the letter. " * 1_000  # ~8,000 tokens: more than the whole budget
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000, system_prompt=prompt)).session_id
    await client_a.append_items(sid, [user_item("hello")])
    with pytest.raises(LanesAPIError) as raised:
        await client_a.next_request(sid)
    assert raised.value.status == 422 and raised.value.code == "request_unfit"
    assert "does not fit" in raised.value.message and "system" in raised.value.message
    kinds = [e.kind for e in (await client_a.events(sid, limit=100)).events]
    assert kinds.count("context.overflow.planned") == 2 and "context.request.unfit" in kinds
    await client_a.append_items(sid, [user_item("still taking items")])  # the session is not wedged
