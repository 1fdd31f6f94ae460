"""The budget notice: the model is told when its context was compacted.

An agent that cannot see its own token usage is surprised when older output turns into
references. With ``EngineConfig.budget_notice`` the first pressure compaction of each task
(a pressure streak: the compactions of one task) writes one short notice at the end of the
history: what was compacted, the budget and where the working set now stands, and how to
read archived output back. It is a generated item like the checkpoint: pinned (never
evicted), one live at a time (the next streak's replaces it), charged to the budget.
"""

from __future__ import annotations

from .items import Kind, Lifecycle, Projection
from .ledger import ContextState
from .observations import RecallStyle

_RECALL = {"tool": "call recall_observation with its observation:// address",
           "endpoint": "read it from the observations endpoint its observation:// address names"}


def announces(state: ContextState) -> bool:
    """A compaction now starts a pressure streak the model has not been told of."""
    return state.config.budget_notice and (state.notices == 0 or state.notice_task != state.current_task)


def notice_text(referenced: int, archived: int, tokens_after: int, budget: int, recall: RecallStyle) -> str:
    done = []
    if referenced:
        done.append(f"{referenced} older tool output{'s' if referenced != 1 else ''} now show as references")
    if archived:
        done.append(f"{archived} older item{'s' if archived != 1 else ''} moved into the checkpoint")
    what = "; ".join(done) or "older context was condensed"
    return (f"[Context budget] Your context was compacted to stay within its budget of {budget:,} tokens "
            f"(now about {tokens_after:,}): {what}. Nothing is lost: to read an output exactly, {_RECALL[recall]}.")


def counts(changes: dict) -> tuple[int, int]:
    """(referenced, archived) among a draft's changes (item id -> Change)."""
    referenced = sum(1 for c in changes.values() if c.lifecycle != Lifecycle.ARCHIVED
                     and c.projection in (Projection.REFERENCE, Projection.MINIMAL_REFERENCE))
    archived = sum(1 for c in changes.values() if c.lifecycle == Lifecycle.ARCHIVED)
    return referenced, archived


NOTICE = Kind.NOTICE.value
