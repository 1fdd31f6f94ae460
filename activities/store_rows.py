"""The rows the store reads and writes, and the JSON codec of its ``jsonb`` columns.

PostgreSQL's text types cannot hold NUL characters or lone surrogates: such JSON is kept in
a lossless wrapper (base64 of the escaped JSON) and decoded transparently.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

_WRAP_KEY = "__lanes_json_b64__"  # lossless wrapper for JSON that jsonb would reject


class ItemRow(BaseModel):
    item_id: str = Field(min_length=1)
    lane: str = Field(min_length=1)
    seq: int = Field(ge=0)
    kind: str
    role: str
    content: dict[str, Any]  # {text, tool_calls, tool_call_id, tool_name} + small metadata
    created_at: datetime | None = None  # set by the database
    client_id: str | None = None  # an external agent's own id of the item (migration 0004)
    client_digest: str | None = None


class ClientIdUse(BaseModel):
    """A client item id already stored: under which item, holding what."""

    client_id: str
    item_id: str
    client_digest: str | None


class EventRow(BaseModel):
    lane: str = Field(min_length=1)
    seq: int = Field(ge=0)
    event_id: str = Field(min_length=1)
    kind: str
    payload: dict[str, Any] = Field(default_factory=dict)


class StoredEvent(EventRow):
    id: int  # global, increasing; per session in commit order
    session_id: str
    created_at: datetime


class ObservationMeta(BaseModel):
    session_id: str
    obs_id: str
    item_id: str
    size_chars: int
    size_bytes: int  # UTF-8
    sha256: str  # of the UTF-8 bytes
    created_at: datetime
    inserted: bool = False  # True only in the result of the put that created it


class ObservationSlice(BaseModel):
    obs_id: str
    offset: int
    limit: int  # effective limit (after capping)
    text: str
    total_chars: int
    next_offset: int | None  # None at the end
    eof: bool


def encode_json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
        clean = "\\u0000" not in text
    except UnicodeEncodeError:  # lone surrogates
        clean = False
    if clean:
        return text
    raw = json.dumps(value, allow_nan=False).encode("ascii")  # escapes everything
    return json.dumps({_WRAP_KEY: base64.b64encode(raw).decode("ascii")})


def decode_json(text: str) -> Any:
    value = json.loads(text)
    if isinstance(value, dict) and len(value) == 1 and _WRAP_KEY in value:
        return json.loads(base64.b64decode(value[_WRAP_KEY]))
    return value


def encode_text(text: str) -> tuple[bytes, bool]:
    """UTF-8 bytes of ``text`` and whether PostgreSQL's text type can hold it."""
    try:
        return text.encode("utf-8"), "\x00" not in text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass"), False
