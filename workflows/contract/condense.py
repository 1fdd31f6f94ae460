"""The condenser activity's input and outcome: what to condense, within which bounds, and the
validated memory (or why there is none).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from workflows.context import MAIN_LANE, CallUsage, ModelPrice

CondensationStatus = Literal["succeeded", "invalid", "oversized", "unavailable"]


class CondensationInput(BaseModel):
    session_id: str
    lane: str = MAIN_LANE
    source_item_ids: list[str]  # the prefix to condense, in seq order
    anchor_item_ids: list[str] = Field(default_factory=list)  # newest pinned user messages/notes first; first 12 used
    live_memory_item_id: str | None = None  # the live memory to merge, if any
    known_observation_ids: list[str] = Field(default_factory=list)  # "obs-..." references may name
    model: str | None = None  # None: settings.condenser_model
    base_url: str | None = None  # replay sessions: the replay model server (no API key is sent)
    condenser_window: int = Field(gt=0)  # input window of the condenser model, tokens
    reserve_tokens: int = Field(4096, ge=0)  # room for the answer (spec: 4,096)
    max_memory_tokens: int = Field(2000, gt=0)
    preview_chars: int = Field(4000, ge=16)  # COMPACT projection size of each source item
    timeout_seconds: float = Field(120.0, gt=0)  # one HTTP call
    max_retry_delay_seconds: float = Field(60.0, ge=0)  # a longer Retry-After is not waited for
    json_mode: bool = True  # send response_format={"type": "json_object"}
    # the memory contract's per-section bounds, on the normalized document (engine rules 2;
    # inputs scheduled by older code lack it: rules 1)
    memory_contract: bool = False
    # the session's own prices (by model, as LANES_PRICES); None: the worker's LANES_PRICES
    prices: dict[str, ModelPrice] | None = None


class CondensationOutcome(BaseModel):
    status: CondensationStatus
    memory: dict | None = None  # the validated MemoryDoc (model_dump), when succeeded
    memory_text: str | None = None  # memory_text(doc): what the memory item will hold
    memory_tokens: int = 0  # measured like measure_texts does (message overhead included)
    attempts: int = 0  # model calls made
    errors: list[str] = Field(default_factory=list)
    source_tokens: int = 0  # the rendered source transcript
    request_tokens: int = 0  # the whole first request (system + anchors + memory + source)
    model: str = ""
    latency_ms: int = 0
    # What the provider reported for the calls made (summed over attempts), costed; None: no call
    usage: CallUsage | None = None
