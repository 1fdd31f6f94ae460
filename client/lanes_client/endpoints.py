"""Every API call as data: what to send and how to read the answer. Written once; the sync
and the async client only carry these out (``lanes_client.client``).

A :class:`Call` says whether it is ``safe`` to send again after an attempt that may have
taken effect (see ``lanes_client.retry``). Appends and messages are made safe here: every
append, step or message gets an idempotency key (``Idempotency-Key`` header, ``step_id``)
when the caller gave none, chosen once per logical call, so all its attempts carry the same one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter

from lanes_client.schemas import (
    AppendItemsOut,
    CancelResult,
    CapabilityOut,
    CondenseOut,
    ContextOut,
    EpisodeAck,
    EpisodeList,
    EventOut,
    EventPage,
    ItemContentOut,
    ItemIn,
    LedgerEntry,
    LedgerPage,
    LedgerState,
    MessageAccepted,
    NoteOut,
    ObservationOut,
    PreparedRequestOut,
    Readiness,
    SessionCreated,
    SessionInfo,
    SessionList,
    SessionSummary,
    StepOut,
    StoredItemOut,
    StoredItemPage,
    TaskOut,
    UsageIn,
)
from lanes_client.shapes import ChildLane, ContextReport, RequestFormat, SessionStatus, SpawnResult

R = TypeVar("R")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

OBSERVATION_SCHEME = "observation://"
_OBSERVATION = re.compile(r"observation://(obs-[A-Za-z0-9][A-Za-z0-9_.-]*)(?:\?(.*))?")


@dataclass(frozen=True)
class Call(Generic[R]):
    method: str
    path: str
    parse: Callable[[Any], R]
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    safe: bool = True  # sending it again is harmless even if an attempt took effect
    accept: frozenset[int] = frozenset()  # error statuses whose body is still the answer

    @property
    def query(self) -> dict[str, Any]:
        return {k: v for k, v in self.params.items() if v is not None}


@dataclass(frozen=True)
class Pages(Generic[R, T]):
    """An auto-paging listing: the first page's call, the next page's call (None: the
    last page) and the entries of a page."""

    first: Call[R]
    next: Callable[[R], Call[R] | None]
    entries: Callable[[R], Iterable[T]]


def _model(cls: type[M]) -> Callable[[Any], M]:
    return cls.model_validate


def _seg(value: str) -> str:
    """One path segment, escaped (ids are validated by the server; a slash must not route elsewhere)."""
    return quote(value, safe="")


def session_path(session_id: str, *rest: str) -> str:
    return "/".join(("/v1/sessions", _seg(session_id), *map(_seg, rest)))


def _items_body(items: Iterable[ItemIn | Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [i.model_dump(exclude_none=True) if isinstance(i, ItemIn) else dict(i) for i in items]


def new_key() -> str:
    return f"lc-{uuid.uuid4().hex}"


# --- sessions -----------------------------------------------------------------------------


def create_session(*, mode: str = "hosted", **config: Any) -> Call[SessionCreated]:
    """``config``: model, context_window, max_output_tokens, budget_tokens, tools, context_tools,
    system_prompt, max_turns_per_task, tasks, compaction, subagents (and replay on development servers)."""
    body = {"mode": mode, **{k: v for k, v in config.items() if v is not None}}
    return Call("POST", "/v1/sessions", _model(SessionCreated), json=body, safe=False)


def list_sessions(*, limit: int = 50, cursor: str | None = None) -> Call[SessionList]:
    return Call("GET", "/v1/sessions", _model(SessionList), params={"limit": limit, "cursor": cursor})


def iter_sessions(*, page_size: int = 100) -> Pages[SessionList, SessionSummary]:
    """Every session of the tenant, newest first."""
    def following(page: SessionList) -> Call[SessionList] | None:
        return None if not page.next_cursor else list_sessions(limit=page_size, cursor=page.next_cursor)
    return Pages(list_sessions(limit=page_size), following, lambda page: page.sessions)


def get_session(session_id: str) -> Call[SessionInfo]:
    return Call("GET", session_path(session_id), _model(SessionInfo))


def status(session_id: str) -> Call[SessionStatus]:
    return Call("GET", session_path(session_id, "status"), _model(SessionStatus))


def cancel_session(session_id: str, *, terminate: bool = False, reason: str | None = None) -> Call[CancelResult]:
    # Safe: closing or terminating a session that already is answers action "none".
    body = {"action": "terminate" if terminate else "close", "reason": reason}
    return Call("POST", session_path(session_id, "cancel"), _model(CancelResult),
                json={k: v for k, v in body.items() if v is not None})


# --- hosted mode --------------------------------------------------------------------------


def send_message(session_id: str, text: str, *, wait: float | None = None,
                 max_chars: int | None = None, exhaustive: bool = False,
                 idempotency_key: str | None = None) -> Call[MessageAccepted]:
    """``wait``: wait up to this many seconds (at most 60) for the task to finish; ``task`` of
    the answer then holds its state and, once completed, its answer. ``exhaustive``: the task
    may not end before its oversized input was read in full. ``idempotency_key`` (default: a
    new one per call) makes retries safe: a repeat answers the first call's task."""
    body: dict[str, Any] = {"text": text, "exhaustive": True} if exhaustive else {"text": text}
    return Call("POST", session_path(session_id, "messages"), _model(MessageAccepted), json=body,
                params={"wait": wait, "max_chars": max_chars},
                headers={"Idempotency-Key": idempotency_key or new_key()})


