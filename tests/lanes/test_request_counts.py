"""A request counts only what is new (activities.token_memo), and the count is the one a full
recount gives: on recorded sessions replayed through the engine, and on materialised requests
whose messages render differently from the measured items (pairing, orphans, projections).
Items a store remembers (activities.recent_rows) are the ones PostgreSQL returns."""

from __future__ import annotations

import uuid

import pytest

from activities import token_memo
from activities.items import finish_item, load_items, store_item
from activities.requests import materialise
from activities.store import Store
from activities.tokens import count_message_tokens
from tests.recordings import LONG_TRAJECTORY, SHORT_TRAJECTORY, load_recording
from worker.replay.simulator import TOKEN_MODEL, iter_requests
from workflows.context import Item, ItemContent, Kind, Projection, ToolCall

MODEL = "gpt-4o-mini"
PREVIEW = 400


@pytest.mark.parametrize("budget", [4_000, 16_000])
@pytest.mark.parametrize("path", [SHORT_TRAJECTORY, LONG_TRAJECTORY], ids=["short", "long"])
def test_counts_from_the_memo_equal_a_full_recount_on_recorded_sessions(path, budget: int) -> None:
    token_memo.clear()
    trajectory = load_recording(path)
    messages = new = 0
    for request in iter_requests(trajectory, "lanes", budget):  # the engine measures items as a worker does
        for message in request.messages:
            messages += 1
            new += token_memo.known(message, TOKEN_MODEL) is None
            assert token_memo.message_tokens(message, TOKEN_MODEL) == count_message_tokens(message, TOKEN_MODEL)
    assert new < messages / 4  # most of every request was counted before (when its items were measured)


def test_a_message_that_renders_differently_is_counted_afresh() -> None:
    token_memo.clear()
    calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
             {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}]
    whole = {"role": "assistant", "content": "looking", "tool_calls": calls}
    variants = [
        whole,
        {**whole, "tool_calls": calls[:1]},  # a call dropped by pairing
        {**whole, "content": None},
        {"role": "user", "content": "looking"},
        {**whole, "reasoning_content": "because"},
        {"role": "tool", "tool_call_id": "c1", "content": "looking"},
    ]
    for message in variants:
        assert token_memo.message_tokens(message, MODEL) == count_message_tokens(message, MODEL)
    for message in variants:  # now all from the memo
        assert token_memo.known(message, MODEL) == count_message_tokens(message, MODEL)
    for model in ("gpt-4", "claude-sonnet-4", None):  # keyed by the encoding that counts, not the name
        assert token_memo.message_tokens(whole, model) == count_message_tokens(whole, model)


async def test_materialised_counts_equal_a_full_recount(store: Store) -> None:
    session = f"counts-{uuid.uuid4().hex[:10]}"
    await store.ensure_session(session)
    token_memo.clear()

    def item(seq: int, kind: Kind, role: str, **fields) -> Item:
        return Item(id=f"main-itm-{seq:06d}", seq=seq, kind=kind, role=role, group=seq, task="t1", **fields)

    calls = [ToolCall(id="c1", name="bash", arguments='{"command": "ls -la"}'),
             ToolCall(id="c2", name="bash", arguments='{"command": "cat setup.py"}')]
    output = "\n".join(f"line {n}: " + "x" * (n % 50) for n in range(400))
    pairs = [
        (item(0, Kind.SYSTEM, "system"), ItemContent(text="You are careful.")),
        (item(1, Kind.USER, "user"), ItemContent(text="Fix the bug.")),
        (item(2, Kind.ASSISTANT, "assistant", tool_call_ids=["c1", "c2"]), ItemContent(text="Looking.", tool_calls=calls)),
        (item(3, Kind.TOOL_RESULT, "tool", tool_name="bash", tool_call_ids=["c1"], observation_id="obs-a"),
         ItemContent(text=output, tool_call_id="c1", tool_name="bash")),
        (item(4, Kind.TOOL_RESULT, "tool", tool_name="bash", tool_call_ids=["c9"], observation_id="obs-b"),
         ItemContent(text="an orphaned result", tool_call_id="c9", tool_name="bash")),
        (item(5, Kind.ASSISTANT, "assistant"), ItemContent(text="Done.")),
    ]
    for it, content in pairs:  # measured (and remembered) as the activities store them
        await store_item(store, session, "main", finish_item(it, content, PREVIEW, MODEL), content)
    ids = [it.id for it, _ in pairs]
    plans = [
        [(i, Projection.FULL) for i in ids],
        [(ids[0], Projection.FULL), (ids[1], Projection.FULL), (ids[2], Projection.REFERENCE),
         (ids[3], Projection.COMPACT), (ids[4], Projection.REFERENCE), (ids[5], Projection.FULL)],
        [(ids[0], Projection.FULL), (ids[2], Projection.MINIMAL_REFERENCE), (ids[3], Projection.REFERENCE)],
        [(ids[0], Projection.FULL), (ids[2], Projection.FULL), (ids[4], Projection.FULL)],  # c1, c2 unanswered
    ]
    for plan in plans:
        for _ in range(2):  # cold for what renders differently, then all from the memo
            request = await materialise(store, session, plan, preview_chars=PREVIEW, tools=["bash"], model=MODEL)
            assert request.message_tokens == [count_message_tokens(m, MODEL) for m in request.messages]


async def test_items_from_the_cache_equal_a_fresh_read(store: Store) -> None:
    session = f"cache-{uuid.uuid4().hex[:10]}"
    await store.ensure_session(session)
    store.recent_items.clear()
    calls = [ToolCall(id="c1", name="bash", arguments='{"command": "ls"}')]
    pairs = [(Item(id=f"main-itm-{n:06d}", seq=n, kind=Kind.ASSISTANT, role="assistant", group=n, task="t1",
                   tool_call_ids=["c1"]), ItemContent(text=f"step {n}", tool_calls=calls, reasoning_content="why"))
             for n in range(3)]
    for it, content in pairs:
        await store_item(store, session, "main", finish_item(it, content, PREVIEW, MODEL), content)
    ids = [it.id for it, _ in pairs]
    cached = await load_items(store, session, ids)  # all from what this process stored
    store.recent_items.clear()
    assert await load_items(store, session, ids) == cached  # all from PostgreSQL
