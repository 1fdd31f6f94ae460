"""What a session carries across continue-as-new, stored in PostgreSQL.

The next run starts with only the checkpoint id in its input, so the Temporal history
of every run stays small however long the session lives. Everything here is
metadata bounded by the token budget (archived items already left the lane state),
plus the text of tasks submitted but not started yet.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.contract.external_calls import RecentCalls
from workflows.contract.lane_state import LaneState
from workflows.contract.session import ChildLane, TaskStatus

KEPT_TASK_STATUSES = 200  # older finished task statuses are dropped from state


class PendingTaskRecord(BaseModel):
    task_id: str
    text: str
    exhaustive: bool = False


class RunningTask(BaseModel):
    task_id: str
    next_turn: int


class SessionCheckpoint(BaseModel):
    lane: LaneState
    next_task: int
    turns: int
    runs: int  # how many runs the session had before this checkpoint
    tasks: list[TaskStatus] = Field(default_factory=list)
    pending: list[PendingTaskRecord] = Field(default_factory=list)
    running: RunningTask | None = None
    external_task: str | None = None
    closed: bool = False
    children: list[ChildLane] = Field(default_factory=list)  # subagent lanes (running ones and recent)
    next_child: int = 0
    recent_calls: RecentCalls = Field(default_factory=RecentCalls)  # keyed external calls, for idempotency
    prepared_tokens: int = 0  # our count of the last request prepared for an external agent (its usage's estimate)


class SaveCheckpointInput(BaseModel):
    session_id: str
    checkpoint_id: str
    checkpoint: SessionCheckpoint


class LoadCheckpointInput(BaseModel):
    session_id: str
    checkpoint_id: str