def get_task(session_id: str, task_id: str, *, max_chars: int | None = None) -> Call[TaskOut]:
    """A task: its state, the cause when it failed, and its answer (item id and text) once completed."""
    return Call("GET", session_path(session_id, "tasks", task_id), _model(TaskOut), params={"max_chars": max_chars})


# --- capability context and pinned notes --------------------------------------------------


def add_capability(session_id: str, name: str, content: str, *, kind: str = "skill",
                   scope: str = "task") -> Call[CapabilityOut]:
    """Admit a tool schema or skill body (``kind`` tool_schema, skill or manual_skill; ``scope``
    step or task): ``status`` admitted, refused or skipped, with need, margin and ceiling."""
    body = {"name": name, "content": content, "kind": kind, "scope": scope}
    return Call("POST", session_path(session_id, "capabilities"), _model(CapabilityOut), json=body, safe=False)


def pin_note(session_id: str, text: str) -> Call[NoteOut]:
    """Pin a note for the rest of the session: ``status`` pinned, or refused with the figures."""
    return Call("POST", session_path(session_id, "notes"), _model(NoteOut), json={"text": text}, safe=False)


# --- external-agent mode ------------------------------------------------------------------


def append_items(session_id: str, items: Iterable[ItemIn | Mapping[str, Any]] = (), *,
                 idempotency_key: str | None = None,
                 responses_items: Iterable[Mapping[str, Any]] = ()) -> Call[AppendItemsOut]:
    """Append ``items``, or ``responses_items`` (OpenAI Responses API input items, stored
    verbatim); ``idempotency_key`` (default: a new one per call) makes retries safe."""
    body: dict[str, Any] = {"items": _items_body(items)}
    if responses := [dict(i) for i in responses_items]:
        body["responses_items"] = responses
    return Call("POST", session_path(session_id, "items"), _model(AppendItemsOut), json=body,
                headers={"Idempotency-Key": idempotency_key or new_key()})


def next_request(session_id: str, *, format: RequestFormat = "chat") -> Call[PreparedRequestOut]:
    """The next request, as ``format`` (chat, responses or anthropic) lays it out."""
    return Call("GET", session_path(session_id, "request"), _model(PreparedRequestOut), params={"format": format})


