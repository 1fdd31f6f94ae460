"""The gateway's map from conversations to sessions (table ``gateway_turns``, migration 0005).

Each turn an agent sent through the gateway has a row at its position in the agent's
conversation, with the digest of the conversation up to it (``chain``); each answer the
gateway returned has one too, with what the agent was answered. A row is a claim until the
turn's items are stored (``stored``); claims decide which conversation a session continues,
so two conversations never mix in one session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from activities.store import Store


@dataclass(frozen=True)
class GatewayTurn:
    position: int
    chain: str
    stored: bool
    answer: dict[str, Any] | None = None
    answered: bool = False  # an answer row (``turns`` reads the flag, not the answer)


def _turn(row: asyncpg.Record) -> GatewayTurn:  # jsonb comes decoded (the store's codec)
    answer = row.get("answer")
    return GatewayTurn(position=row["position"], chain=row["chain"], stored=row["stored"], answer=answer,
                       answered=row.get("answered", answer is not None))


# What a row is read as (``_turn``); ``rows_from`` reads the answer's presence, not the answer.
COLUMNS = "position, chain, stored, answer"
AT = f"SELECT {COLUMNS} FROM gateway_turns WHERE session_id = $1 AND position = $2"


async def _put(c: asyncpg.Connection, session_id: str, position: int, tenant: str, chain: str,
               answer: dict[str, Any] | None = None) -> asyncpg.Record:
    """The row at ``position``: written now (one round trip), or the one already there."""
    row = await c.fetchrow("INSERT INTO gateway_turns (session_id, position, tenant, chain, answer) "
                           f"VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING {COLUMNS}",
                           session_id, position, tenant, chain, answer)
    return row if row is not None else await c.fetchrow(AT, session_id, position)


# Digests asked for first when looking for a call's conversation (``longest_prefix``).
PROBE_FIRST = 8


class _Taken(Exception):
    """A claim met another conversation's rows: none of it is kept, so that a session's rows
    always form one chain (a row's digest then vouches for every row before it, which is what
    lets a call read only the end of a long conversation)."""

    def __init__(self, rows: list[asyncpg.Record]) -> None:
        super().__init__("positions claimed by another conversation")
        self.rows = rows


class GatewayTurns:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def longest_prefix(self, tenant: str, chains: list[str],
                             session_id: str | None = None) -> tuple[str, int] | None:
        """(session, position) of the tenant's longest stored prefix of ``chains`` (in
        ``session_id`` only, when given); the newest session among those that hold it as long
        (a branch shares its prefix). The newest digests are asked first: a call mostly
        continues the one before it, and asking for a long conversation's whole chain costs the
        database an index probe per turn (a row holding digest k means the prefix up to k is
        held, so a hit among the last few is the longest)."""
        where = "tenant = $1 AND chain = ANY($2::text[])" + ("" if session_id is None else " AND session_id = $3")
        query = f"SELECT session_id, position FROM gateway_turns WHERE {where} ORDER BY position DESC, created_at DESC LIMIT 1"
        within = () if session_id is None else (session_id,)
        for probe in (chains[-PROBE_FIRST:], chains[:-PROBE_FIRST]):
            if probe and (row := await self._first_row(query, tenant, probe, *within)) is not None:
                return row["session_id"], row["position"]
        return None

    async def _first_row(self, query: str, *args: Any) -> asyncpg.Record | None:
        return await self.store.run(lambda c: c.fetchrow(query, *args))

    async def answered_after(self, tenant: str, position: int, chain: str, asked: str) -> str | None:
        """The newest of the tenant's sessions that hold ``chain`` at ``position`` and, right
        after it, an answer to a call that asked for the model ``asked``."""
        row = await self.store.run(lambda c: c.fetchrow(
            "SELECT a.session_id FROM gateway_turns t JOIN gateway_turns a "
            "ON a.session_id = t.session_id AND a.position = t.position + 1 "
            "WHERE t.tenant = $1 AND t.position = $2 AND t.chain = $3 AND a.answer ->> 'asked' = $4 "
            "ORDER BY a.created_at DESC LIMIT 1", tenant, position, chain, asked))
        return None if row is None else row["session_id"]

    async def rows_from(self, session_id: str, first: int = 0) -> list[GatewayTurn]:
        """The session's rows at ``first`` and after, and its unstored rows before it, by
        position, without their answers (``at`` reads one): what a call whose first ``first``
        turns the session holds needs to know, without reading (and decoding) the thousands of
        rows of a long conversation every call."""
        columns = "position, chain, stored, answer IS NOT NULL AS answered"
        rows = await self.store.run(lambda c: c.fetch(
            f"SELECT {columns} FROM gateway_turns WHERE session_id = $1 AND position >= $2 "
            f"UNION ALL SELECT {columns} FROM gateway_turns WHERE session_id = $1 AND position < $2 AND NOT stored "
            "ORDER BY position", session_id, first), session_id)
        return [_turn(r) for r in rows]

    async def at(self, session_id: str, position: int) -> GatewayTurn | None:
        row = await self.store.run(lambda c: c.fetchrow(AT, session_id, position), session_id)
        return None if row is None else _turn(row)

    async def claim(self, session_id: str, tenant: str, first: int, chains: list[str]) -> list[GatewayTurn]:
        """Claim positions ``first``... for ``chains``; returns what those positions hold now.
        When another conversation holds any of them, none is claimed and the rows returned
        say so (a position whose chain differs; the others as this claim would have left them)."""
        if not chains:
            return []
        if len(chains) == 1:  # the usual call (one new turn): one row is all or nothing by itself
            return [_turn(await self.store.run(lambda c: _put(c, session_id, first, tenant, chains[0]), session_id))]
        positions = list(range(first, first + len(chains)))

        async def write(c: asyncpg.Connection) -> list[asyncpg.Record]:
            async with c.transaction():
                await c.execute(
                    "INSERT INTO gateway_turns (session_id, position, tenant, chain) "
                    "SELECT $1, p, $2, h FROM unnest($3::int[], $4::text[]) AS t(p, h) ON CONFLICT DO NOTHING",
                    session_id, tenant, positions, chains)
                rows = await c.fetch(f"SELECT {COLUMNS} FROM gateway_turns "
                                     "WHERE session_id = $1 AND position = ANY($2::int[]) ORDER BY position",
                                     session_id, positions)
                if any(r["chain"] != chains[r["position"] - first] for r in rows):
                    raise _Taken(rows)  # rolls the whole claim back (see the class)
            return rows

        try:
            rows = await self.store.run(write, session_id)
        except _Taken as taken:
            rows = taken.rows
        return [_turn(r) for r in rows]

    async def put_answer(self, session_id: str, tenant: str, position: int, chain: str,
                         answer: dict[str, Any]) -> GatewayTurn:
        """The answer at ``position``: this one, or the one a concurrent call put there first."""
        return _turn(await self.store.run(lambda c: _put(c, session_id, position, tenant, chain, answer), session_id))

    async def unstored_answers(self, older_than: float, limit: int) -> list[tuple[str, GatewayTurn]]:
        """(session, row) of answer rows written more than ``older_than`` seconds ago whose
        items are not in their session, oldest first (none marked unstorable)."""
        rows = await self.store.run(lambda c: c.fetch(
            f"SELECT session_id, {COLUMNS} FROM gateway_turns "
            "WHERE answer IS NOT NULL AND NOT stored AND unstorable IS NULL "
            "AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2",
            older_than, limit))
        return [(r["session_id"], _turn(r)) for r in rows]

    async def mark_unstorable(self, session_id: str, position: int, why: str) -> None:
        await self.store.run(lambda c: c.execute(
            "UPDATE gateway_turns SET unstorable = $3 WHERE session_id = $1 AND position = $2",
            session_id, position, why), session_id)

    async def mark_stored(self, session_id: str, positions: list[int]) -> None:
        if positions:
            await self.store.run(lambda c: c.execute(
                "UPDATE gateway_turns SET stored = true WHERE session_id = $1 AND position = ANY($2::int[])",
                session_id, positions), session_id)
