"""The gateway's table of conversations (``activities/gateway_turns.py``) on a real PostgreSQL:
a call reads only the end of a long conversation's rows, which is sound only because a
session's rows form one chain. These tests hold the parts that make it so: a claim that meets
another conversation keeps nothing, the longest prefix is found wherever it ends, and a row
left by an older claim that does not fit the chain ends the match (the call branches)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

from activities.gateway_turns import PROBE_FIRST, GatewayTurns
from activities.store import Store
from worker.api.gateway.service import _beyond, _held


def _chain(name: str, n: int) -> list[str]:
    return [hashlib.sha256(f"{name}|{k}".encode()).hexdigest() for k in range(n)]


async def _session(store: Store, tenant: str) -> str:
    sid = f"ses-{uuid.uuid4().hex[:12]}"
    await store.ensure_session(sid, tenant)
    return sid


async def _positions(store: Store, sid: str) -> dict[int, str]:
    rows = await store.run(lambda c: c.fetch("SELECT position, chain FROM gateway_turns WHERE session_id = $1", sid))
    return {r["position"]: r["chain"] for r in rows}


async def test_a_claim_that_meets_another_conversation_keeps_none_of_its_positions(store: Store) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    table = GatewayTurns(store)
    sid = await _session(store, tenant)
    a, b = _chain("a", 8), _chain("b", 10)
    b[:5] = a[:5]  # one conversation until turn 5, then another
    await table.claim(sid, tenant, 0, a)
    answer = await table.claim(sid, tenant, 5, b[5:])
    assert [r.chain for r in answer if r.position < 8] == a[5:]  # it sees the other conversation's rows
    assert await _positions(store, sid) == dict(enumerate(a))  # and positions 8 and 9 were not left behind
    one = await table.claim(sid, tenant, 3, ["another"])  # one position (the usual call's claim)
    assert [(r.position, r.chain) for r in one] == [(3, a[3])]
    again = await table.claim(sid, tenant, 5, a[5:] + _chain("a-more", 2))  # the same conversation goes on
    assert all(r.chain == (a + _chain("a-more", 2))[r.position] for r in again)
    assert len(await _positions(store, sid)) == 10
    assert [r.chain for r in await table.claim(sid, tenant, 10, ["one more"])] == ["one more"]


async def test_the_longest_prefix_is_found_among_the_last_digests_and_far_before_them(store: Store) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    table = GatewayTurns(store)
    older, newer = await _session(store, tenant), await _session(store, tenant)
    chain = _chain("long", 200)
    await table.claim(older, tenant, 0, chain[:150])
    await table.claim(newer, tenant, 0, chain[:40])
    assert await table.longest_prefix(tenant, chain[:152]) == (older, 149)  # among the last digests
    edited = chain[:150] + _chain("edited", 60)  # the agent rewrote everything after turn 150
    assert await table.longest_prefix(tenant, edited) == (older, 149)  # far before them
    assert len(edited) - 150 > PROBE_FIRST
    assert await table.longest_prefix(tenant, edited, session_id=newer) == (newer, 39)
    assert await table.longest_prefix(tenant, _chain("other", 300)) is None
    assert await table.longest_prefix(f"{tenant}-else", chain) is None  # another tenant's never


async def test_a_call_reads_the_end_and_the_unstored_rows_and_a_misfit_ends_the_match(store: Store) -> None:
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    table = GatewayTurns(store)
    sid = await _session(store, tenant)
    chain = _chain("c", 60)
    await table.claim(sid, tenant, 0, chain[:50])
    await table.mark_stored(sid, [p for p in range(50) if p != 7])
    matched, read = await _held(table, sid, chain[:55], 49)
    assert matched == 50 and [r.position for r in read] == [7]  # only the unstored row before the end
    assert not _beyond(read, matched)
    matched, read = await _held(table, sid, chain[:45], 44)  # an older call: the session went on past it
    assert matched == 45 and _beyond(read, matched)
    # a row another conversation's claim left at position 7 before claims were all or nothing
    await store.run(lambda c: c.execute("UPDATE gateway_turns SET chain = 'left-by-another' "
                                        "WHERE session_id = $1 AND position = 7", sid))
    matched, read = await _held(table, sid, chain[:55], 49)
    assert matched == 7 and _beyond(read, matched)  # the call does not continue this session


async def test_claims_made_at_once_leave_one_conversation_whole(store: Store) -> None:
    """Eight conversations claim positions of one session at once, from the same position:
    some share their first turns, they differ in length. One wins every position it asked for,
    and the session holds its chain alone: never one conversation's rows followed by the
    longer tail of another that shared their start (claims that are not all or nothing leave
    exactly that behind)."""
    tenant = f"t-{uuid.uuid4().hex[:6]}"
    table = GatewayTurns(store)
    sid = await _session(store, tenant)
    shared, common = _chain("shared", 4), _chain("common", 2)
    await table.claim(sid, tenant, 0, shared)
    tails = [common[:n % 3] + _chain(f"tail-{n}", 3 + n) for n in range(8)]
    answers = await asyncio.gather(*(table.claim(sid, tenant, 4, tail) for tail in tails))
    won = [n for n, rows in enumerate(answers) if [r.chain for r in rows] == tails[n]]
    assert len(won) == 1
    assert await _positions(store, sid) == dict(enumerate(shared + tails[won[0]]))