def step(session_id: str, items: Iterable[ItemIn | Mapping[str, Any]] = (), *,
         step_id: str | None = None, responses_items: Iterable[Mapping[str, Any]] = (),
         format: RequestFormat = "chat", usage: UsageIn | Mapping[str, Any] | None = None) -> Call[StepOut]:
    """One round trip per agent step: append ``items`` (or ``responses_items``), get the next
    request as ``format`` lays it out. ``step_id`` (default: a new one per call) makes retries safe.
    ``usage``: the provider's counts for the call made with the previous request (an OpenAI
    ``usage`` object's prompt/cached/completion tokens): the session's totals, cost and
    calibrated token ratio follow them."""
    body: dict[str, Any] = {"items": _items_body(items), "step_id": step_id or new_key(), "format": format}
    if usage is not None:
        body["usage"] = usage.model_dump(exclude_none=True) if isinstance(usage, UsageIn) else dict(usage)
    if responses := [dict(i) for i in responses_items]:
        body["responses_items"] = responses
    return Call("POST", session_path(session_id, "steps"), _model(StepOut), json=body)


def list_items(session_id: str, *, lane: str = "main", after_seq: int = -1, limit: int = 100) -> Call[StoredItemPage]:
    """One page of the raw stored history (``next_after_seq`` continues it)."""
    return Call("GET", session_path(session_id, "items"), _model(StoredItemPage),
                params={"lane": lane, "after_seq": after_seq, "limit": limit})


def iter_items(session_id: str, *, lane: str = "main", after_seq: int = -1,
               page_size: int = 100) -> Pages[StoredItemPage, StoredItemOut]:
    """Every stored item of a lane after ``after_seq``, in order."""
    def following(page: StoredItemPage) -> Call[StoredItemPage] | None:
        if page.next_after_seq is None:
            return None
        return list_items(session_id, lane=lane, after_seq=page.next_after_seq, limit=page_size)
    return Pages(list_items(session_id, lane=lane, after_seq=after_seq, limit=page_size), following,
                 lambda page: page.items)


def begin_episode(session_id: str, episode_id: str, kind: str, goal: str,
                  depends_on: list[str] | None = None) -> Call[EpisodeAck]:
    body = {"episode_id": episode_id, "kind": kind, "goal": goal, "depends_on": depends_on or []}
    return Call("POST", session_path(session_id, "episodes"), _model(EpisodeAck), json=body, safe=False)


def end_episode(session_id: str, episode_id: str, conclusion: str | None = None) -> Call[EpisodeAck]:
    body = {"conclusion": conclusion} if conclusion is not None else {}
    return Call("POST", session_path(session_id, "episodes", episode_id, "end"), _model(EpisodeAck), json=body,
                safe=False)


def condense(session_id: str, memory: Mapping[str, list[str]]) -> Call[CondenseOut]:
    return Call("POST", session_path(session_id, "condense"), _model(CondenseOut), json={"memory": dict(memory)},
                safe=False)


# --- subagent lanes -----------------------------------------------------------------------

_CHILD_LANES = TypeAdapter(list[ChildLane])


def spawn_subagent(session_id: str, brief: str, tools: list[str] | None = None) -> Call[SpawnResult]:
    body: dict[str, Any] = {"brief": brief} if tools is None else {"brief": brief, "tools": tools}
    return Call("POST", session_path(session_id, "subagents"), _model(SpawnResult), json=body, safe=False)


def subagents(session_id: str) -> Call[list[ChildLane]]:
    return Call("GET", session_path(session_id, "subagents"), _CHILD_LANES.validate_python)


def subagent_context(session_id: str, lane: str) -> Call[ContextReport]:
    return Call("GET", session_path(session_id, "subagents", lane, "context"), _model(ContextReport))


# --- inspection ---------------------------------------------------------------------------


def context(session_id: str, *, all: bool = False, state: LedgerState | None = None, cursor: str | None = None,
            limit: int | None = None) -> Call[ContextOut]:
    """The working set: every item in it with state, projection, tokens and reason, and totals.
    ``all``: ``ledger`` also holds one page of every stored item, archived ones included, with
    counts (``state`` filters it, ``limit`` sizes it, its ``next_cursor`` passed as ``cursor``
    continues it; ``iter_ledger`` walks every page)."""
    if not all and (state, cursor, limit) != (None, None, None):
        raise ValueError("state, cursor and limit page the ledger: pass all=True with them")
    params = {"all": "true", "state": state, "cursor": cursor, "limit": limit} if all else {}
    return Call("GET", session_path(session_id, "context"), _model(ContextOut), params=params)


