"""PostgreSQL data plane: exact item content, event log, observations, checkpoints.

Every write takes an id chosen by the caller (the workflow) and inserts with
``ON CONFLICT DO NOTHING``: a retried activity never duplicates a row, and a
re-write of an existing id with different content never overwrites it (the
write reports "not inserted" and a warning names the ids, never the content).

Content columns are ``jsonb``. PostgreSQL's text types cannot hold NUL characters
or lone surrogates, so values containing them are stored in a lossless wrapper
(JSON) or as bytes (observations) and decoded transparently. ``jsonb`` does not
keep object key order; keep anything that must stay byte-identical (tool-call
arguments) as a string.

Connections dropped by a server restart are retried (every operation here is
idempotent) for up to ``retry_for`` seconds while asyncpg's pool reconnects,
then :class:`StoreUnavailable` is raised. (A write retried after its connection
died mid-commit may report "not inserted" for a row the lost attempt wrote.)
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from activities.recent_rows import ItemCache, RecentPlans
from activities.store_errors import (
    CheckpointNotFound,
    ItemConflict,
    ObservationConflict,
    ObservationNotFound,
    SessionNotFound,
    StoreError,
    StoreUnavailable,
    ToolSetNotFound,
)
from activities.store_migrations import apply_migrations
from activities.store_rows import (
    ClientIdUse,
    EventRow,
    ItemRow,
    ObservationMeta,
    ObservationSlice,
    StoredEvent,
    decode_json,
    encode_json,
    encode_text,
)

log = logging.getLogger(__name__)

MAX_RECALL_CHARS = 65_536
DEFAULT_RECALL_CHARS = 16_384
_INT4_MAX = 2**31 - 1
REDACTED = "**********"

T = TypeVar("T")


def redact_url(url: str | None) -> str | None:
    """Mask the password of a URL or DSN (``user:pw@`` and ``?password=``)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, _, hostinfo = netloc.rpartition("@")
            netloc = f"{userinfo.split(':', 1)[0]}:{REDACTED}@{hostinfo}"
        query = parse_qsl(parts.query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in query):
            query = [(k, REDACTED if k.lower() == "password" else v) for k, v in query]
            parts = parts._replace(query=urlencode(query, safe="/:*"))
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return REDACTED


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("jsonb", "json"):
        await conn.set_type_codec(typ, encoder=encode_json, decoder=decode_json, schema="pg_catalog")


async def _keep_connection(conn: asyncpg.Connection) -> None:
    """What a connection goes back to the pool with: as it is. The store keeps no session state
    (no SET, LISTEN, cursors or session advisory locks: its locks are transaction-scoped), and
    the pool still rolls back a transaction left open before calling this; asyncpg's default
    (RESET ALL and the rest) is a round trip on every release, on every path of every call."""


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, (asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError,
                        asyncpg.AdminShutdownError, asyncpg.CrashShutdownError,
                        asyncpg.TooManyConnectionsError, ConnectionError, OSError)):
        return not isinstance(exc, asyncpg.ConnectionRejectionError)  # e.g. bad password
    # a connection the server dropped mid-operation can be left in a protocol state asyncpg
    # refuses to leave ("cannot switch to state 15; another operation is in progress")
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and ("closed" in str(exc) or "in progress" in str(exc))


def _where(dsn: str) -> str:
    """host:port of a DSN, for error messages (never the credentials)."""
    try:
        parts = urlsplit(dsn)
        query = dict(parse_qsl(parts.query))
        return f"{parts.hostname or query.get('host', 'localhost')}:{parts.port or query.get('port', 5432)}"
    except ValueError:
        return "the configured server"


def _taken_items(rows: list[ItemRow], stored: list[asyncpg.Record]) -> list[str]:
    """Ids of ``rows`` that a stored row holds with other content (its exact content, kind,
    role, lane or seq differ; measured metadata may differ between worker versions)."""
    wanted = {r.item_id: r for r in rows}
    by_place = {(r.lane, r.seq): r for r in rows}
    taken = []
    for row in stored:
        ours = wanted.get(row["item_id"]) or by_place.get((row["lane"], row["seq"]))
        if ours is None:
            continue
        same = (ours.item_id, ours.lane, ours.seq, ours.kind, ours.role) == \
            (row["item_id"], row["lane"], row["seq"], row["kind"], row["role"])
        if not same or decode_json(encode_json(ours.content.get("content"))) != (row["content"] or {}).get("content"):
            taken.append(ours.item_id)
    return taken


