"""Continuing the last request: the next request planned without the session.

Between compactions the engine's next plan is its last one with the new items appended: an
item enters at its entry projection and changes no other (``ledger.add_item``, ``plan_cache``).
So when the new items are tool outputs that enter whole, no compaction or layout change comes
due and the request still fits, the next plan is known before the session has stored them. A
caller holding the last plan and these facts (taken right after it was planned) may send that
request at once and store the items after; the session, storing them, checks that it would
have planned exactly what was sent (``plan_was``) and records when it would not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from .assembly import plan_assembly
from .budget import budget, working_set_cost
from .compaction import compaction_room, needs_compaction
from .items import Item, Kind, Projection, is_tool_output
from .ledger import ContextState
from .request_plan import RequestPlan, plan_fitting


class ContinuationFacts(BaseModel):
    """What decides, without the session, whether new items continue the last plan."""

    generation: int  # the state's generation the plan was made at: nothing changed since
    next_seq: int  # the seq the first new item takes (item ids derive from it)
    task_id: str | None  # the task the new items join
    full_chars: int  # a tool output longer than this enters as a preview
    max_item_tokens: int  # ... and one whose full cost is above this enters bounded
    room_tokens: int  # working-set tokens that may be added before a compaction is due
    fit_tokens: int  # request tokens that may be added within the budget
    request_tokens: int  # what the provider counts of the last request, by our count
    # how the session measures items (IngestItemsInput): the caller measures the new ones alike
    lane: str
    model: str
    bound_above_tokens: int | None
    preview_lines: bool
    # user messages join the current task and change nothing else (a conversation that is one
    # task, as the gateway's are): they continue the plan too, when they enter whole
    users_continue: bool = False


def facts_of(state: ContextState, plan: RequestPlan, *, next_seq: int, request_tokens: int, lane: str,
             model: str, bound_above_tokens: int | None, preview_lines: bool,
             users_continue: bool = False) -> ContinuationFacts | None:
    """The facts of ``state`` right after ``plan`` was made from it (``request_tokens``: with
    tool definitions and capability context) and its step ended; None when no next plan can
    continue it: a lower rung of the overflow ladder (the next plan starts from the full one)
    or step-scoped capability context (it leaves with the step)."""
    if plan.ladder != Projection.FULL or plan.step_entries:
        return None
    config = state.config
    return ContinuationFacts(generation=state.generation, next_seq=next_seq, task_id=state.current_task,
                             full_chars=config.effective_preview_chars, max_item_tokens=config.max_item_tokens,
                             room_tokens=compaction_room(state), fit_tokens=budget(state) - plan.total_tokens,
                             request_tokens=request_tokens, lane=lane, model=model,
                             bound_above_tokens=bound_above_tokens, preview_lines=preview_lines,
                             users_continue=users_continue)


def continues(facts: ContinuationFacts, items: Sequence[Item], preview_chars: int) -> bool:
    """Whether ``items`` (measured as the session measures them) continue the plan ``facts``
    were taken after: each a tool output, or a user message where they continue the task,
    entering whole, together within the room left."""
    if not items or not all(_enters_whole(facts, i) for i in items):
        return False
    added = sum(working_set_cost(i, preview_chars) for i in items)
    return added <= facts.room_tokens and sum(i.cost(Projection.FULL) for i in items) <= facts.fit_tokens


def _enters_whole(facts: ContinuationFacts, item: Item) -> bool:
    if item.cost(Projection.FULL) > facts.max_item_tokens:  # enters bounded (ledger's entry projection)
        return False
    if is_tool_output(item):
        return item.size_chars <= facts.full_chars  # a longer one enters as a preview
    return facts.users_continue and item.kind == Kind.USER.value


def entries_digest(entries: Iterable[tuple[str, Projection]]) -> str:
    """A digest of a plan's entries: what a continued request was rendered from."""
    text = "\n".join(f"{item_id} {Projection(projection).value}" for item_id, projection in entries)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def plan_was(state: ContextState, digest: str) -> bool:
    """Whether the request the session would plan now is the one whose entries digest to
    ``digest``: no compaction or layout change due, the full rung fits, the same entries."""
    if needs_compaction(state) or plan_assembly(state) is not None:
        return False
    plan = plan_fitting(state, 0)[0]
    return plan.fits and entries_digest(plan.pairs) == digest
