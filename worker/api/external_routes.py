"""External-agent mode: your loop stays yours. Append what it produced, get the exact request
to send next (or both in one call, ``POST /steps``), mark episodes, condense; read the raw
history back page by page.

Large text is stored in PostgreSQL first and passed to the workflow by reference, so its
history stays small. Every call that appends is idempotent by its key (``Idempotency-Key``,
or the step id): the same key with the same body answers what the first call stored, a key
reused for a different body is refused (422 ``idempotency_key_reused``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query

from activities.requests import materialise
from activities.store import StoreError
from lanes_client.schemas import (
    AppendItemsIn,
    AppendItemsOut,
    CondenseIn,
    CondenseOut,
    EpisodeAck,
    EpisodeBeginIn,
    EpisodeEndIn,
    ItemIn,
    PlanEntryOut,
    PreparedRequestOut,
    StepIn,
    StepOut,
    StoredItemOut,
    StoredItemPage,
)
from worker.api.errors import ApiError, store_unavailable
from worker.api.routes import COMMON_RESPONSES, IDEMPOTENCY_KEY, ITEM_ID_PATTERN, Be, Owned
from workflows.context import ids
from workflows.context.content import ToolCall
from workflows.contract import (
    AppendItemsRequest,
    CondenseRequest,
    CondenseResult,
    EpisodeBegin,
    EpisodeEnd,
    ExternalItem,
    PreparedRequest,
    StepRequest,
    StepResult,
)
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.api")

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)
MAX_ITEMS_PAGE = 500


def _obs_id(session_id: str, key: str | None, index: int) -> str:
    """Content stored before its append: keyed by the idempotency key, so a retried call reuses it."""
    digest = uuid.uuid4().hex if key is None else hashlib.sha256(f"{key}:{index}".encode()).hexdigest()[:32]
    return ids.external_observation_id(session_id, digest)


def _digest(items: list[ItemIn]) -> str:
    """The body a key answers for, text included (a reference would hide a changed text)."""
    body = json.dumps([i.model_dump(mode="json") for i in items], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _check_key(key: str | None, what: str) -> None:
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise ApiError(400, "rejected", f"{what} must be 1-200 printable ASCII characters without spaces")


@dataclass
class Incoming:
    """A call's items as the workflow takes them: large texts stored first (``stored``), and
    items the client already stored under its item id left out (``known``: index -> item id)."""

    items: list[ExternalItem] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    known: dict[int, str] = field(default_factory=dict)
    already_stored: list[str] = field(default_factory=list)

    def item_ids(self, appended: list[str], count: int) -> list[str]:
        """The item id of each item of the call, in its order."""
        new = iter(appended)
        return [self.known[n] if n in self.known else next(new) for n in range(count)]


def _client_digest(item: ItemIn) -> str:
    body = json.dumps(item.model_dump(mode="json", exclude={"item_id"}), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


async def _known_items(be: Be, sid: str, items: list[ItemIn]) -> tuple[dict[int, str], dict[int, str]]:
    """(index -> digest of every item with a client id, index -> stored item id of those
    already stored with the same content); other content under a stored id is 409."""
    digests = {n: _client_digest(item) for n, item in enumerate(items) if item.item_id is not None}
    if not digests:
        return {}, {}
    seen: dict[str, int] = {}
    for n in digests:
        client_id = items[n].item_id
        assert client_id is not None
        if client_id in seen:
            raise ApiError(422, "invalid", f"items[{n}]: item_id {client_id!r} is also items[{seen[client_id]}]")
        seen[client_id] = n
    try:
        uses = await (await be.store()).client_id_uses(sid, list(seen))
    except StoreError as exc:
        log.warning("could not look up the item ids of %s: %s", sid, exc)
        raise store_unavailable() from None
    known = {}
    for client_id, use in uses.items():
        n = seen[client_id]
        if use.client_digest != digests[n]:
            raise ApiError(409, "item_id_conflict", f"items[{n}]: item_id {client_id!r} is already stored (as "
                                                    f"{use.item_id}) with other content")
        known[n] = use.item_id
    return digests, known


async def _external_items(be: Be, sid: str, items: list[ItemIn], key: str | None) -> Incoming:
    """The items as the workflow takes them, large texts stored first."""
    store = await be.store()
    digests, known = await _known_items(be, sid, items)
    incoming = Incoming(known=known, already_stored=[items[n].item_id or "" for n in sorted(known)])
    for index, item in enumerate(items):
        if index in known:
            continue
        text = item.text if item.text is not None else ""
        content_ref = None
        if len(text) > ids.INLINE_TEXT_LIMIT:  # too big for workflow history: store it first, send its id
            content_ref = _obs_id(sid, key, index)
            try:
                await store.put_observation(sid, content_ref, "pending", text)
            except StoreError as exc:
                log.warning("could not store item %d of %s: %s", index, sid, exc)
                raise store_unavailable() from None
            incoming.stored.append(content_ref)
        incoming.items.append(ExternalItem(
            kind=item.kind, role=item.role, text=None if content_ref else text, content_ref=content_ref,
            tool_calls=[ToolCall(**call.model_dump()) for call in item.tool_calls],  # the wire's model -> the engine's
            tool_call_id=item.tool_call_id, tool_name=item.tool_name, exit_code=item.exit_code,
            client_id=item.item_id, client_digest=digests.get(index),
        ))
    return incoming


def _update_id(kind: str, key: str | None, digest: str | None) -> str | None:
    """Temporal deduplicates an update id within a run: the same key and body answer the first
    result; a different body gets its own id, so the workflow sees the reused key and refuses it."""
    return None if key is None else f"{kind}-{hashlib.sha256(f'{key}:{digest}'.encode()).hexdigest()[:32]}"


async def _request_out(be: Be, sid: str, prepared: PreparedRequest) -> PreparedRequestOut:
    store = await be.store()
    try:
        request = await materialise(store, sid, prepared.entries, preview_chars=prepared.preview_chars,
                                    tools=prepared.tools, model=prepared.model,
                                    stable_prefix_entries=prepared.stable_prefix_entries,
                                    tool_set=prepared.tool_set, recall=prepared.recall)
    except LookupError as exc:
        raise ApiError(409, "not_ready", f"the request's items are not all stored yet ({exc}); retry") from None
    except ValueError as exc:  # a tool the catalog no longer has
        raise ApiError(409, "conflict", str(exc)) from None
    stable = request.stable_prefix_messages
    return PreparedRequestOut(
        session_id=sid, model=prepared.model, messages=request.messages, tools=request.tools,
        token_estimate=request.total_tokens, plan_tokens=prepared.total_tokens, budget=prepared.budget,
        fits=prepared.fits, reason=prepared.reason, stable_prefix_entries=prepared.stable_prefix_entries,
        stable_prefix_messages=stable, stable_prefix_tokens=sum(request.message_tokens[:stable]),
        entries=[PlanEntryOut(item_id=item_id, projection=projection.value)
                 for item_id, projection in prepared.entries],
    )


@router.post("/sessions/{session_id}/items", response_model=AppendItemsOut, tags=["external"],
             summary="Append items your agent produced (user, assistant with tool calls, tool results, notes...)")
async def append_items(row: Owned, be: Be, body: AppendItemsIn,
                       idempotency_key: Annotated[str | None, Header(max_length=200)] = None) -> AppendItemsOut:
    _check_key(idempotency_key, "Idempotency-Key")
    sid = row.session_id
    incoming = await _external_items(be, sid, body.items, idempotency_key)
    if not incoming.items:  # every item is stored already (a resent batch): nothing to append
        return AppendItemsOut(session_id=sid, item_ids=incoming.item_ids([], len(body.items)), repeated=True,
                              already_stored=incoming.already_stored)
    request = AppendItemsRequest(items=incoming.items, key=idempotency_key,
                                 digest=None if idempotency_key is None else _digest(body.items))
    update_id = _update_id("append", idempotency_key, request.digest)
    result = await be.temporal(
        sid, "append the items", lambda h: h.execute_update(SessionWorkflow.append_items, request, id=update_id))
    item_ids = result.item_ids if result.repeated else incoming.item_ids(result.item_ids, len(body.items))
    return AppendItemsOut(session_id=sid, item_ids=item_ids, stored_observations=incoming.stored,
                          repeated=result.repeated, already_stored=incoming.already_stored)


@router.get("/sessions/{session_id}/request", response_model=PreparedRequestOut, tags=["external"],
            summary="The exact messages to send next (compacting first when needed)")
async def next_request(row: Owned, be: Be) -> PreparedRequestOut:
    prepared: PreparedRequest = await be.temporal(
        row.session_id, "prepare the next request", lambda h: h.execute_update(SessionWorkflow.prepare_request))
    return await _request_out(be, row.session_id, prepared)


@router.post("/sessions/{session_id}/steps", response_model=StepOut, tags=["external"],
             summary="One agent step in one call: append its items, get the exact messages to send next")
async def step(row: Owned, be: Be, body: StepIn) -> StepOut:
    _check_key(body.step_id, "step_id")
    sid = row.session_id
    incoming = await _external_items(be, sid, body.items, body.step_id)
    request = StepRequest(items=incoming.items, step_id=body.step_id,
                          digest=None if body.step_id is None else _digest(body.items))
    update_id = _update_id("step", body.step_id, request.digest)
    result: StepResult = await be.temporal(
        sid, "take the step", lambda h: h.execute_update(SessionWorkflow.step, request, id=update_id))
    item_ids = result.item_ids if result.repeated else incoming.item_ids(result.item_ids, len(body.items))
    return StepOut(session_id=sid, item_ids=item_ids, stored_observations=incoming.stored, repeated=result.repeated,
                   already_stored=incoming.already_stored, request=await _request_out(be, sid, result.request))


@router.get("/sessions/{session_id}/items", response_model=StoredItemPage, tags=["inspect"],
            summary="The raw history: every stored item of a lane in order, page by page")
async def list_items(row: Owned, be: Be,
                     lane: Annotated[str, Query(pattern=ITEM_ID_PATTERN, max_length=120)] = ids.MAIN_LANE,
                     after_seq: Annotated[int, Query(ge=-1)] = -1,
                     limit: Annotated[int, Query(ge=1, le=MAX_ITEMS_PAGE)] = 100) -> StoredItemPage:
    store = await be.store()
    rows = await store.list_items(row.session_id, lane=lane, after_seq=after_seq, limit=limit)
    items = []
    for r in rows:
        content, meta = r.content.get("content", {}), r.content.get("meta", {})
        items.append(StoredItemOut(
            item_id=r.item_id, seq=r.seq, lane=r.lane, kind=r.kind, role=r.role, task_id=meta.get("task"),
            text=content.get("text", ""), tool_calls=content.get("tool_calls", []),
            tool_call_id=content.get("tool_call_id"), observation_id=meta.get("observation_id"),
            client_id=r.client_id))
    return StoredItemPage(session_id=row.session_id, items=items,
                          next_after_seq=items[-1].seq if len(items) == limit else None)


@router.post("/sessions/{session_id}/episodes", status_code=201, response_model=EpisodeAck, tags=["external"],
             summary="Begin an episode (exploration, or action naming the explorations it depends on)")
async def begin_episode(row: Owned, be: Be, body: EpisodeBeginIn) -> EpisodeAck:
    request = EpisodeBegin(episode_id=body.episode_id, kind=body.kind, goal=body.goal, depends_on=body.depends_on)
    await be.temporal(row.session_id, "begin the episode",
                      lambda h: h.execute_update(SessionWorkflow.begin_episode, request))
    return EpisodeAck(session_id=row.session_id, episode_id=body.episode_id, state="begun")


@router.post("/sessions/{session_id}/episodes/{episode_id}/end", response_model=EpisodeAck, tags=["external"],
             summary="End an episode (an exploration needs a concise conclusion)")
async def end_episode(row: Owned, be: Be,
                      episode_id: Annotated[str, Path(pattern=ITEM_ID_PATTERN, min_length=1, max_length=120)],
                      body: Annotated[EpisodeEndIn | None, Body()] = None) -> EpisodeAck:
    request = EpisodeEnd(episode_id=episode_id, conclusion=(body.conclusion if body else None))
    await be.temporal(row.session_id, "end the episode",
                      lambda h: h.execute_update(SessionWorkflow.end_episode, request))
    return EpisodeAck(session_id=row.session_id, episode_id=episode_id, state="ended")


@router.post("/sessions/{session_id}/condense", response_model=CondenseOut, tags=["external"],
             summary="condense_context: replace old history by a bounded memory (deterministic)")
async def condense(row: Owned, be: Be, body: CondenseIn) -> CondenseOut:
    request = CondenseRequest(memory=body.memory.model_dump())
    result: CondenseResult = await be.temporal(
        row.session_id, "condense its context", lambda h: h.execute_update(SessionWorkflow.condense_context, request))
    return CondenseOut(session_id=row.session_id, **result.model_dump())
