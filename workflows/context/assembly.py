"""Task assembly: the request's stable segment kept current between compactions (rules 2).

The layout changes only at compactions and task ends, so that each request extends the
last one byte for byte. Some changes cannot wait for the next compaction without the model
seeing stale or misplaced context: the active-episode markers when an episode begins or
ends, a pinned note or decision that arrived since the last layout (it belongs in the
stable segment, not at the end of history), and a new task, at which the user messages
of earlier tasks older than the two most recent roll into the rolling summary. ``plan_assembly``
plans exactly those changes; it is planned before every request and is empty (None) when
nothing changed, so the prompt cache is broken only when the context really changed.
"""

from __future__ import annotations

from .compaction_plan import CompactionPlan
from .draft import Draft
from .episodes import markers_text
from .items import Item, Kind
from .layout import segment
from .ledger import ContextState
from .passes import old_submissions, roll_old_submissions
from .text import text_hash


def plan_assembly(state: ContextState) -> CompactionPlan | None:
    """What keeps the stable segment current, or None when it already is (or under rules 1).

    Checked before every request, so the common case (nothing changed) is decided without
    building a draft."""
    if state.config.rules_version < 2:
        return None
    markers = markers_text(state)
    live = state.generated.get(Kind.EPISODES.value)
    markers_changed = (live.text_hash if live else None) != (text_hash(markers) if markers else None)
    misplaced = any(_belongs_to_stable_segment(state.items[item_id]) for item_id in state.order[state.laid_out_len:])
    rolled = old_submissions(state)
    if not (markers_changed or misplaced or rolled):
        return None
    draft = Draft(state, "assembly")  # regenerates the episode markers when they changed
    roll_old_submissions(draft, rolled)
    draft.passes.append("assembly")
    plan = draft.to_plan()
    plan.relayout = True
    return plan


def _belongs_to_stable_segment(item: Item) -> bool:
    """A pinned note, decision or other instruction: it belongs with the stable semantics.
    User messages stay where they arrived until the next layout (a reply answers the turn
    before it), and the system prompt is first anyway."""
    return segment(item)[0] == "stable" and item.kind not in (Kind.USER.value, Kind.SYSTEM.value)
