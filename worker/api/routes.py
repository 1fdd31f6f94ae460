"""The ``/v1`` endpoints. Every one needs a tenant's bearer token (checked by the guard
middleware before anything else); a session belongs to the tenant that created it and
is 404 for every other tenant, with everything under it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials

from activities.store import DEFAULT_RECALL_CHARS, MAX_RECALL_CHARS
from activities.store_errors import ObservationNotFound, StoreError
from lanes_client.schemas import (
    MAX_MESSAGE_WAIT_SECONDS,
    OBS_PATTERN,
    CancelRequest,
    CancelResult,
    EpisodeList,
    EpisodeOut,
    EventOut,
    EventPage,
    ItemContentOut,
    MessageAccepted,
    MessageIn,
    ObservationOut,
    SessionCreate,
    SessionCreated,
    SessionInfo,
    SessionList,
    SessionSummary,
    TaskOut,
    WorkflowInfo,
)
from lanes_client.shapes import SessionStatus as WireSessionStatus
from worker.api.agent_world import agent_definitions
from worker.api.answers import find_task, session_status, task_out, wait_for_task
from worker.api.auth import bearer_scheme
from worker.api.backend import QUERY_TIMEOUT, Backend, SessionRow
from worker.api.errors import ApiError, ErrorResponse, from_temporal, not_found, store_unavailable
from worker.api.session_config import catalog_tools, session_config
from worker.api.session_config import row_config as config_of_row
from worker.sessions import new_session_id, start_session
from workflows.context import ContextReport, observation_address
from workflows.contract.external_calls import json_digest
from workflows.contract.session import (
    SessionStatus,
    SubmitRequest,
    SubmitResult,
)
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.api")

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
ITEM_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$"
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")
STREAM_POLL_SECONDS = 0.5
STREAM_KEEPALIVE_SECONDS = 15.0
MAX_ITEM_VIEW_CHARS = 1_000_000

_ERR = {"model": ErrorResponse}
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {**_ERR, "description": "rejected input (the message says why)"},
    401: {**_ERR, "description": "missing or invalid bearer token"},
    404: {**_ERR, "description": "no such session for this tenant (or no such item under it)"},
    409: {**_ERR, "description": "the session's state does not allow this now"},
    413: {**_ERR, "description": "request body too large"},
    422: {**_ERR, "description": "malformed request (the message names the field); request_unfit: the next "
                                "request cannot fit the session's budget (the message names what does not fit)"},
    429: {**_ERR, "description": "Temporal is busy; retry"},
    503: {**_ERR, "description": "Temporal or PostgreSQL unreachable, or the session is still starting"},
    504: {**_ERR, "description": "the session did not answer in time (no worker?)"},
}

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, min_length=1, max_length=64,
                                description="session id (as returned by POST /v1/sessions)")]


# --- dependencies --------------------------------------------------------------------------


def backend(request: Request) -> Backend:
    return request.app.state.backend


def tenant(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None,
                                                    Depends(bearer_scheme)]) -> str:
    """The request's tenant. The guard middleware already authenticated the request; this
    dependency repeats the check (cheap) so that a route mounted without the guard is safe."""
    known = getattr(request.state, "tenant", None)
    return known if known is not None else request.app.state.auth(credentials)


Tenant = Annotated[str, Depends(tenant)]
Be = Annotated[Backend, Depends(backend)]


async def owned(request: Request, session_id: SessionId, tenant: Tenant, be: Be) -> SessionRow:
    row = await be.owned_session(session_id, tenant)
    await request.app.state.answer_writes.settle(session_id)  # an answer the gateway gave is in the session
    return row


Owned = Annotated[SessionRow, Depends(owned)]


# --- sessions ----------------------------------------------------------------------------


@router.post("/sessions", status_code=201, response_model=SessionCreated, tags=["sessions"],
             summary="Create a session (hosted or external-agent mode)")
async def create_session(request: Request, response: Response, tenant: Tenant, be: Be,
                         body: Annotated[SessionCreate | None, Body()] = None) -> SessionCreated:
    created = await open_session(request, tenant, be, body or SessionCreate())
    response.headers["Location"] = f"/v1/sessions/{created.session_id}"
    return created


async def open_session(request: Request, tenant: str, be: Backend, body: SessionCreate,
                       session_id: str | None = None) -> SessionCreated:
    """Create and start a session (the route above, and the gateway's first call of a conversation,
    under an id of its own: 409 ``conflict`` when that id is taken)."""
    session_id = session_id or new_session_id("ses")
    definitions = agent_definitions(body, catalog_tools(body))
    config = session_config(body, session_id, tenant, request, definitions)
    row_config = config_of_row(body, config)
    client = await be.client()  # reachable before anything is written
    created = await be.create_session_row(session_id, tenant, row_config)
    if config.tool_set is not None:  # stored before the session starts: it measures them
        try:
            await (await be.store()).put_tool_set(session_id, config.tool_set, definitions)
        except StoreError:
            await be.delete_session_row(session_id, tenant)
            raise store_unavailable() from None
    try:
        await asyncio.wait_for(start_session(client, config, request.app.state.settings.task_queue), 30)
    except Exception as exc:
        await be.delete_session_row(session_id, tenant)
        raise from_temporal(exc, session_id, "start the session") from None
    return SessionCreated(session_id=session_id, mode=body.mode, created_at=created, config=row_config)


@router.get("/sessions", response_model=SessionList, tags=["sessions"], summary="The tenant's sessions, newest first")
async def list_sessions(tenant: Tenant, be: Be,
                        limit: Annotated[int, Query(ge=1, le=500)] = 50,
                        cursor: Annotated[str | None, Query(min_length=1, max_length=500)] = None) -> SessionList:
    rows, next_cursor = await be.list_sessions(tenant, limit, cursor)
    activity = await be.session_activity([r.session_id for r in rows])
    return SessionList(
        sessions=[SessionSummary(session_id=r.session_id, mode=r.mode, created_at=r.created_at, config=r.config,
                                 **vars(activity[r.session_id])) for r in rows],
        next_cursor=next_cursor,
    )


@router.get("/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"],
            summary="A session: its configuration, workflow state and task status")
async def get_session(row: Owned, be: Be) -> SessionInfo:
    info = SessionInfo(session_id=row.session_id, mode=row.mode, created_at=row.created_at, config=row.config)
    described = await be.temporal(row.session_id, "describe the session", lambda h: h.describe(), QUERY_TIMEOUT)
    info.workflow = WorkflowInfo(
        status=described.status.name if described.status is not None else "UNKNOWN",
        start_time=described.start_time, close_time=described.close_time,
        history_length=described.history_length,
    )
    try:
        status: SessionStatus = await be.temporal(row.session_id, "report its status",
                                                  lambda h: h.query(SessionWorkflow.status), QUERY_TIMEOUT)
        info.status = WireSessionStatus.model_validate(status.model_dump())  # the engine's model -> the wire's
    except ApiError as exc:
        info.status_error = exc.message
    return info


@router.post("/sessions/{session_id}/cancel", response_model=CancelResult, tags=["sessions"],
             summary="Close the session (after its queued tasks) or terminate it now")
async def cancel_session(row: Owned, be: Be, tenant: Tenant, request: Request,
                         body: Annotated[CancelRequest | None, Body()] = None) -> CancelResult:
    body = body or CancelRequest()
    sid = row.session_id
    # the gateway's next call must not continue a plan of this session (worker/api/gateway/continuation.py)
    request.app.state.continuations.drop(sid)
    described = await be.temporal(sid, "describe the session", lambda h: h.describe(), QUERY_TIMEOUT)
    if described.status is not None and described.status.name != "RUNNING":
        return CancelResult(session_id=sid, action="none", workflow_status=described.status.name)
    if body.action == "terminate":
        reason = body.reason or f"terminated through the API by tenant {tenant}"
        await be.temporal(sid, "terminate the session", lambda h: h.terminate(reason=reason))
    else:
        await be.temporal(sid, "close the session", lambda h: h.signal(SessionWorkflow.close))
    described = await be.temporal(sid, "describe the session", lambda h: h.describe(), QUERY_TIMEOUT)
    return CancelResult(session_id=sid, action=body.action,
                        workflow_status=described.status.name if described.status is not None else None)


# --- hosted mode ---------------------------------------------------------------------------


MaxChars = Annotated[int, Query(ge=1, le=MAX_ITEM_VIEW_CHARS, description="characters of the answer's text returned")]


@router.post("/sessions/{session_id}/messages", status_code=202, response_model=MessageAccepted, tags=["hosted"],
             summary="Send a user message: it becomes a task the hosted agent loop runs",
             responses={200: {"model": MessageAccepted, "description": "with ?wait=: the task finished within the "
                                                                      "wait (task holds its state and answer)"}})
async def send_message(
    row: Owned, be: Be, body: MessageIn, response: Response,
    wait: Annotated[float | None, Query(ge=0, le=MAX_MESSAGE_WAIT_SECONDS,
                                        description="wait up to this many seconds for the task to finish: 200 with "
                                                    "the task and its answer, else 202 with the task still running")] = None,
    max_chars: MaxChars = 65_536,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> MessageAccepted:
    if idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise ApiError(400, "rejected", "Idempotency-Key must be 1-200 printable ASCII characters without spaces")
    # keyed by the client's key, else by one of the API's own: asking again for an unsettled
    # submit answers its task instead of queueing a second one
    call_id = uuid.uuid4().hex
    key = idempotency_key or f"api {call_id}"
    digest = json_digest({"text": body.text, "exhaustive": body.exhaustive})
    request = SubmitRequest(text=body.text, exhaustive=body.exhaustive, key=key, digest=digest, call_id=call_id)
    result: SubmitResult = await be.update(
        row.session_id, "accept the message", SessionWorkflow.submit, request,
        update_id=f"submit-{hashlib.sha256(f'{key}:{digest}'.encode()).hexdigest()[:32]}")
    # a repeat: the workflow's record, or Temporal answering the update id with an earlier call's result
    repeated = idempotency_key is not None and (result.repeated or result.call_id != call_id)
    accepted = MessageAccepted(session_id=row.session_id, task_id=result.task_id, repeated=repeated)
    if wait is not None:
        task = await wait_for_task(be, row.session_id, result.task_id, wait)
        accepted.task = await task_out(be, row.session_id, task, max_chars)
        if task.finished:
            response.status_code = 200
    return accepted


@router.get("/sessions/{session_id}/tasks/{task_id}", response_model=TaskOut, tags=["hosted"],
            summary="A task: its state, the cause when it failed, and its answer (item id and text) once completed")
async def get_task(row: Owned, be: Be,
                   task_id: Annotated[str, Path(pattern=ITEM_ID_PATTERN, min_length=1, max_length=200)],
                   max_chars: MaxChars = 65_536) -> TaskOut:
    task = find_task(await session_status(be, row.session_id), task_id)
    return await task_out(be, row.session_id, task, max_chars)


# --- reads -------------------------------------------------------------------------------


# GET /context (the working set, and with all=true the whole ledger): worker/api/ledger_routes.py


@router.get("/sessions/{session_id}/status", response_model=SessionStatus, tags=["inspect"],
            summary="Task status of the session (the workflow query)")
async def get_status(row: Owned, be: Be) -> SessionStatus:
    return await be.temporal(row.session_id, "report its status",
                             lambda h: h.query(SessionWorkflow.status), QUERY_TIMEOUT)


@router.get("/sessions/{session_id}/episodes", response_model=EpisodeList, tags=["inspect"],
            summary="Episodes seen in the working set (active first)")
async def list_episodes(row: Owned, be: Be) -> EpisodeList:
    report: ContextReport = await be.temporal(row.session_id, "report its context",
                                              lambda h: h.query(SessionWorkflow.context), QUERY_TIMEOUT)
    return episodes_of(report)


def episodes_of(report: ContextReport) -> EpisodeList:
    """Episodes from the context report, with the working-set items and tokens of each."""
    found: dict[str, EpisodeOut] = {
        e.id: EpisodeOut(id=e.id, kind=e.kind.value, goal=e.goal, depends_on=list(e.depends_on),
                         status=e.status.value, conclusion=e.conclusion)
        for e in report.episodes
    }
    active = list(report.active_episodes)
    for episode_id in active:
        found.setdefault(episode_id, EpisodeOut(id=episode_id, status="active"))
    for item in report.items:
        if item.episode:
            episode = found.setdefault(item.episode, EpisodeOut(id=item.episode, status="inactive"))
            episode.items += 1
            episode.tokens += item.tokens
    ordered = sorted(found.values(), key=lambda e: (e.id not in active, e.id))
    return EpisodeList(episodes=ordered, active=active)


@router.get("/sessions/{session_id}/items/{item_id}", response_model=ItemContentOut, tags=["inspect"],
            summary="The exact stored content of one item")
async def get_item(row: Owned, be: Be,
                   item_id: Annotated[str, Path(pattern=ITEM_ID_PATTERN, min_length=1, max_length=200)],
                   max_chars: Annotated[int, Query(ge=1, le=MAX_ITEM_VIEW_CHARS)] = 65_536) -> ItemContentOut:
    store = await be.store()
    rows = await store.get_items(row.session_id, [item_id])
    found = rows.get(item_id)
    if found is None:
        raise not_found(f"item {item_id!r}")
    content = found.content.get("content") or {}
    text = str(content.get("text") or "")
    return ItemContentOut(
        item_id=found.item_id, lane=found.lane, seq=found.seq, kind=found.kind, role=found.role,
        text=text[:max_chars], size_chars=len(text), truncated=len(text) > max_chars,
        tool_calls=list(content.get("tool_calls") or []), tool_call_id=content.get("tool_call_id"),
        tool_name=content.get("tool_name"), metadata=dict(found.content.get("meta") or {}),
    )


@router.get("/sessions/{session_id}/observations/{obs_id}", response_model=ObservationOut, tags=["inspect"],
            summary="Exact recall: a slice [offset, offset+limit) of an observation, in characters")
async def read_observation(
    row: Owned, be: Be,
    obs_id: Annotated[str, Path(pattern=OBS_PATTERN, min_length=5, max_length=300,
                                description="obs-... (the part after observation://)")],
    offset: Annotated[int, Query(ge=0, le=2**31 - 1, description="first character (0-based)")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_RECALL_CHARS,
                                description=f"characters to read (at most {MAX_RECALL_CHARS})")] = DEFAULT_RECALL_CHARS,
) -> ObservationOut:
    store = await be.store()
    try:
        piece = await store.read_observation(row.session_id, obs_id, offset, limit)
    except ObservationNotFound:
        raise not_found(f"observation {obs_id!r}") from None
    except ValueError as exc:
        raise ApiError(422, "invalid", str(exc)) from None
    return ObservationOut(session_id=row.session_id, obs_id=obs_id, address=observation_address(obs_id),
                          offset=piece.offset, limit=piece.limit, text=piece.text, total_chars=piece.total_chars,
                          next_offset=piece.next_offset, eof=piece.eof)


@router.get("/sessions/{session_id}/events", response_model=EventPage, tags=["events"],
            summary="The session's event log, oldest first, paged by event id")
async def list_events(row: Owned, be: Be,
                      after: Annotated[int, Query(ge=0, le=2**62, description="return events with id > after")] = 0,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> EventPage:
    store = await be.store()
    events = await store.list_events(row.session_id, after, limit + 1)
    page = events[:limit]
    return EventPage(events=[EventOut(**e.model_dump(exclude={"session_id"})) for e in page],
                     next_after=page[-1].id if page else after, has_more=len(events) > limit)


SSE_EVENT_SCHEMA = {  # one server-sent event (OpenAPI 3.1: the schema of a stream describes each event)
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {"type": "string", "contentMediaType": "application/json"},
        "event": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}


def _sse(event_id: int | None, name: str | None, data: Any) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if name:
        lines.append(f"event: {name}")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    lines.append(f"data: {text}")
    return ("\n".join(lines) + "\n\n").encode()


@router.get("/sessions/{session_id}/events/stream", tags=["events"], response_class=StreamingResponse,
            summary="Server-sent events: the event log as it grows (polls PostgreSQL)",
            responses={200: {"description": "an event stream; each event's data is one event of the log "
                                            "(EventOut) as JSON, its id the event id",
                             "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}}}})
async def stream_events(
    request: Request, row: Owned, be: Be,
    after: Annotated[int, Query(ge=0, le=2**62, description="start after this event id")] = 0,
    timeout: Annotated[float | None, Query(gt=0, le=86_400,
                                           description="close the stream after this many seconds")] = None,
    last_event_id: Annotated[str | None, Header(pattern=r"^[0-9]{1,18}$",
                                                description="resume after this event id (sent by "
                                                            "EventSource on reconnect)")] = None,
) -> StreamingResponse:
    if last_event_id is not None:
        after = max(after, int(last_event_id))
    store = await be.store()
    sid = row.session_id
    loop = asyncio.get_running_loop()

    async def produce() -> AsyncIterator[bytes]:
        cursor = after
        deadline = None if timeout is None else loop.time() + timeout
        last_sent = loop.time()
        yield b"retry: 2000\n\n"
        while True:
            try:
                events = await store.list_events(sid, cursor, 500)
            except StoreError as exc:  # PostgreSQL away for a while: say so, keep trying
                yield _sse(None, "error", {"message": str(exc)})
                events = []
            except Exception as exc:  # the response has started: end the stream cleanly, with a reason
                log.exception("event stream of %s failed", sid)
                yield _sse(None, "error", {"message": f"the stream failed: {type(exc).__name__}"})
                return
            for event in events:
                cursor = event.id
                yield _sse(event.id, None, EventOut(**event.model_dump(exclude={"session_id"})).model_dump(mode="json"))
                last_sent = loop.time()
            if events and len(events) == 500:
                continue
            now = loop.time()
            if deadline is not None and now >= deadline:
                return
            if now - last_sent >= STREAM_KEEPALIVE_SECONDS:
                yield b": keep-alive\n\n"
                last_sent = now
            if await request.is_disconnected():
                return
            await asyncio.sleep(STREAM_POLL_SECONDS if deadline is None else min(STREAM_POLL_SECONDS, deadline - now))

    return StreamingResponse(produce(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
