"""Compaction plans: what a compaction or condensation will do, before it is applied.

Plans are two-phase because token counts are measured outside the engine: the plan lists
the transitions and the texts the engine generated (checkpoint, summary, memory, episode
markers) with estimated costs; the caller measures those texts with tiktoken, stores them,
and applies the plan with the measurements. A plan made at another ``generation`` is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .checkpoint import CheckpointData
from .items import Item, Lifecycle, Projection
from .summary import SummaryData

# fallback / explicit / llm: compactions; assembly: keeping the stable segment current
# between them (assembly.py)
Mode = Literal["fallback", "explicit", "llm", "assembly"]


@dataclass(frozen=True, slots=True)
class Transition:
    """One item's new lifecycle and projection (``CompactionPlan.transitions``)."""

    item_id: str
    lifecycle: Lifecycle
    projection: Projection
    reason: str


@dataclass(slots=True)
class TransitionRun:
    """Consecutive transitions alike but for the item: ``item_ids`` move to ``lifecycle`` and
    ``projection`` for ``reason``, in that order. A plan holds runs, not one object per item:
    pass 1 moves thousands of items alike, and the runs let ``apply_plan`` move them in bulk.
    (A dataclass, which pydantic validates and serialises as it would a model.)"""

    lifecycle: Lifecycle
    projection: Projection
    reason: str
    item_ids: list[str]


class GeneratedText(BaseModel):
    """A text the engine generated; ``key`` is its kind (one live item per kind)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    role: str = "user"
    text: str
    text_hash: str
    estimated_tokens: int  # text.estimate_tokens: the caller should measure and pass the real count


class CompactionPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Mode
    generation: int  # the state generation the plan was made at
    runs: list[TransitionRun] = Field(default_factory=list)  # the transitions, in the order decided
    generated: list[GeneratedText] = Field(default_factory=list)
    archived_episodes: list[str] = Field(default_factory=list)
    checkpoint: CheckpointData | None = None  # new checkpoint data, when it changed
    summary: SummaryData | None = None  # new rolling-summary data, when it changed
    tokens_before: int
    tokens_after_estimate: int
    target: int
    budget: int
    passes_run: list[str] = Field(default_factory=list)
    reaches_target: bool
    fits_budget: bool
    relayout: bool = False  # re-lay out even without a transition (a pinned item out of place)

    @property
    def transitions(self) -> list[Transition]:
        """The runs, one transition per item (for readers: ``apply_plan`` reads the runs)."""
        return [Transition(item_id, run.lifecycle, run.projection, run.reason)
                for run in self.runs for item_id in run.item_ids]

    @property
    def transition_count(self) -> int:
        return sum(len(run.item_ids) for run in self.runs)

    @property
    def is_empty(self) -> bool:
        return not self.runs and not self.generated and not self.relayout


class Rejection(BaseModel):
    """A condensation that was refused ("rejected") or had nothing to do ("no-op")."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["rejected", "no-op", "stale"]
    reason: str


class CreatedItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    item_id: str
    text: str  # the caller stores it under item_id so the renderer can load it


class ApplyResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    applied: bool
    stale: bool = False
    reason: str = ""
    archived: list[Item] = Field(default_factory=list)  # left the state: persist their metadata
    created: list[CreatedItem] = Field(default_factory=list)
    tokens_after: int = 0
