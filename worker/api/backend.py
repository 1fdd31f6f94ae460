"""What the API talks to: the Temporal client and the PostgreSQL store, connected lazily
(the process starts and answers ``/healthz`` while either is down), plus the queries
on the ``sessions`` table that the store has no method for (raw SQL through its pool).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.store import Store
from activities.store_errors import StoreError
from worker.api.errors import (
    ApiError,
    from_temporal,
    is_recovering,
    outcome_unknown,
    session_ended,
    session_not_found,
    store_unavailable,
)
from worker.sessions import through_handover
from worker.settings import Settings, redact_url

log = logging.getLogger("lanes.api")

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0
# During a PostgreSQL outage every store-backed call answers 503 within about this long.
STORE_RETRY_SECONDS = 1.0
STORE_CONNECT_TIMEOUT = 1.0
QUERY_TIMEOUT = 10.0  # a query on a session whose worker is down would wait a long time
UPDATE_TIMEOUT = 60.0  # prepare_request may run a compaction (a few activities)
CHECK_TIMEOUT = 3.0
ATTEMPT_TIMEOUT = 20.0  # one wait for an update's outcome; then it is asked again under its id
FIRST_TASK_CHARS = 200  # of a session's first task, in a list of sessions
# RPC failures after which an update may or may not have been taken: asked again, same id.
_UNSETTLED_STATUS = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED,
                     RPCStatusCode.UNKNOWN, RPCStatusCode.INTERNAL, RPCStatusCode.ABORTED)


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    tenant: str
    created_at: datetime
    config: dict[str, Any]

    @property
    def mode(self) -> str:
        return str(self.config.get("mode") or "hosted")


@dataclass(frozen=True)
class SessionActivity:
    first_task: str | None
    turns: int
    last_activity: datetime | None


class Backend:
    def __init__(self, settings: Settings, *, client: Client | None = None, store: Store | None = None) -> None:
        self.settings = settings
        self._client = client
        self._store = store
        self._own_store = store is None
        self._lock: asyncio.Lock | None = None

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # --- connections ------------------------------------------------------------------

    async def client(self) -> Client:
        if self._client is not None:
            return self._client
        async with self._guard():
            if self._client is None:
                from worker.worker import connect

                try:
                    self._client = await asyncio.wait_for(connect(self.settings), CONNECT_TIMEOUT)
                except Exception as exc:  # includes the timeout
                    raise ApiError(503, "temporal_unavailable",
                                   f"cannot reach Temporal at {self.settings.temporal_address}: "
                                   f"{type(exc).__name__}: {exc}", headers={"Retry-After": "2"}) from None
        return self._client

    async def store(self) -> Store:
        if self._store is not None and not self._store.closed:
            return self._store
        if not self.settings.database_url:
            raise ApiError(503, "postgres_unavailable", "DATABASE_URL is not set for the API process")
        async with self._guard():
            if self._store is None or self._store.closed:
                try:
                    self._store = await asyncio.wait_for(Store.open(
                        self.settings.database_url, retry_for=STORE_RETRY_SECONDS,
                        connect_timeout=STORE_CONNECT_TIMEOUT, max_size=self.settings.db_pool_size), CONNECT_TIMEOUT)
                except Exception as exc:
                    log.warning("cannot reach PostgreSQL at %s: %r", redact_url(self.settings.database_url), exc)
                    raise store_unavailable() from None
        return self._store

    async def close(self) -> None:
        if self._own_store and self._store is not None:
            await self._store.close()
            self._store = None

    async def check_temporal(self) -> tuple[bool, str]:
        try:
            client = await asyncio.wait_for(self.client(), CHECK_TIMEOUT)
        except ApiError as exc:
            return False, exc.message
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        failure = ""
        for _ in range(2):  # one slow or dropped answer on a loaded host is not an unreachable server
            try:
                await asyncio.wait_for(client.service_client.check_health(), CHECK_TIMEOUT)
                return True, self.settings.temporal_address
            except Exception as exc:
                failure = f"{type(exc).__name__}: {exc}"
        return False, failure

    async def check_postgres(self) -> tuple[bool, str]:
        try:
            store = await asyncio.wait_for(self.store(), CHECK_TIMEOUT)
        except ApiError as exc:
            return False, exc.message
        except TimeoutError:
            return False, f"no connection within {CHECK_TIMEOUT:.0f} s"
        ok = await asyncio.wait_for(store.ping(), CHECK_TIMEOUT + 5)
        return ok, "reachable" if ok else "ping failed"

    # --- the sessions table -------------------------------------------------------------

    async def sql(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        store = await self.store()
        try:
            return await store._run(fn)  # the store's retrying runner; the SQL is this module's
        except StoreError as exc:
            log.warning("session table: %s", exc)
            raise store_unavailable() from None

    async def create_session_row(self, session_id: str, tenant: str, config: dict[str, Any]) -> datetime:
        created = await self.sql(lambda c: c.fetchval(
            "INSERT INTO sessions (session_id, tenant, config) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING RETURNING created_at", session_id, tenant, config))
        if created is None:
            raise ApiError(409, "conflict", f"session id {session_id!r} is already taken")
        return created

    async def delete_session_row(self, session_id: str, tenant: str) -> None:
        await self.sql(lambda c: c.execute(
            "DELETE FROM sessions WHERE session_id = $1 AND tenant = $2", session_id, tenant))

    async def owned_session(self, session_id: str, tenant: str) -> SessionRow:
        """The session row when ``tenant`` owns it; 404 otherwise (never say it exists)."""
        row = await self.sql(lambda c: c.fetchrow(
            "SELECT session_id, tenant, created_at, config FROM sessions WHERE session_id = $1", session_id))
        if row is None or row["tenant"] != tenant:
            raise session_not_found(session_id)
        return SessionRow(row["session_id"], row["tenant"], row["created_at"], dict(row["config"] or {}))

    async def list_sessions(self, tenant: str, limit: int, cursor: str | None) -> tuple[list[SessionRow], str | None]:
        """Newest first; ``cursor`` is the opaque ``next_cursor`` of the previous page."""
        after = decode_cursor(cursor) if cursor else None
        rows = await self.sql(lambda c: c.fetch(
            "SELECT session_id, tenant, created_at, config FROM sessions WHERE tenant = $1"
            " AND ($2::timestamptz IS NULL OR (created_at, session_id) < ($2, $3))"
            " ORDER BY created_at DESC, session_id DESC LIMIT $4",
            tenant, after[0] if after else None, after[1] if after else "", limit + 1))
        page = [SessionRow(r["session_id"], r["tenant"], r["created_at"], dict(r["config"] or {}))
                for r in rows[:limit]]
        next_cursor = encode_cursor(page[-1]) if len(rows) > limit else None
        return page, next_cursor

    async def session_activity(self, session_ids: list[str]) -> dict[str, SessionActivity]:
        """What a list of sessions shows of each: its first task's text, its model turns (the
        main lane's assistant items) and when it last stored an item or an event."""
        if not session_ids:
            return {}
        rows = await self.sql(lambda c: c.fetch(
            """SELECT s.session_id,
                 (SELECT left(i.content -> 'content' ->> 'text', $2) FROM items i
                   WHERE i.session_id = s.session_id AND i.lane = 'main' AND i.kind = 'user'
                   ORDER BY i.seq LIMIT 1) AS first_task,
                 (SELECT count(*) FROM items i
                   WHERE i.session_id = s.session_id AND i.lane = 'main' AND i.kind = 'assistant') AS turns,
                 GREATEST((SELECT i.created_at FROM items i WHERE i.session_id = s.session_id AND i.lane = 'main'
                            ORDER BY i.seq DESC LIMIT 1),
                          (SELECT e.created_at FROM events e WHERE e.session_id = s.session_id
                            ORDER BY e.id DESC LIMIT 1)) AS last_activity
               FROM unnest($1::text[]) AS s(session_id)""", session_ids, FIRST_TASK_CHARS))
        return {r["session_id"]: SessionActivity(r["first_task"], r["turns"], r["last_activity"]) for r in rows}

    # --- Temporal -----------------------------------------------------------------------

    async def handle(self, session_id: str) -> WorkflowHandle:
        return (await self.client()).get_workflow_handle(session_id)

    async def temporal(self, session_id: str, action: str, call: Callable[[WorkflowHandle], Awaitable[T]],
                       timeout: float = UPDATE_TIMEOUT) -> T:
        """Run ``call`` on the session's workflow handle, translating every Temporal failure."""
        handle = await self.handle(session_id)
        try:
            # a call that lands while the session continues as new is retried: clients never see it
            return await asyncio.wait_for(through_handover(lambda: call(handle), timeout), timeout)
        except Exception as exc:
            error = from_temporal(exc, session_id, action)
            if error.status == 404 and await self._has_ended(handle):
                # an update admitted as the run completed comes back "not found" (the message varies
                # with the server); the session exists, it has ended
                error = session_ended(session_id, action)
            raise error from None

    async def update(self, session_id: str, action: str, update: Any, arg: Any = None, *, update_id: str | None = None,
                     timeout: float = UPDATE_TIMEOUT) -> Any:
        """Run the workflow update ``update`` once: under one update id (``update_id``, else a
        new one), asked again while its outcome is unsettled (Temporal unreachable, an update
        aborted before it was accepted, a wait that ran out): the server answers a seen id with
        its first outcome, so the update is applied at most once and the answer is its own.
        Refusals that admitted nothing (the session recovering from a lost workflow task) are
        asked again too. When the outcome stays unsettled for ``timeout``: 503 ``outcome_unknown``
        (the call may have been applied; only a keyed call can be sent again safely)."""
        handle = await self.handle(session_id)
        update_id = update_id or f"api-{uuid.uuid4().hex}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.1
        unsettled = False  # an attempt may have been admitted: the outcome is unknown until answered
        args = () if arg is None else (arg,)
        while True:
            left = deadline - loop.time()
            try:
                return await asyncio.wait_for(through_handover(
                    lambda: handle.execute_update(update, *args, id=update_id), left), min(ATTEMPT_TIMEOUT, left))
            except Exception as exc:
                unsettled = unsettled or _unsettled(exc)
                if not _unsettled(exc) and not is_recovering(exc):
                    error = from_temporal(exc, session_id, action)
                    if error.status == 404 and await self._has_ended(handle):
                        error = session_ended(session_id, action)
                    raise error from None
                if loop.time() + delay >= deadline:
                    if not unsettled:  # refused every time, never admitted: nothing was applied
                        raise from_temporal(exc, session_id, action) from None
                    log.warning("update %s of %s unsettled after %.0f s: %r", update_id, session_id, timeout, exc)
                    raise outcome_unknown(session_id, action) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _has_ended(self, handle: WorkflowHandle) -> bool:
        try:
            described = await asyncio.wait_for(handle.describe(), CHECK_TIMEOUT)
        except Exception:  # gone too (retention), or unreachable: the 404 stands
            return False
        return described.status is not None and described.status != WorkflowExecutionStatus.RUNNING


def _unsettled(error: BaseException) -> bool:
    """Whether an update that failed so may still have been (or be) applied."""
    if isinstance(error, (TimeoutError, RPCTimeoutOrCancelledError, WorkflowUpdateRPCTimeoutOrCancelledError,
                          ConnectionError)):
        return True
    return isinstance(error, RPCError) and error.status in _UNSETTLED_STATUS


def encode_cursor(row: SessionRow) -> str:
    raw = json.dumps([row.created_at.isoformat(), row.session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, session_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(created), str(session_id)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "bad_cursor", "cursor is not one this API returned (use next_cursor as is)") from None
