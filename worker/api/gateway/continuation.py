"""Continued requests: a conversation's next call sent upstream before its session stores it.

A gateway call's own background write stores its answer with a step, whose result is the
session's next plan and the facts that say when new turns continue it
(``workflows/context/continuation.py``). This process keeps that plan. The conversation's
next call, when its new turns are tool outputs or user messages that continue it (each enters
whole, no compaction or layout change comes due, the request still fits), is rendered from the plan and
sent at once, with no workflow update before the upstream call; its turns are stored with its
answer, in the step that checks that the session would have planned exactly that request (a
miss is logged as ``context.continuation.missed``: the request sent fit the budget, but the
session would have sent another).

A plan is used once, and only by the process that took it: a call served elsewhere, after a
restart, or whose turns do not continue it takes its own step first, as every call did before.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from activities.items import as_stored, measure_external
from lanes_client.schemas import ItemIn
from worker.api.gateway.conversation import Call, Turn, item_in
from workflows.context import ItemContent, Projection, ToolClass, classify_tool, continuation
from workflows.contract.events import EventSpec
from workflows.contract.items import IngestItemsInput
from workflows.contract.lane_events import request_event
from workflows.contract.session import ContinuedRequest, ExternalItem, PreparedRequest, travels_inline

KEPT = 4096  # sessions whose last plan one API process keeps (the oldest go first)
CONTINUING = ("tool_result", "user")  # the turns that may continue a plan: tool outputs, user messages


@dataclass
class Continuation:
    """A session's plan after the answer at ``position`` (chain digest ``chain``), with the
    content of the items it shows that the session may still be writing."""

    position: int
    chain: str
    prepared: PreparedRequest
    contents: dict[str, ItemContent]


@dataclass
class Continued:
    """A call's request continued from a plan: what renders it, and what its step carries."""

    prepared: PreparedRequest
    contents: dict[str, ItemContent]
    turns: list[ItemIn]  # the call's turns, as its answer row holds them
    items: list[ExternalItem]  # ... and as its step appends them
    request: ContinuedRequest


class Continuations:
    """The last plan of each session this process answered in, used at most once."""

    def __init__(self, kept: int = KEPT) -> None:
        self._plans: OrderedDict[str, Continuation] = OrderedDict()
        self._kept = kept

    def put(self, session_id: str, plan: Continuation) -> None:
        self._plans[session_id] = plan
        self._plans.move_to_end(session_id)
        while len(self._plans) > self._kept:
            self._plans.popitem(last=False)

    def take(self, session_id: str) -> Continuation | None:
        return self._plans.pop(session_id, None)

    def drop(self, session_id: str) -> None:
        self._plans.pop(session_id, None)


def continued(session_id: str, plan: Continuation, turns: list[Turn], chains: list[str],
              answered: Turn) -> Continued | None:
    """The request for ``turns`` (the call's new turns after the answer ``answered``, their
    chain digests ``chains``) as ``plan`` continued, or None when they do not continue it."""
    facts = plan.prepared.continuation
    if facts is None or not may_continue(turns):
        return None
    calls = {c.id: c for c in answered.tool_calls}
    ins = [item_in(turn, chain) for turn, chain in zip(turns, chains, strict=True)]
    items = [_external(item, turn, calls) for item, turn in zip(ins, turns, strict=True)]
    inp = IngestItemsInput(session_id=session_id, lane=facts.lane, model=facts.model,
                           preview_chars=plan.prepared.preview_chars, task_id=facts.task_id,
                           first_seq=facts.next_seq, items=items, bound_above_tokens=facts.bound_above_tokens,
                           recall=plan.prepared.recall, preview_lines=facts.preview_lines)
    measured, _ = measure_external(inp, [t.text for t in turns], [{} for _ in turns])
    stored = [as_stored(item, content) for item, content in measured]
    if not continuation.continues(facts, [item for item, _ in stored], plan.prepared.preview_chars):
        return None
    added = sum(item.cost(Projection.FULL) for item, _ in stored)
    entries = [*plan.prepared.entries, *[(item.id, Projection.FULL) for item, _ in stored]]
    prepared = plan.prepared.model_copy(update={
        "entries": entries, "total_tokens": plan.prepared.total_tokens + added,
        "unstored_items": [*plan.prepared.unstored_items, *[item for item, _ in stored]],
        "request_event": _request_event(plan.prepared, facts.lane, facts.next_seq + len(items), added),
        "continuation": None})
    digest = continuation.entries_digest(entries)
    return Continued(prepared=prepared, contents={**plan.contents, **{item.id: c for item, c in stored}},
                     turns=ins, items=items, request=ContinuedRequest(generation=facts.generation, items=len(items),
                                                           digest=digest, tokens=facts.request_tokens + added))


def may_continue(turns: list[Turn]) -> bool:
    """Whether ``turns`` are of the kinds that may continue a plan: tool outputs answering a
    call, or user messages, plain and small enough to travel in the step (the plan's facts
    decide the rest: a user message continues only where it joins the task)."""
    return bool(turns) and all(
        t.kind in CONTINUING and (t.kind != "tool_result" or t.tool_call_id) and not t.extras
        and travels_inline(t.kind, t.text) for t in turns)


def tool_class_of(turn: Turn, calls: dict[str, Call]) -> ToolClass | None:
    """The class of a tool output read from its call (``calls``: the answer's, by id)."""
    call = calls.get(turn.tool_call_id or "")
    return None if call is None else classify_tool(turn.tool_name or call.name, call.arguments)


def _external(item: ItemIn, turn: Turn, calls: dict[str, Call]) -> ExternalItem:
    return ExternalItem(kind=item.kind, text=item.text, tool_call_id=item.tool_call_id, tool_name=item.tool_name,
                        client_id=item.item_id, tool_class=tool_class_of(turn, calls))


def _request_event(prepared: PreparedRequest, lane: str, answer_seq: int, added: int) -> EventSpec | None:
    """The plan's ``context.request`` sample, for the continued request: keyed by the seq its
    answer takes, its tokens and working set grown by what the turns added."""
    event = prepared.request_event
    if event is None:
        return None
    payload = event.payload
    return request_event(lane, answer_seq, task_id=payload.get("task_id"),
                         turn=payload.get("turn"), request_tokens=payload["request_tokens"] + added,
                         working_set_tokens=payload["working_set_tokens"] + added, budget=payload["budget"],
                         ladder=payload["ladder"], stable_prefix_digest=payload["stable_prefix_digest"],
                         parked_observations=payload["parked_observations"])
