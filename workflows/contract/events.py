"""Event-log entries as they cross to the store: small (ids, counts, token figures, never
content), keyed by (lane, seq).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.context import ids


class EventSpec(BaseModel):
    lane: str = ids.MAIN_LANE
    seq: int
    event_id: str
    kind: str
    payload: dict = Field(default_factory=dict)


class EventsInput(BaseModel):
    session_id: str
    events: list[EventSpec]
