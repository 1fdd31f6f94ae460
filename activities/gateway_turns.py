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


class GatewayTurns:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def longest_prefix(self, tenant: str, chains: list[str]) -> tuple[str, int] | None:
        """(session, position) of the tenant's longest stored prefix of ``chains``; the newest
        session among those that hold it as long (a branch shares its prefix)."""
        row = await self.store.run(lambda c: c.fetchrow(
            "SELECT session_id, position FROM gateway_turns WHERE tenant = $1 AND chain = ANY($2::text[]) "
            "ORDER BY position DESC, created_at DESC LIMIT 1", tenant, chains))
        return None if row is None else (row["session_id"], row["position"])

    async def answered_after(self, tenant: str, position: int, chain: str, asked: str) -> str | None:
        """The newest of the tenant's sessions that hold ``chain`` at ``position`` and, right
        after it, an answer to a call that asked for the model ``asked``."""
        row = await self.store.run(lambda c: c.fetchrow(
            "SELECT a.session_id FROM gateway_turns t JOIN gateway_turns a "
            "ON a.session_id = t.session_id AND a.position = t.position + 1 "
            "WHERE t.tenant = $1 AND t.position = $2 AND t.chain = $3 AND a.answer ->> 'asked' = $4 "
            "ORDER BY a.created_at DESC LIMIT 1", tenant, position, chain, asked))
        return None if row is None else row["session_id"]

    async def turns(self, session_id: str) -> list[GatewayTurn]:
        """The session's rows without their answers (``at`` reads one): a conversation of
        thousands of calls would decode every answer it was given on every call."""
        rows = await self.store.run(lambda c: c.fetch(
            "SELECT position, chain, stored, answer IS NOT NULL AS answered FROM gateway_turns "
            "WHERE session_id = $1 ORDER BY position",
            session_id), session_id)
        return [_turn(r) for r in rows]

    async def at(self, session_id: str, position: int) -> GatewayTurn | None:
        row = await self.store.run(lambda c: c.fetchrow(
            "SELECT position, chain, stored, answer FROM gateway_turns WHERE session_id = $1 AND position = $2",
            session_id, position), session_id)
        return None if row is None else _turn(row)

    async def claim(self, session_id: str, tenant: str, first: int, chains: list[str]) -> list[GatewayTurn]:
        """Claim positions ``first``... for ``chains``; returns what those positions hold now
        (another call's claim where one was there first)."""
        if not chains:
            return []
        positions = list(range(first, first + len(chains)))

        async def write(c: asyncpg.Connection) -> list[asyncpg.Record]:
            await c.execute(
                "INSERT INTO gateway_turns (session_id, position, tenant, chain) "
                "SELECT $1, p, $2, h FROM unnest($3::int[], $4::text[]) AS t(p, h) ON CONFLICT DO NOTHING",
                session_id, tenant, positions, chains)
            return await c.fetch("SELECT position, chain, stored, answer FROM gateway_turns "
                                 "WHERE session_id = $1 AND position = ANY($2::int[]) ORDER BY position",
                                 session_id, positions)
        return [_turn(r) for r in await self.store.run(write, session_id)]

    async def put_answer(self, session_id: str, tenant: str, position: int, chain: str,
                         answer: dict[str, Any]) -> GatewayTurn:
        """The answer at ``position``: this one, or the one a concurrent call put there first."""
        async def write(c: asyncpg.Connection) -> asyncpg.Record:
            await c.execute("INSERT INTO gateway_turns (session_id, position, tenant, chain, answer) "
                            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                            session_id, position, tenant, chain, answer)
            return await c.fetchrow("SELECT position, chain, stored, answer FROM gateway_turns "
                                    "WHERE session_id = $1 AND position = $2", session_id, position)
        return _turn(await self.store.run(write, session_id))

    async def unstored_answers(self, older_than: float, limit: int) -> list[tuple[str, GatewayTurn]]:
        """(session, row) of answer rows written more than ``older_than`` seconds ago whose
        items are not in their session, oldest first (none marked unstorable)."""
        rows = await self.store.run(lambda c: c.fetch(
            "SELECT session_id, position, chain, stored, answer FROM gateway_turns "
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
