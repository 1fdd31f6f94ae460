"""The PostgreSQL store: idempotent writes, exact recall, event paging, reconnects."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import uuid

import asyncpg
import pytest
from temporalio.exceptions import ApplicationError

from activities.runtime import StoreSource
from activities.store import DEFAULT_RECALL_CHARS, MAX_RECALL_CHARS, Store
from activities.store_errors import (
    CheckpointNotFound,
    ItemConflict,
    ObservationConflict,
    ObservationNotFound,
    SessionNotFound,
    StoreUnavailable,
)
from activities.store_rows import EventRow, ItemRow

pytestmark = pytest.mark.integration


def new_session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def session(store: Store) -> str:
    sid = new_session()
    await store.ensure_session(sid, tenant="t", config={"model": "m"})
    return sid


def item(item_id: str, seq: int, text: str = "hello", lane: str = "main", **content: object) -> ItemRow:
    return ItemRow(item_id=item_id, lane=lane, seq=seq, kind="user", role="user",
                   content={"text": text, "tool_calls": [], "tool_call_id": None, "tool_name": None, **content})


# --- sessions and items ---------------------------------------------------------------

async def test_ensure_session_is_idempotent(store: Store, session: str) -> None:
    await store.ensure_session(session, tenant="other", config={"changed": True})
    async with store._pool.acquire() as conn:
        row = await conn.fetchrow("SELECT tenant, config FROM sessions WHERE session_id = $1", session)
    assert (row["tenant"], row["config"]) == ("t", {"model": "m"})  # first write wins


async def test_put_items_idempotent(store: Store, session: str) -> None:
    rows = [item("i0", 0, "first"), item("i1", 1, "second"), item("c0", 0, "child", lane="child-1")]
    assert await store.put_items(session, rows) == 3
    assert await store.put_items(session, rows) == 0  # a retried activity
    assert await store.put_items(session, rows + [item("i2", 2)]) == 1
    assert await store.count_items(session) == 4
    assert await store.put_items(session, []) == 0


async def test_put_items_never_overwrites(store: Store, session: str, caplog: pytest.LogCaptureFixture) -> None:
    await store.put_items(session, [item("i0", 0, "original")])
    assert await store.put_items(session, [item("i0", 0, "CHANGED")]) == 0  # same id
    assert await store.put_items(session, [item("other", 0, "same seq")]) == 0  # same (lane, seq)
    stored = await store.get_items(session, ["i0", "other"])
    assert list(stored) == ["i0"] and stored["i0"].content["text"] == "original"
    assert "already taken by different content" in caplog.text and "CHANGED" not in caplog.text


def stored_row(item_id: str, seq: int, text: str, meta: dict | None = None) -> ItemRow:
    """A row as the activities write it: exact content beside the measured metadata."""
    return ItemRow(item_id=item_id, lane="main", seq=seq, kind="user", role="user",
                   content={"content": {"text": text}, "meta": meta or {"tokens": {"full": 3}}})


async def test_an_exact_write_stores_everything_or_nothing(store: Store, session: str) -> None:
    events = [EventRow(lane="main", seq=n, event_id=f"e-{n}", kind="item.added", payload={}) for n in (1, 2)]
    first = [stored_row("i-1", 1, "one"), stored_row("i-2", 2, "two")]
    assert await store.put_items_exactly(session, "main", first, events, [("obs-x-1", "i-1", "one")]) == 2
    # an earlier attempt of the same write (metadata measured by another worker version): no conflict
    again = [stored_row("i-1", 1, "one", {"tokens": {"full": 4}}), stored_row("i-2", 2, "two")]
    assert await store.put_items_exactly(session, "main", again, events, [("obs-x-1", "i-1", "one")]) == 0
    # other content under a taken id, seq or observation id: nothing of the write is stored
    for rows, archives in (([stored_row("i-3", 3, "three"), stored_row("i-2", 2, "TWO")], []),
                           ([stored_row("i-3", 3, "three"), stored_row("i-9", 1, "nine")], []),
                           ([stored_row("i-3", 3, "three")], [("obs-x-1", "i-3", "not one")])):
        with pytest.raises(ItemConflict) as conflict:
            await store.put_items_exactly(session, "main", rows,
                                          [EventRow(lane="main", seq=3, event_id="e-3", kind="item.added")], archives)
        assert conflict.value.next_free_seq == 4 and conflict.value.ids
        assert await store.item_ids(session) == ["i-1", "i-2"]
        assert [e.event_id for e in await store.list_events(session)] == ["e-1", "e-2"]
        assert (await store.read_observation(session, "obs-x-1", 0, 100)).text == "one"


async def test_get_and_list_items(store: Store, session: str) -> None:
    await store.put_items(session, [item(f"m{i}", i, f"main {i}") for i in range(5)]
                          + [item(f"c{i}", i, f"child {i}", lane="child") for i in range(3)])
    got = await store.get_items(session, ["m3", "c1", "missing"])
    assert set(got) == {"m3", "c1"} and got["m3"].content["text"] == "main 3" and got["c1"].lane == "child"
    assert got["m3"].created_at is not None
    main = await store.list_items(session, lane="main", after_seq=1, limit=2)
    assert [r.item_id for r in main] == ["m2", "m3"]
    everything = await store.list_items(session)
    assert [r.item_id for r in everything] == ["c0", "c1", "c2", "m0", "m1", "m2", "m3", "m4"]
    assert await store.get_items(new_session(), ["m3"]) == {}  # scoped to the session


async def test_exact_content_round_trip(store: Store, session: str) -> None:
    # jsonb cannot hold NUL or lone surrogates; the store keeps them anyway
    nasty = "nul:\x00 surrogate:\ud800 emoji:😀 accents:é ctrl:\x1b[0m"
    calls = [{"id": "call_1", "type": "function", "function": {"name": "sh", "arguments": '{"cmd": "ls\\u0000"}'}}]
    rows = [item("n0", 0, nasty, tool_calls=calls), item("n1", 1, "plain", meta={"k": [1, 2.5, None, True]})]
    assert await store.put_items(session, rows) == 2
    got = await store.get_items(session, ["n0", "n1"])
    assert got["n0"].content == rows[0].content and got["n1"].content == rows[1].content
    assert await store.put_items(session, rows) == 0


async def test_unknown_session_is_a_clear_error(store: Store) -> None:
    with pytest.raises(SessionNotFound, match="ensure_session"):
        await store.put_items("no-such-session", [item("x", 0)])
    with pytest.raises(SessionNotFound):
        await store.put_observation("no-such-session", "obs-x", "x", "text")


async def test_item_ids_plans_and_counts(store: Store, session: str) -> None:
    await store.put_items(session, [item("b", 1), item("a", 0), item("z", 0, lane="child")])
    assert await store.item_ids(session) == ["z", "a", "b"]
    plan = [["a", "full"], ["b", "reference"]]
    assert await store.put_plan(session, "main", 1, plan) is True
    assert await store.put_plan(session, "main", 1, [["other", "full"]]) is False
    assert await store.get_plan(session, "main", 1) == plan
    assert await store.get_plan(session, "main", 2) is None
    assert await store.get_plan(new_session(), "main", 1) is None
    await store.put_observation(session, f"obs-count-{session}", "a", "x")
    assert await store.count_observations(session) == 1


# --- events -------------------------------------------------------------------------

async def test_events_idempotent_and_paged(store: Store, session: str) -> None:
    events = [EventRow(lane="main" if i % 3 else "child", seq=i, event_id=f"e{i}", kind="context.compaction",
                       payload={"i": i}) for i in range(25)]
    assert await store.append_events(session, events[:10]) == 10
    assert await store.append_events(session, events[:10]) == 0
    assert await store.append_events(session, events) == 15
    # same event id at another position, or another id at a taken position: not written
    assert await store.append_events(session, [EventRow(lane="main", seq=99, event_id="e1", kind="x")]) == 0
    assert await store.append_events(session, [EventRow(lane="main", seq=1, event_id="new", kind="x")]) == 0
    seen, after = [], 0
    while page := await store.list_events(session, after_id=after, limit=7):
        assert len(page) <= 7
        seen += page
        after = page[-1].id
    assert [e.event_id for e in seen] == [f"e{i}" for i in range(25)]
    assert [e.payload["i"] for e in seen] == list(range(25))
    assert all(a.id < b.id for a, b in itertools.pairwise(seen))
    assert all(e.session_id == session and e.created_at is not None for e in seen)
    assert await store.list_events(new_session()) == []


async def test_concurrent_event_appends_keep_commit_order(store: Store, session: str) -> None:
    async def writer(lane: str) -> None:
        for i in range(10):
            await store.append_events(session, [EventRow(lane=lane, seq=i, event_id=f"{lane}-{i}", kind="k")])
    await asyncio.gather(*(writer(f"lane{n}") for n in range(4)))
    events = await store.list_events(session, limit=1000)
    assert len(events) == 40
    for n in range(4):
        assert [e.seq for e in events if e.lane == f"lane{n}"] == list(range(10))


# --- observations -------------------------------------------------------------------

TEXT = "".join(f"line {i:04d}: ascii é ü 漢字 😀🎉 end\n" for i in range(3000))  # ~100k chars, multi-byte


async def test_observation_meta_and_idempotence(store: Store, session: str) -> None:
    meta = await store.put_observation(session, "obs-a", "item-a", TEXT)
    data = TEXT.encode()
    assert meta.inserted and (meta.size_chars, meta.size_bytes) == (len(TEXT), len(data))
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    again = await store.put_observation(session, "obs-a", "item-a", TEXT)
    assert not again.inserted and again.sha256 == meta.sha256 and again.created_at == meta.created_at
    changed = await store.put_observation(session, "obs-a", "item-a", "different")
    assert not changed.inserted and changed.sha256 == meta.sha256  # never overwritten
    assert (await store.observation_meta(session, "obs-a")).size_chars == len(TEXT)
    with pytest.raises(ObservationConflict):
        await store.put_observation(await _other_session(store), "obs-a", "item-a", TEXT)


async def _other_session(store: Store) -> str:
    sid = new_session()
    await store.ensure_session(sid)
    return sid


@pytest.mark.parametrize("offset,limit", [
    (0, 1), (0, 100), (1, 7), (37, 4096), (5000, DEFAULT_RECALL_CHARS), (len(TEXT) - 3, 10),
    (len(TEXT) - 1, 1), (len(TEXT), 10), (len(TEXT) + 5, 10), (10**15, 10), (12345, MAX_RECALL_CHARS),
])
async def test_read_observation_exact_slices(store: Store, session: str, offset: int, limit: int) -> None:
    obs_id = f"obs-{session}"  # observation ids are global, not per session
    await store.put_observation(session, obs_id, "item", TEXT)
    got = await store.read_observation(session, obs_id, offset, limit)
    want = TEXT[offset:offset + limit]
    assert got.text == want and got.text.encode() == want.encode()
    assert (got.obs_id, got.offset, got.limit, got.total_chars) == (obs_id, offset, limit, len(TEXT))
    assert got.eof == (offset + limit >= len(TEXT))
    assert got.next_offset == (None if got.eof else offset + limit)


async def test_read_observation_walk_and_limits(store: Store, session: str) -> None:
    await store.put_observation(session, "obs-walk", "item", TEXT)
    parts, offset = [], 0
    while True:
        part = await store.read_observation(session, "obs-walk", offset)  # default limit
        assert part.limit == DEFAULT_RECALL_CHARS
        parts.append(part.text)
        if part.eof:
            break
        assert part.next_offset is not None
        offset = part.next_offset
    assert "".join(parts) == TEXT
    capped = await store.read_observation(session, "obs-walk", 0, 10**9)
    assert capped.limit == MAX_RECALL_CHARS and capped.text == TEXT[:MAX_RECALL_CHARS]
    with pytest.raises(ValueError, match="offset"):
        await store.read_observation(session, "obs-walk", -1, 10)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="limit"):
            await store.read_observation(session, "obs-walk", 0, bad)


async def test_observations_are_scoped_to_their_session(store: Store, session: str) -> None:
    await store.put_observation(session, "obs-private", "item", "secret output")
    other = await _other_session(store)
    with pytest.raises(ObservationNotFound):
        await store.read_observation(other, "obs-private", 0, 10)
    with pytest.raises(ObservationNotFound):
        await store.observation_meta(other, "obs-private")
    with pytest.raises(ObservationNotFound):
        await store.read_observation(session, "obs-missing", 0, 10)


async def test_observation_with_nul_and_surrogates(store: Store, session: str) -> None:
    text = "bin\x00ary \ud83d lone é😀" * 100
    meta = await store.put_observation(session, "obs-bin", "item", text)
    assert meta.size_chars == len(text)
    for offset, limit in [(0, 5), (3, 10), (len(text) - 4, 100), (len(text), 1)]:
        got = await store.read_observation(session, "obs-bin", offset, limit)
        assert got.text == text[offset:offset + limit]


async def test_empty_observation(store: Store, session: str) -> None:
    await store.put_observation(session, "obs-empty", "item", "")
    got = await store.read_observation(session, "obs-empty", 0, 10)
    assert (got.text, got.total_chars, got.eof, got.next_offset) == ("", 0, True, None)


# --- checkpoints --------------------------------------------------------------------

async def test_checkpoints(store: Store, session: str) -> None:
    state = {"items": [{"id": "i0", "tokens": {"full": 12}}], "note": "nul\x00"}
    assert await store.put_checkpoint(session, "ckpt-1", "main", state) is True
    assert await store.put_checkpoint(session, "ckpt-1", "main", state) is False
    assert await store.put_checkpoint(session, "ckpt-1", "main", {"other": 1}) is False
    assert await store.get_checkpoint(session, "ckpt-1") == state
    with pytest.raises(CheckpointNotFound):
        await store.get_checkpoint(await _other_session(store), "ckpt-1")
    with pytest.raises(CheckpointNotFound):
        await store.get_checkpoint(session, "ckpt-missing")


# --- connections --------------------------------------------------------------------

async def test_ping_and_shared_store(store: Store, database_url: str) -> None:
    assert await store.ping()
    stores = StoreSource(database_url)
    shared = await stores.get()
    assert await stores.get() is shared
    await shared.close()
    assert not await shared.ping()
    first, second = await asyncio.gather(stores.get(), stores.get())  # opened once, though asked twice at once
    assert first is second and first is not shared and await first.ping()  # a closed store is replaced
    await stores.close()
    assert first.closed
    with pytest.raises(ApplicationError, match="DATABASE_URL is not set"):  # a worker set up wrong: no retry helps
        await StoreSource(None).get()


async def test_reconnects_after_connections_are_dropped(database_url: str) -> None:
    store = await Store.open(database_url, min_size=2, max_size=2, application_name="lanes-drop-test")
    try:
        sid = new_session()
        await store.ensure_session(sid)
        conn = await asyncpg.connect(database_url)
        try:
            killed = await conn.fetchval("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                         " WHERE application_name = 'lanes-drop-test'")
        finally:
            await conn.close()
        assert killed >= 1
        assert await store.put_items(sid, [item("after-drop", 0)]) == 1
        assert await store.count_items(sid) == 1
    finally:
        await store.close()


async def test_a_connection_comes_back_from_an_abandoned_transaction_clean(database_url: str) -> None:
    """The pool hands connections back without asyncpg's reset query (the store keeps no session
    state); a transaction a failed call left open is still rolled back before the next user."""
    store = await Store.open(database_url, min_size=1, max_size=1)  # one connection: the next user gets it
    try:
        sid = new_session()
        await store.ensure_session(sid)

        async def abandon(conn: asyncpg.Connection) -> None:
            await conn.transaction().start()  # not a managed block: nothing of ours rolls it back
            await conn.execute("DELETE FROM sessions WHERE session_id = $1", sid)
            raise RuntimeError("the call failed mid-transaction")

        with pytest.raises(RuntimeError):
            await store.run(abandon)
        assert await store.run(lambda c: c.fetchval("SELECT txid_current_if_assigned()")) is None
        assert await store.run(lambda c: c.fetchval("SELECT count(*) FROM sessions WHERE session_id = $1", sid)) == 1
    finally:
        await store.close()


async def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="unreachable"):
        await Store.open("postgresql://postgres:pw@127.0.0.1:1/nothing")


@pytest.mark.parametrize("error, is_outage", [
    (asyncpg.exceptions.InternalClientError("cannot switch to state 15; another operation (2) is in progress"), True),
    (asyncpg.InterfaceError("connection is closed"), True),
    (ConnectionResetError("reset by peer"), True),
    (asyncpg.UniqueViolationError("duplicate key"), False),
    (ValueError("a bug"), False),
])
def test_a_connection_the_server_dropped_counts_as_an_outage(error, is_outage) -> None:
    # seen when the postmaster is killed mid-query: the connection is left mid-operation
    from activities.store import _is_connection_error
    assert _is_connection_error(error) is is_outage