async def _refuse_taken(c: asyncpg.Connection, session_id: str, lane: str, rows: list[ItemRow],
                        digests: dict[str, str]) -> dict[str, dict]:
    """Raise :class:`ItemConflict` when an id of ``rows`` (or its lane and seq), or an
    observation id of ``digests``, holds other content; else the stored content of those of
    ``rows`` already stored (an earlier attempt's), by item id."""
    stored = await c.fetch(
        "SELECT item_id, lane, seq, kind, role, content FROM items WHERE session_id = $1"
        " AND (item_id = ANY($2::text[]) OR (lane = $3 AND seq = ANY($4::bigint[])))",
        session_id, [r.item_id for r in rows], lane, [r.seq for r in rows])
    archived = await c.fetch("SELECT obs_id, session_id, sha256 FROM observations WHERE obs_id = ANY($1)",
                             list(digests))
    taken = _taken_items(rows, stored) + [
        o["obs_id"] for o in archived if o["session_id"] != session_id or o["sha256"] != digests[o["obs_id"]]]
    if taken:
        top = await c.fetchval("SELECT max(seq) FROM items WHERE session_id = $1 AND lane = $2", session_id, lane)
        raise ItemConflict(taken, max(top if top is not None else -1, *(r.seq for r in rows)) + 1)
    return {row["item_id"]: row["content"] or {} for row in stored}


# --- the store ----------------------------------------------------------------------

