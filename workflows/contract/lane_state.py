"""The serialisable state of one lane (what continue-as-new carries over)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.context import Projection, UsageTotals, engine


class LaneState(BaseModel):
    """Everything a lane must carry across continue-as-new (metadata only)."""

    session_id: str
    lane: str = "main"
    model: str
    context: engine.ContextState
    next_seq: int = 0  # item seqs (lane positions)
    next_event_seq: int = 0  # engine events (compactions, overflow...), their own sequence
    plan_version: int = 0
    last_plan: list[tuple[str, Projection]] = Field(default_factory=list)
    # LLM condensation loop guard
    condensation_failures: int = 0  # consecutive failed attempts
    condensation_blocked_below: int = 0  # no attempt until the source has this many tokens
    usage: UsageTotals = Field(default_factory=UsageTotals)  # provider-reported usage of the lane's model calls
