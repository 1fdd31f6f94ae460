"""What a session and its subagent lanes (``LaneWorkflow`` children) exchange.

Metadata only, like every payload that crosses Temporal's history: a child receives the
parent's prefix as item ids and projections, and hands back a reference to the handoff
item it stored.
"""

from __future__ import annotations

from pydantic import BaseModel

from workflows.context.config import GeneratedRole
from workflows.context.ledger import SharedEntry
from workflows.context.usage import ModelPrice, UsageCounts
from workflows.contract import CompactionSettings, ReplaySpec
from workflows.handoff import HandoffStatus


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
    give_up_seconds: float = 1800.0
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
