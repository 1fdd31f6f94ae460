"""External-agent mode: your loop stays yours. Append what it produced, get the exact request
to send next (or both in one call, ``POST /steps``), mark episodes, condense; read the raw
history back page by page.

Large text is stored in PostgreSQL first and passed to the workflow by reference, so its
history stays small. Every call that appends is idempotent by its key (``Idempotency-Key``,
or the step id): the same key with the same body answers what the first call stored, a key
reused for a different body is refused (422 ``idempotency_key_reused``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query
from pydantic import ValidationError

from activities.items import as_stored, external_content, extra_fields, generated_pair
from activities.recall import HEADER_CHARS as RECALL_HEADER_CHARS
from activities.requests import Request, materialise
from activities.store_errors import StoreError
from activities.store_rows import EventRow
from activities.tokens import tokenizer_for
from lanes_client.responses_items import ResponsesItemIn, verbatim
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
    ToolCallIn,
    UsageIn,
)
from worker.api.backend import Backend, SessionRow
from worker.api.errors import ApiError, store_unavailable
from worker.api.routes import COMMON_RESPONSES, IDEMPOTENCY_KEY, ITEM_ID_PATTERN, Be, Owned
from workflows.context import FormatError, ItemContent, RequestFormat, ToolCall, from_responses_items, ids, price_for
from workflows.contract.external_calls import json_digest
from workflows.contract.session import (
    AppendItemsRequest,
    AppendItemsResult,
    CondenseRequest,
    CondenseResult,
    EpisodeBegin,
    EpisodeEnd,
    ExternalItem,
    PreparedRequest,
    ReportedUsage,
    StepRequest,
    StepResult,
    travels_inline,
)
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.api")

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)
MAX_ITEMS_PAGE = 500
MAX_APPENDED_ITEMS = 100  # items one call appends (as AppendItemsRequest takes them)
REQUEST_FORMAT_HELP = ("chat: Chat Completions messages; responses: Responses API instructions and input items "
                       "(reasoning passed back verbatim while its turn is kept); anthropic: Messages API system, "
                       "messages and tools with cache breakpoints")


def _obs_id(session_id: str, key: str | None, index: int | str) -> str:
    """Content stored before its append: keyed by the idempotency key, so a retried call reuses it."""
    digest = uuid.uuid4().hex if key is None else hashlib.sha256(f"{key}:{index}".encode()).hexdigest()[:32]
    return ids.external_observation_id(session_id, digest)


_LATER_FIELDS = ("reasoning_content", "item_id")  # left out of a digest while unset


def _digest(items: list[ItemIn], responses_items: list[ResponsesItemIn] | None = None) -> str:
    """The body a key answers for, text included (a reference would hide a changed text).
    Fields added later are left out while unset, so a chat body keeps the digest it had."""
    dumped: object = [i.model_dump(mode="json", exclude={f for f in _LATER_FIELDS if getattr(i, f) is None})
                      for i in items]
    if responses_items:
        dumped = {"responses_items": [verbatim(i) for i in responses_items]}
    return json_digest(dumped)


def _incoming(items: list[ItemIn], responses_items: list[ResponsesItemIn]) -> list[tuple[ItemIn, dict]]:
    """The items to append with their verbatim extras (reasoning, Responses items); 422 naming
    the first item that cannot be stored, before anything is."""
    if not responses_items:
        return [(item, {"reasoning_content": item.reasoning_content} if item.reasoning_content else {})
                for item in items]
    try:
        converted = from_responses_items([verbatim(i) for i in responses_items])
    except FormatError as exc:
        raise ApiError(422, "invalid", str(exc)) from None
    if len(converted) > MAX_APPENDED_ITEMS:
        raise ApiError(422, "invalid", f"responses_items make {len(converted)} items; at most "
                                       f"{MAX_APPENDED_ITEMS} can be appended in one call")
    out = []
    for turn in converted:
        try:
            item = ItemIn(kind=turn.kind, text=turn.text, tool_call_id=turn.tool_call_id, tool_name=turn.tool_name,
                          tool_calls=[ToolCallIn(**c.model_dump()) for c in turn.tool_calls])
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            raise ApiError(422, "invalid", f"responses_items[{turn.first}]: {problem}") from None
        out.append((item, {"responses_items": turn.source}))
    return out


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
    contents: list[ItemContent] = field(default_factory=list)  # of ``items``: what the session will store

    def contents_by_id(self, appended: list[str]) -> dict[str, ItemContent]:
        """The content of each new item under the id the session gave it (``appended``, in order)."""
        return dict(zip(appended, self.contents, strict=False))

    def item_ids(self, appended: list[str], count: int) -> list[str]:
        """The item id of each item of the call, in its order. ``appended``: the ids the session
        gave the call's new items, or, for a repeated call, those of the first call, whose items
        with a client id are known by now and so are taken from ``known``."""
        known = set(self.known.values())
        new = iter([item_id for item_id in appended if item_id not in known])
        return [self.known[n] if n in self.known else next(new) for n in range(count)]


def _client_digest(item: ItemIn) -> str:
    return json_digest(item.model_dump(mode="json", exclude={"item_id"}))


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


async def external_items(be: Be, sid: str, items: list[tuple[ItemIn, dict]], key: str | None) -> Incoming:
    """The items as the workflow takes them, large texts and every extra stored first."""
    store = await be.store()
    digests, known = await _known_items(be, sid, [item for item, _ in items])
    incoming = Incoming(known=known, already_stored=[items[n][0].item_id or "" for n in sorted(known)])

    async def put(obs_id: str, index: int, text: str) -> None:
        try:
            await store.put_observation(sid, obs_id, "pending", text)
        except StoreError as exc:
            log.warning("could not store item %d of %s: %s", index, sid, exc)
            raise store_unavailable() from None

    for index, (item, extras) in enumerate(items):
        if index in known:
            continue
        text = item.text if item.text is not None else ""
        content_ref = extra_ref = None
        if not travels_inline(item.kind, text):  # too big for workflow history: store it first, send its id
            content_ref = _obs_id(sid, key, index)
            await put(content_ref, index, text)
            incoming.stored.append(content_ref)
        if extras:  # reasoning and provider items are content: never in workflow history
            extra_ref = _obs_id(sid, key, f"{index}-extras")
            await put(extra_ref, index, json.dumps(extras, ensure_ascii=False, sort_keys=True))
        ext = ExternalItem(
            kind=item.kind, role=item.role, text=None if content_ref else text, content_ref=content_ref,
            tool_calls=[ToolCall(**call.model_dump()) for call in item.tool_calls],  # the wire's model -> the engine's
            tool_call_id=item.tool_call_id, tool_name=item.tool_name, exit_code=item.exit_code, extra_ref=extra_ref,
            client_id=item.item_id, client_digest=digests.get(index),
        )
        incoming.items.append(ext)
        incoming.contents.append(external_content(ext, text, extra_fields(extras)))
    return incoming


def _repeated(result: AppendItemsResult | StepResult, call_id: str, keyed: bool) -> bool:
    """The client's key was seen: the workflow found it in its record, or Temporal answered the
    update id from an earlier call of this run (its result names that call). A call without a
    key is one call however often the API asked (under a key of its own): never a repeat."""
    return keyed and (result.repeated or (result.call_id is not None and result.call_id != call_id))


def call_key(key: str | None, call_id: str) -> str:
    """The key the workflow records the call under: the client's, else one of the API's own
    for this call (a space: never a client key), so that asking again for an unsettled call
    answers it instead of applying it twice, across continue-as-new too."""
    return key if key is not None else f"api {call_id}"


def update_id(kind: str, key: str, digest: str) -> str:
    """Temporal deduplicates an update id within a run: the same key and body answer the first
    result; a different body gets its own id, so the workflow sees the reused key and refuses it."""
    return f"{kind}-{hashlib.sha256(f'{key}:{digest}'.encode()).hexdigest()[:32]}"


async def request_out(be: Be, sid: str, prepared: PreparedRequest, fmt: RequestFormat = "chat",
                      contents: dict[str, ItemContent] | None = None) -> PreparedRequestOut:
    """``prepared`` rendered. ``contents``: the step's own items' content by id (see
    ``Incoming.contents_by_id``), for those the session is still storing."""
    store = await be.store()
    given = {g.item.id: generated_pair(g) for g in prepared.generated}
    given |= {item.id: as_stored(item, contents[item.id]) for item in prepared.unstored_items
              if contents and item.id in contents}

    async def render() -> Request:
        try:
            return await materialise(store, sid, prepared.entries, preview_chars=prepared.preview_chars,
                                     tools=prepared.tools, model=prepared.model,
                                     stable_prefix_entries=prepared.stable_prefix_entries,
                                     tool_set=prepared.tool_set, recall=prepared.recall, given=given)
        except LookupError as exc:
            raise ApiError(409, "not_ready", f"the request's items are not all stored yet ({exc}); retry") from None
        except ValueError as exc:  # a tool the catalog no longer has
            raise ApiError(409, "conflict", str(exc)) from None

    async def record() -> None:
        if prepared.request_event is None:
            return
        try:  # idempotent by its id: a repeated call writes it once
            await store.append_events(sid, [EventRow(**prepared.request_event.model_dump())])
        except StoreError as exc:
            log.warning("could not record the request event of %s: %s", sid, exc)
            raise store_unavailable() from None

    request, _ = await asyncio.gather(render(), record())  # two round trips at once
    stable = request.stable_prefix_messages
    out = request.formatted(fmt)
    return PreparedRequestOut(
        session_id=sid, model=prepared.model, format=fmt, messages=out.messages, tools=out.tools, input=out.input,
        instructions=out.instructions, system=out.system, cache_breakpoints=out.cache_breakpoints,
        token_estimate=request.total_tokens, tokenizer=tokenizer_for(prepared.model).describe(),
        plan_tokens=prepared.total_tokens, budget=prepared.budget,
        fits=prepared.fits, reason=prepared.reason, stable_prefix_entries=prepared.stable_prefix_entries,
        stable_prefix_messages=stable, stable_prefix_tokens=sum(request.message_tokens[:stable]),
        entries=[PlanEntryOut(item_id=item_id, projection=projection.value)
                 for item_id, projection in prepared.entries],
        recall_chars=max(1, prepared.preview_chars - RECALL_HEADER_CHARS),
    )


@router.post("/sessions/{session_id}/items", response_model=AppendItemsOut, tags=["external"],
             summary="Append items your agent produced (user, assistant with tool calls, tool results, notes...)")
async def append_items(row: Owned, be: Be, body: AppendItemsIn,
                       idempotency_key: Annotated[str | None, Header(max_length=200)] = None) -> AppendItemsOut:
    _check_key(idempotency_key, "Idempotency-Key")
    sid = row.session_id
    given = _incoming(body.items, body.responses_items)
    incoming = await external_items(be, sid, given, idempotency_key)
    if not incoming.items:  # every item is stored already (a resent batch): nothing to append
        return AppendItemsOut(session_id=sid, item_ids=incoming.item_ids([], len(given)), repeated=True,
                              already_stored=incoming.already_stored)
    call_id = uuid.uuid4().hex
    request = AppendItemsRequest(items=incoming.items, key=call_key(idempotency_key, call_id),
                                 digest=_digest(body.items, body.responses_items), call_id=call_id)
    assert request.key is not None and request.digest is not None
    result: AppendItemsResult = await be.update(sid, "append the items", SessionWorkflow.append_items, request,
                                                update_id=update_id("append", request.key, request.digest))
    item_ids = incoming.item_ids(result.item_ids, len(given))
    return AppendItemsOut(session_id=sid, item_ids=item_ids, stored_observations=incoming.stored,
                          repeated=_repeated(result, call_id, idempotency_key is not None),
                          already_stored=incoming.already_stored)


@router.get("/sessions/{session_id}/request", response_model=PreparedRequestOut, tags=["external"],
            summary="The exact messages to send next (compacting first when needed)")
async def next_request(row: Owned, be: Be,
                       format: Annotated[RequestFormat, Query(description=REQUEST_FORMAT_HELP)] = "chat",
                       ) -> PreparedRequestOut:
    prepared: PreparedRequest = await be.update(row.session_id, "prepare the next request",
                                                SessionWorkflow.prepare_request)
    return await request_out(be, row.session_id, prepared, format)


@router.post("/sessions/{session_id}/steps", response_model=StepOut, tags=["external"],
             summary="One agent step in one call: append its items, get the exact messages to send next")
async def step(row: Owned, be: Be, body: StepIn) -> StepOut:
    _check_key(body.step_id, "step_id")
    sid = row.session_id
    given = _incoming(body.items, body.responses_items)
    call_id = uuid.uuid4().hex
    key = call_key(body.step_id, call_id)
    incoming = await external_items(be, sid, given, key)
    request = StepRequest(items=incoming.items, step_id=key, digest=_digest(body.items, body.responses_items),
                          usage=_reported(body.usage, row, be), call_id=call_id)
    assert request.digest is not None
    result: StepResult = await be.update(sid, "take the step", SessionWorkflow.step, request,
                                         update_id=update_id("step", key, request.digest))
    item_ids = incoming.item_ids(result.item_ids, len(given))
    return StepOut(session_id=sid, item_ids=item_ids, stored_observations=incoming.stored,
                   repeated=_repeated(result, call_id, body.step_id is not None),
                   already_stored=incoming.already_stored,
                   request=await request_out(be, sid, result.request, body.format))


def _reported(usage: UsageIn | None, row: SessionRow, be: Backend) -> ReportedUsage | None:
    """The agent's provider counts, with this API's price of the model (the session's own
    prices, when it has some, win in the workflow)."""
    if usage is None:
        return None
    model = usage.model or str(row.config.get("model") or "")
    return ReportedUsage(prompt=usage.prompt_tokens, cached=usage.cached_tokens, completion=usage.completion_tokens,
                         model=model or None, price=price_for(be.settings.prices, model))


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
            reasoning_content=content.get("reasoning_content"), responses_items=content.get("responses_items", []),
            client_id=r.client_id))
    return StoredItemPage(session_id=row.session_id, items=items,
                          next_after_seq=items[-1].seq if len(items) == limit else None)


@router.post("/sessions/{session_id}/episodes", status_code=201, response_model=EpisodeAck, tags=["external"],
             summary="Begin an episode (exploration, or action naming the explorations it depends on)")
async def begin_episode(row: Owned, be: Be, body: EpisodeBeginIn) -> EpisodeAck:
    request = EpisodeBegin(episode_id=body.episode_id, kind=body.kind, goal=body.goal, depends_on=body.depends_on)
    await be.update(row.session_id, "begin the episode", SessionWorkflow.begin_episode, request)
    return EpisodeAck(session_id=row.session_id, episode_id=body.episode_id, state="begun")


@router.post("/sessions/{session_id}/episodes/{episode_id}/end", response_model=EpisodeAck, tags=["external"],
             summary="End an episode (an exploration needs a concise conclusion)")
async def end_episode(row: Owned, be: Be,
                      episode_id: Annotated[str, Path(pattern=ITEM_ID_PATTERN, min_length=1, max_length=120)],
                      body: Annotated[EpisodeEndIn | None, Body()] = None) -> EpisodeAck:
    request = EpisodeEnd(episode_id=episode_id, conclusion=(body.conclusion if body else None))
    await be.update(row.session_id, "end the episode", SessionWorkflow.end_episode, request)
    return EpisodeAck(session_id=row.session_id, episode_id=episode_id, state="ended")


@router.post("/sessions/{session_id}/condense", response_model=CondenseOut, tags=["external"],
             summary="condense_context: replace old history by a bounded memory (deterministic)")
async def condense(row: Owned, be: Be, body: CondenseIn) -> CondenseOut:
    request = CondenseRequest(memory=body.memory.model_dump())
    result: CondenseResult = await be.update(row.session_id, "condense its context", SessionWorkflow.condense_context,
                                             request)
    return CondenseOut(session_id=row.session_id, **result.model_dump())
