"""Answers into their sessions: an answer row's items appended (the call's own background
write, the conversation's next call, or the sweep), and the sweep that stores the rows nobody
else will.

The agent has an answer once its row is durable (``gateway_turns``); its items reach the session
in the background, and the conversation's next call makes sure they did. A conversation's last
answer has no next call: when the process that answered died before its write finished (or the
workflow could not be reached then), the row would stay outside the session for good. Every API
process therefore sweeps: rows answered more than ``gateway_sweep_seconds`` ago and still not
stored are stored from the row, under the same key and update id as every other writer, so the
session holds them once whoever runs (several processes may sweep the same row at once).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from activities.gateway_turns import GatewayTurn, GatewayTurns
from lanes_client.schemas import ItemIn
from worker.api.backend import Backend
from worker.api.errors import ApiError
from worker.api.external_routes import external_items, update_id
from worker.api.gateway.answer_writes import AnswerWrites
from worker.api.gateway.continuation import Continuation, Continuations
from worker.api.gateway.conversation import Call, Turn, item_in
from workflows.context import price_for
from workflows.contract.external_calls import json_digest
from workflows.contract.session import AppendItemsRequest, ContinuedRequest, ReportedUsage, StepRequest, StepResult
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.gateway")

ENDED = ("session_ended", "session_closed")  # a session that takes no more calls
SWEEP_BATCH = 100  # rows one sweep takes at most (the next sweep takes the rest)
# Attempts at a write that a copy of its call, or another call's write still landing, refused
# (Gateway.serve, store_answer_row), with a growing pause between them
RACE_ATTEMPTS, RACE_PAUSE = 4, 0.05
# Refusals of an answer's write that another call's write still landing explains (its items are
# in the session, not yet in the store)
RACED = frozenset({"item_id_conflict", "unpaired_tool_call"})


def answer_items(row: GatewayTurn) -> list[tuple[ItemIn, dict]]:
    """The items an answer row is stored as (each recall round, the model's call and the
    gateway's results, then the final message; rows written before they held their items: the
    final message), each under a client id derived from the row: whichever writer appends them
    (the call's own write, the next call's step, the sweep), another finds them stored."""
    answer = row.answer
    assert answer is not None
    if "items" in answer:
        items = [(ItemIn.model_validate(item), extras) for item, extras in answer["items"]]
    else:
        items = [(item_in(Turn("assistant", answer["text"], tool_calls=tuple(
            Call(*c) for c in answer["tool_calls"])), None), {})]
    turns = int(answer.get("turns") or 0)  # a continued call's own turns first: named by their chains
    return [(item if n < turns else item.model_copy(update={"item_id": f"gw-{row.chain[:40]}-{n}"}), extras)
            for n, (item, extras) in enumerate(items)]


def answer_usage(be: Backend, row: GatewayTurn) -> ReportedUsage:
    """The provider's counts of the answer's calls, costed at the model that answered."""
    answer = row.answer
    assert answer is not None
    prompt, cached, completion = answer["usage"]
    model = str((answer.get("raw") or {}).get("model") or "")
    return ReportedUsage(prompt=prompt, cached=cached, completion=completion, model=None,
                         price=price_for(be.settings.prices, model) if model else None)


async def store_answer_row(be: Backend, table: GatewayTurns, sid: str, row: GatewayTurn,
                           plans: Continuations | None = None) -> None:
    """The answer's items (after a continued call's own turns), with the calls' usage, appended
    under the row's key; then the row (and those turns) are marked stored. With ``plans``, by
    a step whose plan it keeps for the conversation's next call; a continued call's answer by a
    step too, which checks the request it sent. Items another call's step already appended are
    not appended again (all of them: no update at all, its usage went with that step); one
    still being written behind (the session holds it, the store not yet) refuses the update,
    which is sent again once the write has landed."""
    answer = row.answer
    assert answer is not None
    for attempt in range(RACE_ATTEMPTS):
        try:
            await _store_items(be, sid, row, answer, plans, attempt)
            break
        except ApiError as error:
            if error.code not in RACED or attempt == RACE_ATTEMPTS - 1:
                raise
            await asyncio.sleep(RACE_PAUSE * (attempt + 1))
    turns = int(answer.get("turns") or 0)
    await table.mark_stored(sid, list(range(row.position - turns, row.position + 1)))


async def _store_items(be: Backend, sid: str, row: GatewayTurn, answer: dict[str, Any],
                       plans: Continuations | None, attempt: int) -> None:
    items = answer_items(row)
    key = f"gw-answer-{row.chain[:48]}"
    incoming = await external_items(be, sid, items, key)
    if not incoming.items:
        return
    classes = {item.item_id: c for (item, _), c in zip(items, answer.get("classes") or [], strict=False) if c}
    externals = [e.model_copy(update={"tool_class": classes[e.client_id]}) if e.client_id in classes else e
                 for e in incoming.items]
    # the digest of the items as first written, before they carried client ids: one update id
    # for every writer of this row, whichever code wrote it first (an attempt after a refusal
    # has its own: Temporal answers a failed update's id with its failure)
    digest = json_digest([{**i.model_dump(mode="json"), "item_id": None} for i, _ in items])
    attempt_digest = digest if attempt == 0 else f"{digest}/{attempt}"
    usage = answer_usage(be, row)
    sent = answer.get("continued")
    continued = ContinuedRequest(**sent) if sent is not None and len(incoming.items) == len(items) else None
    if plans is None and continued is None:
        await be.update(sid, "store the answer", SessionWorkflow.append_items,
                        AppendItemsRequest(items=externals, key=key, digest=digest, usage=usage),
                        update_id=update_id("append", key, attempt_digest))
        return
    # not written behind: a read through the API after the answer finds its items
    request = StepRequest(items=externals, step_id=key, digest=digest, usage=usage, continued=continued)
    try:
        result: StepResult = await be.update(sid, "store the answer", SessionWorkflow.step, request,
                                             update_id=update_id("answer", key, attempt_digest))
    except ApiError as error:
        if error.code != "request_unfit":
            raise
        return  # stored, but no request fits after them: the next call says so
    if result.continued_held is False:
        log.warning("gateway: %s would not have planned the request continued before %d", sid, row.position)
    if plans is not None:
        plans.put(sid, Continuation(position=row.position, chain=row.chain, prepared=result.request,
                                    contents=incoming.contents_by_id(result.item_ids)))


async def sweep(be: Backend, writes: AnswerWrites, older_than: float) -> int:
    """Store the answer rows left unstored for ``older_than`` seconds (through ``writes``, so a
    row this process is already writing is not written twice here); how many were found. A
    row whose session ended is marked unstorable, with why: its conversation, if it goes on,
    goes on in a new session that holds the whole of it."""
    table = GatewayTurns(await be.store())
    found = await table.unstored_answers(older_than, SWEEP_BATCH)
    for sid, row in found:
        writes.start((sid, row.position), functools.partial(_store_swept, be, table, sid, row))
    return len(found)


async def _store_swept(be: Backend, table: GatewayTurns, sid: str, row: GatewayTurn) -> None:
    try:
        await store_answer_row(be, table, sid, row)
    except ApiError as error:
        if error.code not in ENDED:
            raise
        await table.mark_unstorable(sid, row.position, error.code)
        log.info("gateway: the answer at %d of %s cannot be stored: the session has ended (%s)",
                 row.position, sid, error.code)
        return
    log.info("gateway: stored the answer at %d of %s, left unstored by its call", row.position, sid)


async def sweep_forever(be: Backend, writes: AnswerWrites, every: float) -> None:
    """Sweep every ``every`` seconds (rows answered at least that long ago) until cancelled;
    a sweep that fails (the database or Temporal down) is tried again at the next. An API
    without a database serves no gateway: nothing to sweep."""
    if not be.settings.database_url:
        return
    while True:
        await asyncio.sleep(every)
        try:
            await sweep(be, writes, every)
        except Exception as error:  # cancellation (a BaseException) ends the loop
            log.warning("gateway: the sweep of unstored answers failed (%s: %s); it runs again in %gs",
                        type(error).__name__, error, every)
