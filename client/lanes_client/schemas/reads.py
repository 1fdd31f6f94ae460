"""Reads: item content, observations, events, the ledger, the context report, health."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from lanes_client.shapes import (
    ContextReport,
)


class ItemContentOut(BaseModel):
    item_id: str
    lane: str
    seq: int
    kind: str
    role: str
    text: str
    size_chars: int
    truncated: bool
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ObservationOut(BaseModel):
    session_id: str
    obs_id: str
    address: str
    offset: int
    limit: int
    text: str
    total_chars: int
    next_offset: int | None
    eof: bool


class EventOut(BaseModel):
    id: int
    lane: str
    seq: int
    event_id: str
    kind: str
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    events: list[EventOut]
    next_after: int  # pass as ?after= for the next page
    has_more: bool


LedgerState = Literal["pinned", "active", "retained", "archived"]


class LedgerEntry(BaseModel):
    """One stored item: its lifecycle state, projection, token cost and the reason of its
    last transition (archived items: as the event log recorded them when they left)."""

    item_id: str
    lane: str  # the lane, or the lane of the engine's generated items (checkpoint, memory, ...)
    seq: int
    kind: str
    role: str
    state: str  # pinned / active / retained / archived
    projection: str  # full / compact / reference / minimal-reference / omitted
    tokens: int  # its cost in the next request (0 once archived)
    full_tokens: int  # its cost at full fidelity
    reason: str
    in_working_set: bool
    task_id: str | None = None
    episode: str | None = None
    observation_id: str | None = None


class LedgerCounts(BaseModel):
    working_set: int  # items in the working set
    history: int  # stored items of the lane (every state)
    archived: int  # stored items out of the working set
    observations: int  # exact outputs and oversized inputs stored for recall
    by_state: dict[str, int]


class LedgerPage(BaseModel):
    session_id: str
    items: list[LedgerEntry]
    counts: LedgerCounts
    next_cursor: str | None = None  # pass as ?cursor= for the next page; None: no more


class ContextOut(ContextReport):
    """``GET /context``: the working-set report; with ``?all=true`` also ``ledger``, one page
    of every stored item. Without ``all`` there is no ``ledger`` key at all: the answer is
    the report as it always was."""

    ledger: LedgerPage | None = None

    # Not Field(exclude_if=...): that needs pydantic 2.12, the client supports 2.10. Unannotated
    # on purpose: an annotated return would replace the model's schema in the OpenAPI document.
    @model_serializer(mode="wrap")
    def _no_ledger_key_without_all(self, handler: SerializerFunctionWrapHandler):
        data = handler(self)
        if self.ledger is None and isinstance(data, dict):
            data.pop("ledger", None)
        return data


class EpisodeOut(BaseModel):
    id: str
    kind: str | None = None
    goal: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    status: str  # active / completed / abandoned / archived / unknown
    conclusion: str | None = None
    items: int = 0  # working-set items tagged with it
    tokens: int = 0


class EpisodeList(BaseModel):
    episodes: list[EpisodeOut]
    active: list[str]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ok", "unavailable"]
