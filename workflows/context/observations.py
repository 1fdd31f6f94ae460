"""Observation addresses: ``observation://obs-<id>`` with optional ``?offset=&limit=``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SCHEME = "observation://"
OBSERVATION_ID = re.compile(r"obs-[A-Za-z0-9][A-Za-z0-9_.-]*")
_QUERY_KEYS = ("offset", "limit")

# How a model gets archived text back: with the session's recall_observation tool, or (an
# external agent without it) from the HTTP API. Placeholders never name a tool it lacks.
RecallStyle = Literal["tool", "endpoint"]
_RECALL_HINTS: dict[str, str] = {
    "tool": "recall exact ranges with recall_observation(address, offset, limit)",
    "endpoint": "read exact ranges from the Context Lanes API: GET /v1/sessions/{session}/observations/{obs-id}"
                "?offset=&limit=",
}


def recall_hint(style: RecallStyle = "tool") -> str:
    """The sentence that tells the model how to read an archived range back."""
    return _RECALL_HINTS[style]


@dataclass(frozen=True)
class ObservationRef:
    obs_id: str  # "obs-..."
    offset: int | None = None
    limit: int | None = None


def observation_address(obs_id: str) -> str:
    """The canonical address of an observation; a bare id gets its ``obs-`` prefix."""
    if not obs_id:
        raise ValueError("observation id is empty")
    canonical = obs_id if obs_id.startswith("obs-") else f"obs-{obs_id}"
    if not OBSERVATION_ID.fullmatch(canonical):
        raise ValueError(f"observation id {obs_id!r} has characters other than letters, digits, '_', '.', '-'")
    return SCHEME + canonical


def range_address(obs_id: str, offset: int, limit: int) -> str:
    return f"{observation_address(obs_id)}?offset={offset}&limit={limit}"


def parse_observation_uri(uri: str) -> ObservationRef:
    """Parse ``observation://obs-ID[?offset=N&limit=M]``; the error names what is wrong."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise ValueError(f"{uri!r} is not an observation address: it must start with {SCHEME!r}")
    rest = uri[len(SCHEME):]
    obs_id, _, query = rest.partition("?")
    if not obs_id:
        raise ValueError(f"{uri!r} has no observation id after {SCHEME!r}")
    if not OBSERVATION_ID.fullmatch(obs_id):
        raise ValueError(f"{uri!r}: observation id {obs_id!r} must look like 'obs-<letters, digits, _ . ->'")
    values: dict[str, int] = {}
    if query:
        for part in query.split("&"):
            key, eq, raw = part.partition("=")
            if key not in _QUERY_KEYS:
                raise ValueError(f"{uri!r}: unknown query parameter {key!r} (only offset and limit)")
            if key in values:
                raise ValueError(f"{uri!r}: query parameter {key!r} is given twice")
            if not eq or not raw.isdigit():
                raise ValueError(f"{uri!r}: {key} must be a non-negative integer, got {raw!r}")
            values[key] = int(raw)
    if values.get("limit") == 0:
        raise ValueError(f"{uri!r}: limit must be at least 1")
    return ObservationRef(obs_id, values.get("offset"), values.get("limit"))