class Store:
    def __init__(self, pool: asyncpg.Pool, *, retry_for: float = 15.0, where: str = "") -> None:
        self._pool = pool
        self.retry_for = retry_for
        self.where = where
        self.loop = asyncio.get_running_loop()
        self.recent_items = ItemCache()  # rows never change once written: safe to keep
        self.recent_plans = RecentPlans()

    @classmethod
    async def open(cls, dsn: str, *, min_size: int = 1, max_size: int = 10,
                   application_name: str = "context-lanes", retry_for: float = 15.0,
                   connect_timeout: float = 10.0) -> Store:
        """Create the pool and apply pending migrations.

        ``retry_for``: how long an operation waits for an unreachable server before it raises
        StoreUnavailable; ``connect_timeout``: one connection attempt.
        """
        try:
            pool = await asyncpg.create_pool(
                dsn, min_size=min_size, max_size=max_size, init=_init_connection, reset=_keep_connection,
                timeout=connect_timeout,
                server_settings={"application_name": application_name},
            )
        except Exception as exc:
            raise StoreUnavailable(f"PostgreSQL at {_where(dsn)} is unreachable ({type(exc).__name__})") from exc
        store = cls(pool, retry_for=retry_for, where=_where(dsn))
        try:
            async with pool.acquire() as conn:
                encoding = await conn.fetchval("SHOW server_encoding")
                if encoding != "UTF8":
                    raise StoreError(f"database encoding is {encoding}; Context Lanes needs UTF8")
                await apply_migrations(conn)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def closed(self) -> bool:
        return self._pool.is_closing()

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self._pool.close(), timeout=10)
        except Exception:  # includes the timeout
            self._pool.terminate()

    async def _run(self, fn: Callable[[asyncpg.Connection], Awaitable[T]], session_id: str | None = None) -> T:
        """Run ``fn`` on a pooled connection, retrying while the server is unreachable."""
        deadline = self.loop.time() + self.retry_for
        delay = 0.1
        while True:
            try:
                async with self._pool.acquire() as conn:
                    try:
                        return await fn(conn)
                    except asyncpg.InternalClientError as exc:  # asyncpg's state error on a dead socket
                        if not conn.is_closed():
                            raise
                        raise ConnectionResetError(f"connection lost: {exc}") from exc
            except asyncpg.ForeignKeyViolationError as exc:
                raise SessionNotFound(f"session {session_id!r} does not exist; call ensure_session first") from exc
            except Exception as exc:
                if not _is_connection_error(exc) or self.closed:
                    raise
                if self.loop.time() + delay > deadline:
                    raise StoreUnavailable(f"PostgreSQL at {self.where} unavailable for {self.retry_for:.0f}s "
                                           f"({type(exc).__name__})") from exc
                log.warning("PostgreSQL connection lost (%r); retrying in %.1fs", exc, delay)
                await self._pool.expire_connections()  # replace every stale idle connection
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def run(self, fn: Callable[[asyncpg.Connection], Awaitable[T]], session_id: str | None = None) -> T:
        """``fn`` on a pooled connection, retried while the server is unreachable: for the
        modules that own a table of their own (``activities/gateway_turns.py``)."""
        return await self._run(fn, session_id)

    async def ping(self) -> bool:
        try:
            async with self._pool.acquire(timeout=5) as conn:
                return await conn.fetchval("SELECT 1", timeout=5) == 1
        except Exception:
            return False

    # --- sessions -------------------------------------------------------------------

    async def ensure_session(self, session_id: str, tenant: str = "default", config: dict | None = None) -> None:
        await self._run(lambda c: c.execute(
            "INSERT INTO sessions (session_id, tenant, config) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            session_id, tenant, config or {},
        ))

    # --- items ----------------------------------------------------------------------

    async def put_items(self, session_id: str, rows: list[ItemRow]) -> int:
        """Insert items; returns how many were new (existing ids are left untouched)."""
        if not rows:
            return 0
        inserted = await self._run(lambda c: c.fetch(
            """INSERT INTO items (session_id, item_id, lane, seq, kind, role, content, client_id, client_digest)
               SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::jsonb[],
                                        $8::text[], $9::text[])
               ON CONFLICT DO NOTHING RETURNING item_id""",
            session_id, [r.item_id for r in rows], [r.lane for r in rows], [r.seq for r in rows],
            [r.kind for r in rows], [r.role for r in rows], [r.content for r in rows],
            [r.client_id for r in rows], [r.client_digest for r in rows],
        ), session_id)
        if len(inserted) < len(rows):
            await self._warn_item_conflicts(session_id, rows, {r["item_id"] for r in inserted})
        return len(inserted)

    async def put_items_with_events(self, session_id: str, rows: list[ItemRow], events: list[EventRow],
                                    observation: tuple[str, str, str] | None = None) -> int:
        """``put_items`` then ``append_events`` in one statement (one round trip, one transaction:
        an item and its events are committed together); returns how many items were new.
        ``observation`` (obs id, item id, text): stored in the same statement, for text that is the
        same whichever attempt writes it (the first write wins, as ``put_observation``'s)."""
        if not events and observation is None:
            return await self.put_items(session_id, rows)
        archive, archive_args = "", []
        if observation is not None:
            obs_id, item_id, text = observation
            data, as_text = encode_text(text)
            archive = """, new_observation AS (
                 INSERT INTO observations (obs_id, session_id, item_id, text_content, bytes_content,
                                           size_chars, size_bytes, sha256)
                 VALUES ($15, $1, $16, $17, $18, $19, $20, $21) ON CONFLICT DO NOTHING)"""
            archive_args = [obs_id, item_id, text if as_text else None, None if as_text else data,
                            len(text), len(data), hashlib.sha256(data).hexdigest()]
        # Every data-modifying CTE runs to completion whether or not the final SELECT reads it;
        # the events take the session's lock as append_events does (ids in commit order).
        inserted = await self._run(lambda c: c.fetch(
            """WITH session_lock AS (SELECT pg_advisory_xact_lock(hashtextextended('lanes.events:' || $1, 0))),
               new_items AS (
                 INSERT INTO items (session_id, item_id, lane, seq, kind, role, content, client_id, client_digest)
                 SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::jsonb[],
                                          $8::text[], $9::text[])
                 ON CONFLICT DO NOTHING RETURNING item_id),
               new_events AS (
                 INSERT INTO events (session_id, lane, seq, event_id, kind, payload)
                 SELECT $1, e.* FROM session_lock,
                        unnest($10::text[], $11::bigint[], $12::text[], $13::text[], $14::jsonb[]) AS e
                 ON CONFLICT DO NOTHING RETURNING event_id)""" + archive + """
               SELECT item_id FROM new_items""",
            session_id, [r.item_id for r in rows], [r.lane for r in rows], [r.seq for r in rows],
            [r.kind for r in rows], [r.role for r in rows], [r.content for r in rows],
            [r.client_id for r in rows], [r.client_digest for r in rows],
            [e.lane for e in events], [e.seq for e in events], [e.event_id for e in events],
            [e.kind for e in events], [e.payload for e in events], *archive_args), session_id)
        if len(inserted) < len(rows):
            await self._warn_item_conflicts(session_id, rows, {r["item_id"] for r in inserted})
        return len(inserted)

    async def put_items_exactly(self, session_id: str, lane: str, rows: list[ItemRow], events: list[EventRow],
                                observations: list[tuple[str, str, str]]) -> int:
        """Store the items, their observations (obs id, item id, text) and events in one
        transaction, or nothing: when an item id (or its lane and seq) or an observation id
        already holds other content, raise :class:`ItemConflict` naming them and the lane's next
        free seq. The same content already stored (an earlier attempt of the same write) is no
        conflict. Returns how many items were new."""
        encoded = [(obs_id, item_id, text, *encode_text(text)) for obs_id, item_id, text in observations]
        digests = {obs_id: hashlib.sha256(data).hexdigest() for obs_id, _, _, data, _ in encoded}

        async def write(c: asyncpg.Connection) -> int:
            async with c.transaction():
                # the events' lock (ids in commit order), which also orders two writes of one session
                await c.execute("SELECT pg_advisory_xact_lock(hashtextextended('lanes.events:' || $1, 0))", session_id)
                await _refuse_taken(c, session_id, lane, rows, digests)
                if encoded:
                    await c.execute(
                        """INSERT INTO observations (obs_id, session_id, item_id, text_content, bytes_content,
                                                     size_chars, size_bytes, sha256)
                           SELECT o.obs_id, $1, o.item_id, o.text_content, o.bytes_content, o.size_chars,
                                  o.size_bytes, o.sha256
                           FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[], $7::bigint[],
                                       $8::text[])
                                AS o(obs_id, item_id, text_content, bytes_content, size_chars, size_bytes, sha256)
                           ON CONFLICT DO NOTHING""",
                        session_id, [e[0] for e in encoded], [e[1] for e in encoded],
                        [e[2] if e[4] else None for e in encoded], [None if e[4] else e[3] for e in encoded],
                        [len(e[2]) for e in encoded], [len(e[3]) for e in encoded], [digests[e[0]] for e in encoded])
                inserted = await c.fetch(
                    """INSERT INTO items (session_id, item_id, lane, seq, kind, role, content, client_id, client_digest)
                       SELECT $1, * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
                                                $7::jsonb[], $8::text[], $9::text[])
                       ON CONFLICT DO NOTHING RETURNING item_id""",
                    session_id, [r.item_id for r in rows], [r.lane for r in rows], [r.seq for r in rows],
                    [r.kind for r in rows], [r.role for r in rows], [r.content for r in rows],
                    [r.client_id for r in rows], [r.client_digest for r in rows])
                await c.execute(
                    """INSERT INTO events (session_id, lane, seq, event_id, kind, payload)
                       SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::jsonb[])
                       ON CONFLICT DO NOTHING""",
                    session_id, [e.lane for e in events], [e.seq for e in events], [e.event_id for e in events],
                    [e.kind for e in events], [e.payload for e in events])
                return len(inserted)

        return await self._run(write, session_id)

    async def check_items_free(self, session_id: str, lane: str, rows: list[ItemRow],
                               observations: list[tuple[str, str, str]]) -> dict[str, dict]:
        """Raise :class:`ItemConflict` as ``put_items_exactly`` would for these rows, writing
        nothing (a write that is to follow, once nothing else can take the ids, must not fail);
        the stored content (``ItemRow.content``) of those already stored with the same content."""
        digests = {obs_id: hashlib.sha256(encode_text(text)[0]).hexdigest() for obs_id, _, text in observations}
        return await self._run(lambda c: _refuse_taken(c, session_id, lane, rows, digests), session_id)

    async def _warn_item_conflicts(self, session_id: str, rows: list[ItemRow], new: set[str]) -> None:
        skipped = [r for r in rows if r.item_id not in new]
        existing = await self.get_items(session_id, [r.item_id for r in skipped])
        fields = ("lane", "seq", "kind", "role", "content")
        differ = [r.item_id for r in skipped
                  if r.item_id not in existing or r.model_dump(include=set(fields)) !=
                  existing[r.item_id].model_dump(include=set(fields))]
        if differ:
            log.warning("session %s: items not written, id or (lane, seq) already taken by different "
                        "content: %s", session_id, differ[:20])

    async def get_items(self, session_id: str, item_ids: list[str]) -> dict[str, ItemRow]:
        rows = await self._run(lambda c: c.fetch(
            "SELECT item_id, lane, seq, kind, role, content, created_at, client_id, client_digest FROM items"
            " WHERE session_id = $1 AND item_id = ANY($2::text[])", session_id, list(item_ids)))
        return {r["item_id"]: ItemRow(**dict(r)) for r in rows}

    async def list_items(self, session_id: str, lane: str | None = None, after_seq: int = -1,
                         limit: int = 1000) -> list[ItemRow]:
        """Items by (lane, seq); page with ``after_seq`` within one lane."""
        rows = await self._run(lambda c: c.fetch(
            "SELECT item_id, lane, seq, kind, role, content, created_at, client_id, client_digest FROM items"
            " WHERE session_id = $1 AND ($2::text IS NULL OR lane = $2) AND seq > $3"
            " ORDER BY lane, seq LIMIT $4", session_id, lane, after_seq, _check_limit(limit)))
        return [ItemRow(**dict(r)) for r in rows]

    async def client_id_uses(self, session_id: str, client_ids: list[str]) -> dict[str, ClientIdUse]:
        """The stored items among ``client_ids``, by client id."""
        if not client_ids:
            return {}
        rows = await self._run(lambda c: c.fetch(
            "SELECT client_id, item_id, client_digest FROM items WHERE session_id = $1 AND client_id = ANY($2::text[])",
            session_id, list(client_ids)), session_id)
        return {r["client_id"]: ClientIdUse(**dict(r)) for r in rows}

    async def count_items(self, session_id: str) -> int:
        return await self._run(lambda c: c.fetchval("SELECT count(*) FROM items WHERE session_id = $1", session_id))

    async def item_ids(self, session_id: str) -> list[str]:
        """Every stored item id of the session, by (lane, seq)."""
        rows = await self._run(lambda c: c.fetch(
            "SELECT item_id FROM items WHERE session_id = $1 ORDER BY lane, seq", session_id))
        return [r["item_id"] for r in rows]

    # --- tool sets (migration 0004) --------------------------------------------------

    async def put_tool_set(self, session_id: str, tool_set_id: str, definitions: list[dict]) -> None:
        """Store an agent's tool definitions once (the id is their digest: idempotent)."""
        await self._run(lambda c: c.execute(
            "INSERT INTO tool_sets (session_id, tool_set_id, definitions) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            session_id, tool_set_id, definitions), session_id)

    async def get_tool_set(self, session_id: str, tool_set_id: str) -> list[dict]:
        definitions = await self._run(lambda c: c.fetchval(
            "SELECT definitions FROM tool_sets WHERE session_id = $1 AND tool_set_id = $2",
            session_id, tool_set_id), session_id)
        if definitions is None:
            raise ToolSetNotFound(f"tool set {tool_set_id!r} is not stored for session {session_id!r}")
        return list(definitions)

    # --- request plans (migration 0002) ---------------------------------------------

    async def put_plan(self, session_id: str, lane: str, version: int, entries: list) -> bool:
        """Store the full plan ``version`` of a lane once; returns whether it was new."""
        status = await self._run(lambda c: c.execute(
            "INSERT INTO request_plans (session_id, lane, version, entries) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT DO NOTHING", session_id, lane, version, entries), session_id)
        return status.endswith(" 1")

    async def get_plan(self, session_id: str, lane: str, version: int) -> list | None:
        return await self._run(lambda c: c.fetchval(
            "SELECT entries FROM request_plans WHERE session_id = $1 AND lane = $2 AND version = $3",
            session_id, lane, version))

    # --- tool attempts (migration 0003) ----------------------------------------------

    async def start_tool_attempt(self, session_id: str, item_id: str) -> datetime | None:
        """Record that the call producing ``item_id`` starts. None: this is its first attempt;
        else when an earlier attempt started it."""
        async def claim(conn: asyncpg.Connection) -> datetime | None:
            inserted = await conn.fetchval(
                "INSERT INTO tool_attempts (session_id, item_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
                " RETURNING started_at", session_id, item_id)
            if inserted is not None:
                return None
            return await conn.fetchval("SELECT started_at FROM tool_attempts WHERE session_id = $1 AND item_id = $2",
                                       session_id, item_id)

        return await self._run(claim, session_id)

    # --- events ---------------------------------------------------------------------

    async def append_events(self, session_id: str, events: list[EventRow]) -> int:
        """Append events; returns how many were new. Appends to one session are
        serialised so that the global ``id`` follows commit order within a session."""
        if not events:
            return 0

        # One statement, one round trip (an explicit transaction took four): the lock's CTE holds
        # a volatile call, so it is evaluated once, before the join yields the rows that take
        # their ids; the xact lock lasts until the statement's implicit transaction commits.
        count = len(await self._run(lambda c: c.fetch(
            """WITH session_lock AS (SELECT pg_advisory_xact_lock(hashtextextended('lanes.events:' || $1, 0)))
               INSERT INTO events (session_id, lane, seq, event_id, kind, payload)
               SELECT $1, e.* FROM session_lock,
                      unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::jsonb[]) AS e
               ON CONFLICT DO NOTHING RETURNING event_id""",
            session_id, [e.lane for e in events], [e.seq for e in events],
            [e.event_id for e in events], [e.kind for e in events], [e.payload for e in events]), session_id))
        if count < len(events):
            log.debug("session %s: %d of %d events already present", session_id, len(events) - count, len(events))
        return count

    async def list_events(self, session_id: str, after_id: int = 0, limit: int = 200) -> list[StoredEvent]:
        rows = await self._run(lambda c: c.fetch(
            "SELECT id, session_id, lane, seq, event_id, kind, payload, created_at FROM events"
            " WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3", session_id, after_id, _check_limit(limit)))
        return [StoredEvent(**dict(r)) for r in rows]

    async def lane_events(self, session_id: str, lanes: list[str], kinds: list[str] | None = None) -> list[StoredEvent]:
        """Every event of ``lanes`` (optionally only these ``kinds``), by (lane, seq);
        the primary key (session_id, lane, seq) serves the scan."""
        rows = await self._run(lambda c: c.fetch(
            "SELECT id, session_id, lane, seq, event_id, kind, payload, created_at FROM events"
            " WHERE session_id = $1 AND lane = ANY($2::text[]) AND ($3::text[] IS NULL OR kind = ANY($3::text[]))"
            " ORDER BY lane, seq", session_id, list(lanes), None if kinds is None else list(kinds)))
        return [StoredEvent(**dict(r)) for r in rows]

    # --- observations ---------------------------------------------------------------

    async def put_observation(self, session_id: str, obs_id: str, item_id: str, text: str) -> ObservationMeta:
        """Store exact text once; a re-put returns the stored metadata (``inserted=False``)."""
        data, as_text = encode_text(text)
        digest = hashlib.sha256(data).hexdigest()
        created = await self._run(lambda c: c.fetchval(
            """INSERT INTO observations (obs_id, session_id, item_id, text_content, bytes_content,
                                         size_chars, size_bytes, sha256)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING created_at""",
            obs_id, session_id, item_id, text if as_text else None, None if as_text else data,
            len(text), len(data), digest), session_id)
        if created is not None:
            return ObservationMeta(session_id=session_id, obs_id=obs_id, item_id=item_id, size_chars=len(text),
                                   size_bytes=len(data), sha256=digest, created_at=created, inserted=True)
        meta = await self._observation_meta(obs_id)
        if meta is None:  # deleted in between; cannot happen without a DELETE
            raise StoreError(f"observation {obs_id!r} vanished while being written")
        if meta.session_id != session_id:
            raise ObservationConflict(f"observation id {obs_id!r} already belongs to another session")
        if meta.sha256 != digest:
            log.warning("session %s: observation %s not overwritten: stored content differs", session_id, obs_id)
        return meta

    async def _observation_meta(self, obs_id: str) -> ObservationMeta | None:
        row = await self._run(lambda c: c.fetchrow(
            "SELECT session_id, obs_id, item_id, size_chars, size_bytes, sha256, created_at"
            " FROM observations WHERE obs_id = $1", obs_id))
        return ObservationMeta(**dict(row)) if row else None

    async def count_observations(self, session_id: str) -> int:
        return await self._run(lambda c: c.fetchval(
            "SELECT count(*) FROM observations WHERE session_id = $1", session_id))

    async def observation_meta(self, session_id: str, obs_id: str) -> ObservationMeta:
        meta = await self._observation_meta(obs_id)
        if meta is None or meta.session_id != session_id:
            raise ObservationNotFound(f"observation {obs_id!r} not found in session {session_id!r}")
        return meta

    async def read_observation(self, session_id: str, obs_id: str, offset: int = 0,
                               limit: int = DEFAULT_RECALL_CHARS) -> ObservationSlice:
        """Exact slice ``[offset, offset + limit)`` of the text, in characters."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0 (got {offset})")
        if limit <= 0:
            raise ValueError(f"limit must be > 0 (got {limit})")
        limit = min(limit, MAX_RECALL_CHARS)
        start = min(offset, _INT4_MAX - 1) + 1  # SQL substr is 1-based
        row = await self._run(lambda c: c.fetchrow(
            "SELECT size_chars, text_content IS NULL AS in_bytes, substr(text_content, $3, $4) AS part"
            " FROM observations WHERE obs_id = $1 AND session_id = $2", obs_id, session_id, start, limit))
        if row is None:
            raise ObservationNotFound(f"observation {obs_id!r} not found in session {session_id!r}")
        total = row["size_chars"]
        part = row["part"] or ""
        if row["in_bytes"]:  # rare: text with NUL / lone surrogates, sliced here
            data = await self._run(lambda c: c.fetchval(
                "SELECT bytes_content FROM observations WHERE obs_id = $1", obs_id))
            part = bytes(data).decode("utf-8", "surrogatepass")[offset:offset + limit]
        end = offset + len(part)
        eof = end >= total
        return ObservationSlice(obs_id=obs_id, offset=offset, limit=limit, text=part, total_chars=total,
                                next_offset=None if eof else end, eof=eof)

    # --- checkpoints ----------------------------------------------------------------

    async def put_checkpoint(self, session_id: str, checkpoint_id: str, lane: str, state: dict) -> bool:
        status = await self._run(lambda c: c.execute(
            "INSERT INTO checkpoints (checkpoint_id, session_id, lane, state) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT DO NOTHING", checkpoint_id, session_id, lane, state), session_id)
        inserted = status.endswith(" 1")
        if not inserted:
            log.debug("session %s: checkpoint %s already present", session_id, checkpoint_id)
        return inserted

    async def get_checkpoint(self, session_id: str, checkpoint_id: str) -> dict:
        state = await self._run(lambda c: c.fetchval(
            "SELECT state FROM checkpoints WHERE checkpoint_id = $1 AND session_id = $2", checkpoint_id, session_id))
        if state is None:
            raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} not found in session {session_id!r}")
        return state


def _check_limit(limit: int) -> int:
    if limit <= 0:
        raise ValueError(f"limit must be > 0 (got {limit})")
    return min(limit, 10_000)