def ledger(session_id: str, *, state: LedgerState | None = None, cursor: str | None = None,
           limit: int = 200) -> Call[LedgerPage]:
    """One page of the ledger: every stored item (archived included) with state, projection,
    tokens and reason, plus counts (``next_cursor`` continues it)."""
    return Call("GET", session_path(session_id, "ledger"), _model(LedgerPage),
                params={"state": state, "cursor": cursor, "limit": limit})


def iter_ledger(session_id: str, *, state: LedgerState | None = None, cursor: str | None = None,
                page_size: int = 200) -> Pages[LedgerPage, LedgerEntry]:
    """Every stored item of the session's main lane (and its generated items), in (lane, seq) order,
    from ``cursor`` (a ``next_cursor``) when given: the pages of ``context(all=True)``'s ``ledger``,
    without the working-set report each time."""
    def following(page: LedgerPage) -> Call[LedgerPage] | None:
        return None if page.next_cursor is None else ledger(session_id, state=state, cursor=page.next_cursor,
                                                           limit=page_size)
    return Pages(ledger(session_id, state=state, cursor=cursor, limit=page_size), following, lambda page: page.items)


def episodes(session_id: str) -> Call[EpisodeList]:
    return Call("GET", session_path(session_id, "episodes"), _model(EpisodeList))


def item(session_id: str, item_id: str, *, max_chars: int | None = None) -> Call[ItemContentOut]:
    return Call("GET", session_path(session_id, "items", item_id), _model(ItemContentOut), params={"max_chars": max_chars})


def read_observation(session_id: str, obs_id: str, *, offset: int | None = None,
                     limit: int | None = None) -> Call[ObservationOut]:
    """``obs_id``: ``obs-...`` or a full ``observation://obs-...?offset=&limit=`` address
    (explicit ``offset``/``limit`` win over the address's)."""
    if obs_id.startswith(OBSERVATION_SCHEME):
        found = _OBSERVATION.fullmatch(obs_id)
        if found is None:
            raise ValueError(f"{obs_id!r} is not an observation address (observation://obs-ID[?offset=N&limit=M])")
        obs_id = found.group(1)
        query = dict(part.partition("=")[::2] for part in (found.group(2) or "").split("&") if part)
        if set(query) - {"offset", "limit"} or not all(v.isdigit() for v in query.values()):
            raise ValueError(f"{found.group(0)!r}: only offset and limit, as non-negative integers")
        offset = int(query["offset"]) if offset is None and "offset" in query else offset
        limit = int(query["limit"]) if limit is None and "limit" in query else limit
    return Call("GET", session_path(session_id, "observations", obs_id), _model(ObservationOut),
                params={"offset": offset, "limit": limit})


def events(session_id: str, *, after: int = 0, limit: int = 200) -> Call[EventPage]:
    return Call("GET", session_path(session_id, "events"), _model(EventPage), params={"after": after, "limit": limit})


def iter_events(session_id: str, *, after: int = 0, page_size: int = 500) -> Pages[EventPage, EventOut]:
    """Every logged event after event id ``after``, oldest first (what is logged now: it ends)."""
    def following(page: EventPage) -> Call[EventPage] | None:
        return events(session_id, after=page.next_after, limit=page_size) if page.has_more else None
    return Pages(events(session_id, after=after, limit=page_size), following, lambda page: page.events)


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/healthz", dict)


def ready() -> Call[Readiness]:
    """The API's readiness: 503 with ``status: unavailable`` is an answer here, not an error
    (and not retried)."""
    return Call("GET", "/readyz", _model(Readiness), accept=frozenset({503}))
