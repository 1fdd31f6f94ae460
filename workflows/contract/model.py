"""The model activity's input and result: a plan as a delta against the previous one, and the
stored answer with the provider's usage.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.context import MAIN_LANE, CallUsage, ModelPrice, Projection
from workflows.contract.events import EventSpec
from workflows.contract.items import GeneratedItemsInput, StoredItem
from workflows.contract.session import ReplaySpec


class PlanDelta(BaseModel):
    """A request plan, sent as a change against the previous one."""

    version: int
    base_version: int | None  # None: ``entries`` is the whole plan
    entries: list[tuple[str, Projection]]


class ModelCallInput(BaseModel):
    session_id: str
    lane: str = MAIN_LANE
    plan: PlanDelta
    response_item_id: str
    response_seq: int
    task_id: str
    model: str
    max_output_tokens: int
    preview_chars: int
    tools: list[str]
    replay: ReplaySpec | None = None
    replay_turn: int = 0
    # The request's pressure sample (context.request), written with the call: no command of its own.
    request_event: EventSpec | None = None
    # Engine rules 2: an answer whose full cost is above ``bound_above_tokens`` is archived at
    # ``observation_id`` (a runaway answer enters bounded, its exact text recallable).
    observation_id: str | None = None
    bound_above_tokens: int | None = None
    # The session's price of the model (its own table); None: the worker's LANES_PRICES.
    price: ModelPrice | None = None
    # Items the plan generated, with their events: written by the call before anything else,
    # instead of by an activity of their own (workflows/later_writes.py)
    generated: GeneratedItemsInput | None = None


class ModelCallResult(BaseModel):
    stored: StoredItem
    finish_reason: str | None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    request_tokens: int  # our own count of what was sent
    # What the provider reported for this call, costed (None: no call was made, e.g. the
    # answer was stored by an earlier attempt whose result was lost).
    usage: CallUsage | None = None
    # A replay: the user text recorded after this turn, which the session feeds on.
    follow_ups: list[str] = Field(default_factory=list)
