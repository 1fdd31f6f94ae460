"""The vocabulary of the context engine: items, their lifecycle and projections.

An item is one stored conversation element (a message, a tool result, a note...).
The engine only ever sees its metadata; the exact content lives in PostgreSQL
(or, in the offline replay, in memory) under ``item.id``.
"""

from __future__ import annotations

from dataclasses import field, replace
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, TypeAdapter
from pydantic.dataclasses import dataclass


class Kind(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    NOTE = "note"  # pinned note written by the user or the agent
    DECISION = "decision"  # decision / constraint
    HANDOFF = "handoff"  # structured result of a subagent lane
    MEMORY = "memory"  # the one live long-term memory
    SUMMARY = "summary"  # rolling summary of pinned user messages and notes
    CHECKPOINT = "checkpoint"  # what the deterministic fallback keeps of archived history
    CAPABILITY = "capability"  # tool schema or skill body
    EPISODES = "episodes"  # generated markers of the active episodes (stable segment)
    NOTICE = "budget_notice"  # the budget notice: what a compaction did, the budget, how to recall (history)


# Kinds whose items the engine knows how to reclaim. Anything else is pinned.
KNOWN_KINDS: frozenset[str] = frozenset(k.value for k in Kind)
# Kinds that carry tool output (an observation address, an exchange group, a tool class).
TOOL_OUTPUT_KINDS: frozenset[str] = frozenset({Kind.TOOL_RESULT.value, Kind.HANDOFF.value})


class Lifecycle(StrEnum):
    PINNED = "pinned"  # never evicted by passes 1-2
    ACTIVE = "active"  # in the working set
    RETAINED = "retained"  # in the working set but reclaimable
    ARCHIVED = "archived"  # out of the working set; exact content still stored


class Projection(StrEnum):
    FULL = "full"
    COMPACT = "compact"  # head + tail with the observation address between
    REFERENCE = "reference"  # "Earlier <tool> output was compacted. Full output: observation://..."
    MINIMAL_REFERENCE = "minimal-reference"  # the address alone (overflow ladder)
    OMITTED = "omitted"


class ToolClass(StrEnum):
    """Eviction priority of a tool exchange: earlier members are evicted first."""

    WRITE = "write"
    READ = "read"
    RUN = "run"
    ERROR = "error"


@dataclass(slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class Item:
    """Metadata of one conversation item (never its content).

    A pydantic dataclass: validated when made, like the model it was, but its fields are
    plain slots the engine sets directly (a compaction moves thousands of items); its
    schema is built once, so payloads of items validate wherever they are decoded."""

    id: str
    seq: int  # position in the lane; strictly increasing
    kind: str  # a Kind value; unknown strings are pinned
    role: str  # how it renders: system / user / assistant / tool
    lifecycle: Lifecycle = Lifecycle.ACTIVE
    projection: Projection = Projection.FULL
    reason: str = "added"  # why it is in its current state
    # token cost per projection; OMITTED always costs 0
    tokens: dict[Projection, int] = field(default_factory=dict)
    group: int | None = None  # seq of the assistant turn this item belongs to
    task: str | None = None
    episode: str | None = None
    size_chars: int = 0
    # tool traffic
    tool_name: str | None = None
    tool_call_ids: list[str] = field(default_factory=list)
    tool_class: ToolClass | None = None
    exit_code: int | None = None
    observation_id: str | None = None  # "obs-..." for tool results and oversized input
    # capability context
    scope: str | None = None  # "step" or "task"
    # A short one-line preview (the caller supplies it, the engine bounds it): the engine never
    # sees content, so generated checkpoint and summary text quote these digests.
    digest: str = ""
    # The paths and code symbols the content mentions (the caller supplies them, at most a few):
    # a checkpoint lists those of archived items (EngineConfig.checkpoint_names).
    names: list[str] = field(default_factory=list)
    # An assistant turn's tool calls, one short line each, in the order of ``tool_call_ids``
    # (the caller supplies them): the checkpoint names the call beside an archived output's address.
    calls: list[str] = field(default_factory=list)
    # Up to a few of the content's lines that mention the most paths and symbols, clipped (the
    # caller supplies them): a checkpoint shows some lines of archived items verbatim
    # (EngineConfig.checkpoint_lines).
    lines: list[str] = field(default_factory=list)
    terminal: bool = False  # the final assistant answer of an ended task (set by end_task)
    # Its preview (COMPACT) also shows lines of the omitted part (preview.py): measured so by
    # the activity that stored it, when its session had EngineConfig.preview_lines on.
    preview_lines: bool = False

    def cost(self, projection: Projection | None = None) -> int:
        p = projection or self.projection
        if p == Projection.OMITTED:
            return 0
        if p in self.tokens:
            return self.tokens[p]
        # a projection that was never measured falls back to the cheapest measured larger one
        return self.tokens.get(Projection.FULL, 0)


def is_tool_output(item: Item) -> bool:
    return item.kind in TOOL_OUTPUT_KINDS or item.role == "tool"


# An item where it crosses a boundary (a stored row's metadata, an event): validated on the
# way in, JSON on the way out. Temporal's pydantic converter does the same for payloads.
ITEM: TypeAdapter[Item] = TypeAdapter(Item)


def item_from_json(data: Any) -> Item:
    return ITEM.validate_python(data)


def item_to_json(item: Item) -> dict[str, Any]:
    return ITEM.dump_python(item, mode="json")


def item_with(item: Item, **changes: Any) -> Item:
    """A copy of ``item`` with ``changes`` (shallow, like ``dataclasses.replace``)."""
    return replace(item, **changes)
