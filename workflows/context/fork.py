"""Forking a child lane: the prefix it shares with its parent.

A subagent's requests start with its parent's request, byte for byte, and append the
child's own branch. The parent forks from the request it has just sent, so the provider's
prompt cache already holds the shared part. The child never compacts that prefix (it is
immutable: the parent's items under the projections the parent sent); it is charged
against the child's budget like the tool definitions, and only the branch is managed.

When the parent's whole request would take too much of the child's budget, the child
gets the stable and memory segments only (system and user instructions, pinned
decisions, the live memory); when even those do not fit, there is no fork.
"""

from __future__ import annotations

from .items import Projection
from .ledger import ContextState, SharedEntry
from .request_plan import PlanEntry, RequestPlan


def fork_prefix(state: ContextState, plan: RequestPlan, max_tokens: int) -> list[SharedEntry] | None:
    """The longest of (the whole request, its stable + memory segments) that costs at most
    ``max_tokens`` and answers every tool call it contains, or None. Step-scoped capability
    context belongs to the parent's step and is left out."""
    whole = plan.entries[: len(plan.entries) - plan.step_entries]
    segments = plan.entries[: plan.stable_entries + plan.memory_entries]
    for candidate in (whole, segments):
        if sum(e.tokens for e in candidate) <= max_tokens and _calls_answered(state, candidate):
            return [
                SharedEntry(item_id=e.item_id, projection=e.projection, tokens=e.tokens) for e in candidate]
    return None


def _calls_answered(state: ContextState, entries: list[PlanEntry]) -> bool:
    """A prefix that cut a call from its result would render differently on its own (the
    renderer drops unanswered calls), so it would not be the parent's bytes."""
    shared = {e.item_id for e in state.shared_prefix}
    called: set[str] = set()
    answered: set[str] = set()
    for entry in entries:
        if entry.item_id in shared or entry.projection == Projection.OMITTED:
            continue
        item = state.items[entry.item_id]
        if item.role == "assistant":
            called.update(item.tool_call_ids)
        elif item.role == "tool":
            answered.update(item.tool_call_ids[:1])
    return called <= answered


def prefix_tokens(entries: list[SharedEntry]) -> int:
    return sum(e.tokens for e in entries)
