"""Event-log entries the workflow writes about what the context engine did.

Events are small: ids, counts and token figures, never content. Their seqs come
from the lane's sequence, so a replayed workflow writes the same rows again and
the store keeps one of each.
"""

from __future__ import annotations

from collections.abc import Callable

from workflows.context import ApplyResult, CompactionPlan, Item, Kind, ids, item_to_json
from workflows.contract.events import EventSpec

# Episode transitions: the inspector and a parent repairing a dead child read episode state from these.
EPISODE_BEGUN, EPISODE_ENDED, EPISODE_ABANDONED = "episode.begun", "episode.ended", "episode.abandoned"
# The model was told its context was compacted (once per pressure streak: workflows/context/notice.py).
BUDGET_NOTICE = "context.budget.notice"
# A request a caller planned by continuing the last one that the session would not have sent
# (workflows/context/continuation.py)
CONTINUATION_MISSED = "context.continuation.missed"


def compaction_events(plan: CompactionPlan, result: ApplyResult, next_seq: Callable[[], int],
                      lane: str = ids.MAIN_LANE, notices: int = 0) -> list[EventSpec]:
    """One event for the compaction (or the task assembly), one for the budget notice it wrote
    (``notices``: the streaks announced so far, this one included), one per item that left
    the working set."""
    events = [
        event(
            "context.assembly" if plan.mode == "assembly" else f"context.compaction.{plan.mode}",
            {
                "applied": result.applied,
                "passes": plan.passes_run,
                "tokens_before": plan.tokens_before,
                "tokens_after": result.tokens_after,
                "target": plan.target,
                "budget": plan.budget,
                "reaches_target": plan.reaches_target,
                "transitions": plan.transition_count,
                "archived": len(result.archived),
                "created": [c.item_id for c in result.created],
            },
            next_seq(),
            lane,
        )
    ]
    for created in result.created:
        if created.key == Kind.NOTICE.value:
            events.append(event(BUDGET_NOTICE, {"item_id": created.item_id, "streak": notices, "budget": plan.budget,
                                                "tokens_after": result.tokens_after},
                                next_seq(), lane))
    for item in result.archived:
        events.append(archived_event(item, next_seq(), lane))
    return events


def request_event(lane: str, seq: int, *, task_id: str | None, turn: int | None, request_tokens: int,
                  working_set_tokens: int, budget: int, ladder: str, stable_prefix_digest: str,
                  parked_observations: int) -> EventSpec:
    """``context.request``: the pressure of one planned request (the inspector's timeline),
    keyed by the item seq its answer takes, in the lane's requests namespace. The digest of
    the stable prefix changes between two requests exactly when the prompt cache breaks;
    ``parked_observations`` counts the archived outputs recallable by address."""
    requests_lane = ids.request_events_lane(lane)
    return event("context.request", {
        "task_id": task_id, "turn": turn, "request_tokens": request_tokens,
        "working_set_tokens": working_set_tokens, "budget": budget, "ladder": ladder,
        "stable_prefix_digest": stable_prefix_digest, "parked_observations": parked_observations,
    }, seq, requests_lane)


def archived_event(item: Item, seq: int, lane: str = ids.MAIN_LANE) -> EventSpec:
    """An archived item leaves workflow state; its last metadata is kept in the event log."""
    return event(
        "item.archived",
        {"item_id": item.id, "reason": item.reason, "metadata": item_to_json(item)},
        seq,
        lane,
    )


def event(kind: str, payload: dict, seq: int, lane: str = ids.MAIN_LANE) -> EventSpec:
    return EventSpec(lane=lane, seq=seq, event_id=ids.event_id(lane, seq), kind=kind, payload=payload)
