"""What a session and its subagent lanes (``LaneWorkflow`` children) exchange.

Metadata only, like every payload that crosses Temporal's history: a child receives the
parent's prefix as item ids and projections, and hands back a reference to the handoff
item it stored.
"""

from __future__ import annotations

from pydantic import BaseModel

from workflows.context import GeneratedRole, ModelPrice, SharedEntry, UsageCounts
from workflows.contract.handoff import Handoff, HandoffStatus
from workflows.contract.session import GIVE_UP_SECONDS, CompactionSettings, ReplaySpec


class LaneConfig(BaseModel):
    """What a child lane runs with (derived from its parent's session config)."""

    model: str
    context_window: int
    max_output_tokens: int
    budget_tokens: int | None
    preview_chars: int  # the parent's, so the shared prefix renders byte for byte
    tools: list[str]
    max_turns: int
    compaction: CompactionSettings
    replay: ReplaySpec | None = None
    tool_network: bool = False
    give_up_seconds: float = GIVE_UP_SECONDS
    generated_role: GeneratedRole = "user"  # the parent's (SessionConfig.generated_role)
    prices: dict[str, ModelPrice] | None = None  # the parent's (SessionConfig.prices)


class LaneInput(BaseModel):
    session_id: str
    lane: str  # "sub-0001"...
    parent_workflow_id: str
    parent_task_id: str | None
    brief: str
    config: LaneConfig
    # The parent's messages the child's requests start with: ids and projections, never content.
    shared_prefix: list[SharedEntry]
    fork_source: str  # where the prefix comes from, e.g. "main plan 12"


class HandoffRef(BaseModel):
    """A child's handoff, stored in its own lane; what the child signals and returns."""

    lane: str
    workflow_id: str
    item_id: str  # the handoff item in the child's lane
    status: HandoffStatus
    usage: UsageCounts | None = None  # the child's provider-reported usage, added to the parent's


class FinishLaneInput(BaseModel):
    """Turn a child's final answer (or its failure) into its handoff item."""

    session_id: str
    lane: str
    workflow_id: str
    final_item_id: str | None  # the child's last assistant answer, when it gave one
    failure: str | None = None  # why the child could not finish
    handoff_item_id: str
    handoff_seq: int
    task_id: str
    model: str
    preview_chars: int


class RecordHandoffInput(BaseModel):
    """Record a child's handoff as one item of the parent's lane."""

    session_id: str
    lane: str  # the parent's lane
    child_lane: str
    item_id: str
    seq: int
    observation_id: str
    task_id: str | None
    tool_call_id: str | None  # answers this spawn_subagent call (else a user-role item)
    group: int | None = None
    source_item_id: str | None = None  # the child's handoff item
    handoff: Handoff | None = None  # or this one (a lane that died without handing off)
    model: str
    preview_chars: int


class CloseLaneEpisodesInput(BaseModel):
    session_id: str
    lane: str
    reason: str
    repair_id: str  # deterministic id of this repair; events carry it so a retried call reports the same episodes


class LaneStatus(BaseModel):
    workflow_id: str
    status: str  # RUNNING / COMPLETED / FAILED / TERMINATED / CANCELED / TIMED_OUT / CONTINUED_AS_NEW / NOT_FOUND
    handoff: HandoffRef | None = None  # a completed child's result
