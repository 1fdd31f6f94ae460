"""Recall coverage: which character ranges of an observation the agent has read.

Targeted tasks may read selected ranges; an exhaustive task may not end while a
required observation still has unread ranges (see ``tasks.end_task``).
"""

from __future__ import annotations

from bisect import insort
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .ledger import ContextState


class Coverage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    total_chars: int
    read: list[tuple[int, int]] = Field(default_factory=list)  # merged, sorted [start, end)

    def add(self, start: int, end: int) -> None:
        end = min(end, self.total_chars)
        if start >= end:
            return
        insort(self.read, (start, end))
        merged: list[tuple[int, int]] = []
        for a, b in self.read:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.read = merged

    def unread(self) -> list[tuple[int, int]]:
        gaps, position = [], 0
        for a, b in self.read:
            if a > position:
                gaps.append((position, a))
            position = max(position, b)
        if position < self.total_chars:
            gaps.append((position, self.total_chars))
        return gaps


def _coverage(state: ContextState, obs_id: str, total_chars: int) -> Coverage:
    if total_chars < 0:
        raise ValueError(f"total_chars of {obs_id} must be non-negative, got {total_chars}")
    entry = state.coverage.get(obs_id)
    if entry is None:
        entry = state.coverage[obs_id] = Coverage(total_chars=total_chars)
    elif total_chars > entry.total_chars:  # the caller learned the real size later
        entry.total_chars = total_chars
    return entry


def record_recall(state: ContextState, obs_id: str, offset: int, limit: int, total_chars: int) -> None:
    """Record that ``[offset, offset + limit)`` of ``obs_id`` was returned to the agent."""
    if offset < 0 or limit < 0:
        raise ValueError(f"recall of {obs_id}: offset and limit must be non-negative, got {offset}, {limit}")
    _coverage(state, obs_id, total_chars).add(offset, offset + limit)


def require_observation(state: ContextState, obs_id: str, total_chars: int) -> None:
    """Make the current exhaustive task traverse all of ``obs_id`` before it may end."""
    _coverage(state, obs_id, total_chars)
    if obs_id not in state.required_coverage:
        state.required_coverage.append(obs_id)


def unread_ranges(state: ContextState, obs_id: str) -> list[tuple[int, int]]:
    """Unread ``[start, end)`` ranges; an observation never recalled or required has none known."""
    entry = state.coverage.get(obs_id)
    return entry.unread() if entry else []
