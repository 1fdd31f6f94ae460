"""One gateway call, protocol-neutral: find the session the conversation continues (or open
one, or branch), store what is new, plan the bounded request, call the upstream model
(answering its recall calls itself), store the answer and hand it back.

What is stored, and when:
- the call's new turns are claimed (``gateway_turns``), appended as one keyed step (a retried
  call appends nothing twice: its step id is the digest of its conversation), then marked stored;
- the answer is put beside them (its row holds every item it will be stored as), and the agent
  gets it then; its items are appended to the session after, under a key of its own
  (``answer_writes``), and the conversation's next call makes sure they were before it appends
  anything. A call retried after a dropped connection is answered from the row, with no second
  upstream call. Between the claim and the answer the upstream call itself is at least once: a
  call cut before its answer was stored is sent upstream again when the agent retries.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Request
from pydantic import ValidationError

from activities.gateway_turns import GatewayTurn, GatewayTurns
from activities.recall import recall
from lanes_client.schemas import FunctionToolIn, ItemIn, SessionCreate
from worker.api.backend import Backend
from worker.api.errors import ApiError
from worker.api.external_routes import external_items, request_out, update_id
from worker.api.gateway.answer import Answer, stored_answer
from worker.api.gateway.answer_store import (
    ENDED,
    RACE_ATTEMPTS,
    RACE_PAUSE,
    answer_items,
    answer_usage,
    store_answer_row,
)
from worker.api.gateway.answer_writes import AnswerWrites
from worker.api.gateway.continuation import Continuations, Continued, continued, may_continue
from worker.api.gateway.conversation import Conversation, GatewayInputError, Turn, item_in, next_chain
from worker.api.gateway.timing import CallTiming
from worker.api.routes import open_session
from workflows.context import ItemContent
from workflows.contract.external_calls import json_digest
from workflows.contract.session import (
    MAX_ITEMS_PER_CALL,
    AppendItemsRequest,
    PreparedRequest,
    ReportedUsage,
    StepRequest,
    StepResult,
)
from workflows.contract.tools import RECALL_TOOL
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.gateway")

MAX_RECALL_ROUNDS = 4  # upstream calls one agent call may take for the gateway's own recall calls
RECALL_MAX_CHARS = 16_000  # what one recall answer may hold
PLACEHOLDER = "observation://"
# How long an answer's background write waits for the conversation's next call, which then
# appends the answer with its own turns (one workflow update for both; agents whose tools are
# quick, as coding agents' file reads are, call again within it)
CARRY_SECONDS = 1.0
# How long an answer's background write waits when the next call may continue the plan it makes:
# a call that comes within it (an agent calling again at once) carries the answer in its own
# step, as before continued requests, instead of waiting for the write; one that comes after the
# write has ended (an agent whose tools took a moment) continues the plan with no update first
CONTINUE_CARRY_SECONDS = 0.03


class Upstream(Protocol):
    """One protocol's side of a call (openai_chat, anthropic_messages, through routes.py)."""

    format: str  # the request format the session renders (chat / anthropic / responses)
    streams: bool  # it can forward the upstream's own stream (else the answer is streamed whole)

    async def complete(self, prepared: Any, extra_tools: list[dict[str, Any]],
                       rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> Answer: ...

    def round_messages(self, answer: Answer, results: list[tuple[str, str]]) -> tuple[dict[str, Any],
                                                                                     list[dict[str, Any]]]: ...

    def recall_tool(self) -> dict[str, Any]: ...

    async def open_stream(self, prepared: Any) -> Any: ...  # a StreamedAnswer (upstreams.py)


@dataclass
class Served:
    session_id: str
    answer: dict[str, Any]  # stored_answer(...): what the agent is answered ({} while it streams)
    replayed: bool = False  # a retried call answered from what was stored
    stream: AsyncIterator[bytes] | None = None  # the upstream's own events, forwarded as they come


class Gateway:
    def __init__(self, request: Request, be: Backend, tenant: str, timing: CallTiming | None = None) -> None:
        self.request = request
        self.be = be
        self.tenant = tenant
        self.timing = timing or CallTiming()
        self.writes: AnswerWrites = request.app.state.answer_writes
        # the plans made after answers, when calls may continue them (continuation.py)
        self.plans: Continuations | None = request.app.state.continuations if be.settings.gateway_continue else None

    async def turns_table(self) -> GatewayTurns:
        return GatewayTurns(await self.be.store())

    # --- which session -----------------------------------------------------------------

    async def serve(self, conversation: Conversation, model: str, tools: list[dict[str, Any]],
                    upstream: Upstream, session_header: str | None, budget: int | None,
                    stream: bool = False) -> Served:
        """``stream``: forward the upstream's events as they come, unless the gateway may have to
        answer recall calls first (then the answer is streamed whole once it is final).

        Copies of one call at once (an agent's retry racing its first attempt, on this API
        process or another) may store the same turns or answer in two updates; the session
        refuses the second before it writes anything (its items' ids are taken), and the call
        is served again from what the first stored."""
        chains = conversation.chains()
        for attempt in range(1, RACE_ATTEMPTS):
            try:
                return await self._serve(conversation, chains, model, tools, upstream, session_header, budget, stream)
            except ApiError as error:
                if error.code != "item_id_conflict":
                    raise
                log.info("gateway: a copy of this call stored its turns first (%s): served again", error.message)
                await asyncio.sleep(RACE_PAUSE * attempt)
        return await self._serve(conversation, chains, model, tools, upstream, session_header, budget, stream)

    async def _serve(self, conversation: Conversation, chains: list[str], model: str, tools: list[dict[str, Any]],
                     upstream: Upstream, session_header: str | None, budget: int | None, stream: bool) -> Served:
        table = await self.turns_table()
        sid, held = await self._session_of(table, chains, session_header)
        matched, read = await _held(table, sid, chains, held) if sid is not None else (0, [])
        answered = await _answer_after(table, sid, read, chains, matched) if sid is not None else None
        if sid is not None and answered and _asked(answered.answer) not in (None, model):
            # the same conversation put to another model: the answer that model gave, if any (a
            # branch), else it is answered in a new branch
            sibling = await table.answered_after(self.tenant, len(chains) - 1, chains[-1], model)
            if sibling is None:
                log.info("gateway: %s answered this conversation with another model: a new branch", sid)
            else:
                sid = sibling
                matched, read = await _held(table, sid, chains, len(chains) - 1)
                answered = await _answer_after(table, sid, read, chains, matched)
        if sid is not None and answered and _asked(answered.answer) in (None, model):
            self.timing.lap("find")
            return await self._replay(table, sid, answered)
        if sid is None or _beyond(read, matched):  # new, or it diverges from what the session holds
            if sid is not None:
                log.info("gateway: the conversation diverges from %s at turn %d: a new branch", sid, matched)
            sid = await self._open(conversation, model, tools, budget, table, chains)
            read, matched = await table.rows_from(sid), 0
        claims = await table.claim(sid, self.tenant, matched, chains[matched:])
        if any(c.chain != chains[c.position] for c in claims):  # another conversation claimed them first
            sid = await self._open(conversation, model, tools, budget, table, chains)
            read, matched = await table.rows_from(sid), 0
            claims = await table.claim(sid, self.tenant, 0, chains)
            if any(c.chain != chains[c.position] for c in claims):  # never continue another's conversation
                raise ApiError(409, "conflict", f"session {sid} holds another conversation; retry")
        # every position before ``matched`` that was not read is stored (``rows_from``)
        rows = {r.position: r for r in [*read, *claims]}
        if self.plans is not None and (going_on := await self._continuing(table, sid, conversation, chains, rows)):
            self.timing.lap("find")
            return await self._continue(table, sid, chains, going_on, upstream, stream, model)
        pending = sorted((r for r in rows.values() if r.answered and not r.stored), key=lambda r: r.position)
        carried: GatewayTurn | None = None  # the previous answer, appended by this call's own step
        for row in pending:  # answers still being stored
            if row is pending[-1] and self.writes.take((sid, row.position)):
                carried = await table.at(sid, row.position)
                if carried is None or carried.answer is None:  # cannot be: the row was just read as answered
                    raise ApiError(503, "not_ready", f"the answer at {row.position} of {sid} cannot be read; retry")
                break
            try:
                rows[row.position] = await self._answer_stored(table, sid, row)
            except ApiError as error:
                if error.code not in ENDED:
                    raise
                break  # the session takes no more: the step moves the whole conversation to a new one
        # the system prompt is stored by the session's start, never by a step; a copy of the call
        # that opened the session may read its row before it is marked, and must still take the
        # same step (its key derives from the turns from ``first`` on)
        first = min((p for p, row in rows.items()
                     if p < len(chains) and not row.stored and not (p == 0 and conversation.system)),
                    default=len(chains))
        self.timing.lap("find")
        try:
            prepared, contents = await self._step(sid, conversation.turns[first:], chains, carried,
                                                  skip={p for p in range(first, len(chains))
                                                        if p not in rows or rows[p].stored})
        except ApiError as error:
            if error.code not in ENDED:
                raise
            # the session ended (closed or terminated): the conversation goes on in a new one
            log.info("gateway: %s has ended (%s): the conversation continues in a new session", sid, error.code)
            self.timing.lap("step")
            sid = await self._open(conversation, model, tools, budget, table, chains)
            first = 1 if conversation.system else 0
            prepared, contents = await self._step(sid, conversation.turns[first:], chains)
        self.timing.lap("step")
        _, request = await asyncio.gather(  # the turns are in the session: marked while the request renders
            table.mark_stored(sid, list(range(first, len(chains)))),
            request_out(self.be, sid, prepared, upstream.format, contents))  # type: ignore[arg-type]
        offers_recall = PLACEHOLDER in _text_of(request)
        self.timing.lap("render")
        if stream and not offers_recall and upstream.streams:
            streamed = await self.timing.timed("upstream", upstream.open_stream(request))

            async def store(answer: Answer) -> None:
                await self._keep_answer(table, sid, chains, [answer], {}, model)

            return Served(session_id=sid, answer={}, stream=streamed.events(until_stored=store))
        return await self._answer(table, sid, chains, request, upstream, offers_recall, model)

    async def _continuing(self, table: GatewayTurns, sid: str, conversation: Conversation, chains: list[str],
                          rows: dict[int, GatewayTurn]) -> Continued | None:
        """The call's request as the plan made after the conversation's last answer continued,
        when this process holds that plan and the call's new turns continue it (its own
        background write of that answer is waited for: it makes the plan)."""
        last = max((p for p, row in rows.items() if row.answered), default=-1)
        claimed = sorted(p for p, row in rows.items() if p > last and not row.stored)
        at = claimed[0] - 1 if claimed else -1  # the answer the call's new turns follow
        if at < 0 or claimed != list(range(at + 1, len(chains))):
            return None  # only turns this call claimed follow the answer
        if conversation.turns[at].kind != "assistant" or not may_continue(conversation.turns[at + 1:]):
            return None  # before waiting for the answer's write: no plan would serve these turns
        answer = rows.get(at)  # not read: stored (``rows_from``)
        if answer is not None and not answer.stored and self.writes.waiting((sid, at)):
            return None  # the call came before the answer's write began: its step carries the answer
        if answer is not None and not answer.stored:  # its write waited for (or just ended): read again
            await self.writes.wait((sid, at))
            answer = await table.at(sid, at) or answer
        # a continued call's turns are stored with its answer (its row holds them)
        held = int(((answer.answer if answer is not None else None) or {}).get("turns") or 0)
        if any(not row.stored for p, row in rows.items() if 0 < p < at - held):
            return None  # an earlier answer is still being stored: the step path carries it
        plan = self.plans.take(sid) if self.plans is not None else None
        if plan is None or (answer is not None and not answer.stored) or plan.position != at or plan.chain != chains[at]:
            return None
        return continued(sid, plan, conversation.turns[at + 1:], chains[at + 1:], conversation.turns[at])

    async def _continue(self, table: GatewayTurns, sid: str, chains: list[str], going_on: Continued,
                        upstream: Upstream, stream: bool, model: str) -> Served:
        """Serve a continued call: rendered from the plan and sent at once; its turns are stored
        with its answer (the answer row holds them: whoever stores the row stores them too)."""
        request = await request_out(self.be, sid, going_on.prepared, upstream.format, going_on.contents)  # type: ignore[arg-type]
        offers_recall = PLACEHOLDER in _text_of(request)
        self.timing.lap("render")
        turns = {"turns": len(going_on.items), "continued": going_on.request.model_dump(mode="json"),
                 "classes": [None if e.tool_class is None else e.tool_class.value for e in going_on.items],
                 "items": [[item.model_dump(mode="json"), {}] for item in going_on.turns]}
        if stream and not offers_recall and upstream.streams:
            streamed = await self.timing.timed("upstream", upstream.open_stream(request))

            async def store(answer: Answer) -> None:
                await self._keep_answer(table, sid, chains, [answer], {}, model, turns)

            return Served(session_id=sid, answer={}, stream=streamed.events(until_stored=store))
        return await self._answer(table, sid, chains, request, upstream, offers_recall, model, turns)

    async def _session_of(self, table: GatewayTurns, chains: list[str],
                          header: str | None) -> tuple[str | None, int | None]:
        """The session the call continues and the position of the longest prefix of it that
        the session holds (None: none of it)."""
        if header is not None:
            row = await self.be.owned_session(header, self.tenant)  # 404 for another tenant's
            if row.mode != "external":
                raise GatewayInputError(f"X-Lanes-Session: session {header!r} is not a gateway (external) session")
            found = await table.longest_prefix(self.tenant, chains, session_id=header)
            return header, None if found is None else found[1]
        found = await table.longest_prefix(self.tenant, chains)
        return (None, None) if found is None else found

    async def _open(self, conversation: Conversation, model: str, tools: list[dict[str, Any]], budget: int | None,
                    table: GatewayTurns, chains: list[str]) -> str:
        """A new session for the call's conversation, opened under an id derived from the whole
        of it and the model asked, so that copies of one call sent at once open one session (the
        others wait for it to start). Every turn is claimed in one write before anyone can find
        the session, so no other conversation continues it. Its system prompt is its first item."""
        self.timing.lap("find")
        sid = "ses-" + hashlib.sha256(f"{self.tenant}|{model}|{chains[-1]}".encode()).hexdigest()[:12]
        body = SessionCreate(mode="external", model=model, system_prompt=conversation.system or None,
                             budget_tokens=budget or self.be.settings.gateway_budget_tokens,
                             tool_definitions=_definitions(tools), tools="recall", recall="tool",
                             tasks="conversation")  # tool output may come as user messages: see SessionConfig.tasks
        try:
            await open_session(self.request, self.tenant, self.be, body, session_id=sid)
        except ApiError as error:
            if error.code != "conflict":
                raise
            await self._started(sid)  # opened by a copy of this call: wait until it runs
            self.timing.lap("open")
            return sid
        await table.claim(sid, self.tenant, 0, chains)
        if conversation.system:  # stored by the session's start: position 0 is the system prompt
            await table.mark_stored(sid, [0])
        self.timing.lap("open")
        return sid

    async def _started(self, sid: str, seconds: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            try:
                await self.be.owned_session(sid, self.tenant)
                described = await self.be.temporal(sid, "describe the session", lambda h: h.describe(), 5)
                if described.status is not None and described.status.name == "RUNNING":
                    return
            except ApiError:
                pass
            if loop.time() > deadline:
                raise ApiError(503, "not_ready", f"session {sid} is being opened by another call; retry")
            await asyncio.sleep(0.1)

    # --- storing and planning ------------------------------------------------------------

    async def _step(self, sid: str, turns: list[Turn], chains: list[str], carried: GatewayTurn | None = None,
                    skip: set[int] | None = None) -> tuple[PreparedRequest, dict[str, ItemContent]]:
        """Append ``turns`` (the conversation's last ones) and get the bounded request, with the
        content of the turns the session is still storing (``request_out`` renders them). The step is
        keyed by the turns it appends (a copy of the call appends nothing twice) and each item by
        its own chain digest (a retry that appends a different batch skips what is stored).
        ``carried``: the answer row among them, appended as its row holds it (recall rounds
        included) with its usage, in place of the agent's copy of it. ``skip``: positions stored
        already (an answer stored from its row while the turns before it were not marked)."""
        first = len(chains) - len(turns)
        items: list[tuple[ItemIn, dict]] = []
        positions: list[int] = []  # each item's turn (an answer carried with recall rounds is several)
        # a continued call's answer row holds that call's turns too, first (continuation.py)
        held = set() if carried is None or carried.answer is None else set(range(
            carried.position - int(carried.answer.get("turns") or 0), carried.position))
        for n, turn in enumerate(turns):
            if (skip and first + n in skip) or first + n in held:
                continue
            if carried is not None and first + n == carried.position:
                carried_items = answer_items(carried)
                items += carried_items
                positions += [first + n] * len(carried_items)
            elif turn.kind != "system" or n + first:
                items.append((item_in(turn, chains[first + n]), turn.extras or {}))
                positions.append(first + n)
        usage = answer_usage(self.be, carried) if carried is not None else None
        while len(items) > MAX_ITEMS_PER_CALL:  # more than a step takes: the leading ones appended first
            head, rest = positions[:MAX_ITEMS_PER_CALL], positions[MAX_ITEMS_PER_CALL:]
            # the carried answer's usage goes with the batch that stores its last item (a row found
            # stored later is marked without another update, so it must not wait for the step)
            carries = carried is not None and carried.position in head and carried.position not in rest
            await self._append(sid, items[:MAX_ITEMS_PER_CALL], chains[head[0]:head[-1] + 1], usage if carries else None)
            usage = None if carries else usage
            items, positions = items[MAX_ITEMS_PER_CALL:], rest
        if not items:  # everything is stored (a call sent again after its upstream failed): only the request
            result: StepResult = await self.be.update(sid, "prepare the request", SessionWorkflow.step,
                                                      StepRequest())
            return result.request, {}
        batch = chains[first:]
        key = _turns_key("gw", batch)
        incoming = await external_items(self.be, sid, items, key)
        self.timing.lap("items")
        digest = json_digest(batch)
        request = StepRequest(items=incoming.items, step_id=key, digest=digest, usage=usage, write_behind=True)
        result = await self.be.update(sid, "take the step", SessionWorkflow.step, request,
                                      update_id=update_id("step", key, digest))
        return result.request, incoming.contents_by_id(result.item_ids)

    async def _append(self, sid: str, items: list[tuple[ItemIn, dict]], chains: list[str],
                      usage: ReportedUsage | None) -> None:
        """Append ``items`` (turns whose chain digests are ``chains``) ahead of a step that takes
        the rest, keyed by those turns: a retry of the call appends nothing twice, and items
        stored by any earlier attempt are skipped by their chain digests."""
        key = _turns_key("gwa", chains)
        incoming = await external_items(self.be, sid, items, key)
        if not incoming.items:
            return
        digest = json_digest([*chains, str(len(items))])
        await self.be.update(sid, "append the conversation", SessionWorkflow.append_items,
                             AppendItemsRequest(items=incoming.items, key=key, digest=digest, usage=usage),
                             update_id=update_id("append", key, digest))

    async def _answer(self, table: GatewayTurns, sid: str, chains: list[str], request: Any, upstream: Upstream,
                      offers_recall: bool, model: str, turns: dict[str, Any] | None = None) -> Served:
        extra = [upstream.recall_tool()] if offers_recall else []
        rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []  # as the upstream is sent them
        answers: list[Answer] = []
        recalled: dict[str, str] = {}  # recall call id -> what the gateway answered it
        store = await self.be.store()
        while True:
            answer = await self.timing.timed("upstream", upstream.complete(request, extra, rounds))
            answers.append(answer)
            recalls = [c for c in answer.turn.tool_calls if c.name == RECALL_TOOL] if offers_recall else []
            if not recalls:
                break
            results = [(c.id, (await self.timing.timed("recall", recall(store, sid, c.arguments,
                                                                        RECALL_MAX_CHARS)))[0].text)
                       for c in recalls]
            recalled.update(results)
            rounds.append(upstream.round_messages(answer, results))
            if answer.for_agent().tool_calls or len(rounds) >= MAX_RECALL_ROUNDS:
                break  # the agent's own calls wait for it; or enough rounds: the answer as it is
        kept = await self.timing.timed("keep", self._keep_answer(table, sid, chains, answers, recalled, model, turns))
        return Served(session_id=sid, answer=kept)

    async def _keep_answer(self, table: GatewayTurns, sid: str, chains: list[str], answers: list[Answer],
                           recalled: dict[str, str], model: str, turns: dict[str, Any] | None = None) -> dict[str, Any]:
        """Put the answer beside the conversation (with the items it is stored as: after
        ``turns``' items, a continued call's own turns) and store those in the background; the
        answer the agent gets (another attempt's, when a concurrent one put its own there first)."""
        turns = turns or {}
        answer_row = {**stored_answer(answers, model), **turns,
                      "items": [*turns.get("items", []), *_answer_items(answers, recalled)]}
        chain = next_chain(chains[-1], answers[-1].for_agent())
        row = await table.put_answer(sid, self.tenant, len(chains), chain, answer_row)
        self._store_later(table, sid, row)
        return row.answer or answer_row

    def _store_later(self, table: GatewayTurns, sid: str, row: GatewayTurn) -> None:
        """Store the answer row in the background, a moment later (a next call that comes
        within it carries the answer in its own step); the moment is short when the next call
        may continue the plan the write makes (``continuation.py``)."""
        if not row.stored:
            plans = self.plans
            self.writes.start((sid, row.position), lambda: store_answer_row(self.be, table, sid, row, plans),
                              delay=CONTINUE_CARRY_SECONDS if plans is not None else CARRY_SECONDS)

    async def _answer_stored(self, table: GatewayTurns, sid: str, row: GatewayTurn) -> GatewayTurn:
        """``row`` (an answer row) once its items are in the session: this process's write waited
        for, else stored from the row (its writer is gone or elsewhere: the same items, key and
        update id, so the session holds them once)."""
        if await self.writes.wait((sid, row.position)):
            row = await table.at(sid, row.position) or row
        if not row.stored:
            full = row if row.answer is not None else await table.at(sid, row.position)
            assert full is not None and full.answer is not None
            await store_answer_row(self.be, table, sid, full)
        return GatewayTurn(position=row.position, chain=row.chain, stored=True, answered=True)

    async def _replay(self, table: GatewayTurns, sid: str, row: GatewayTurn) -> Served:
        """A retried call: the answer it was given (its items stored in the background if they
        are not yet)."""
        assert row.answer is not None
        self._store_later(table, sid, row)
        return Served(session_id=sid, answer=row.answer, replayed=True)


def _answer_items(answers: list[Answer], recalled: dict[str, str]) -> list[list[Any]]:
    """The items an answer is stored as, as its row keeps them ([item, extras] each): every
    upstream call's message, each followed by the gateway's answers to its recall calls."""
    items: list[list[Any]] = []
    for made in answers:
        items.append([item_in(made.turn, None).model_dump(mode="json"), made.turn.extras or {}])
        items += [[ItemIn(kind="tool_result", text=recalled[call.id], tool_call_id=call.id,
                          tool_name=RECALL_TOOL).model_dump(mode="json"), {}]
                  for call in made.turn.tool_calls if call.id in recalled]
    return items


def _turns_key(kind: str, chains: list[str]) -> str:
    """The key of a step or append that stores the turns whose chain digests are ``chains``."""
    return f"{kind}-{hashlib.sha256((chains[0] + chains[-1]).encode()).hexdigest()[:48]}"


async def _held(table: GatewayTurns, sid: str, chains: list[str], held: int | None) -> tuple[int, list[GatewayTurn]]:
    """How many leading turns of the call ``sid`` holds (``held``: the position of the last of
    them, None for none), and its rows from there on with its unstored rows before it. A row's
    digest covers every turn before it and a session's rows are claimed as one chain, so the
    rows before are not read; an unstored one left by an older claim that did not fit the
    chain is checked and ends the match there."""
    matched = 0 if held is None else held + 1
    read = await table.rows_from(sid, matched)
    # rows a copy of this call claimed after the prefix was looked up continue it: not a divergence
    continuing = {r.position: r.chain for r in read if r.position >= matched}
    while matched < len(chains) and continuing.get(matched) == chains[matched]:
        matched += 1
    misfits = [r.position for r in read
               if r.position < matched and (r.position >= len(chains) or r.chain != chains[r.position])]
    return (min(misfits) if misfits else matched), read


def _beyond(read: list[GatewayTurn], matched: int) -> bool:
    """Whether the session holds rows past the call's match: it continued otherwise."""
    return any(r.position >= matched for r in read)


async def _answer_after(table: GatewayTurns, sid: str, read: list[GatewayTurn], chains: list[str],
                        matched: int) -> GatewayTurn | None:
    """The answer row right after the whole call, when the session holds all of it (a retry).
    Read alone: ``read`` leaves answers out."""
    if matched != len(chains) or not _beyond(read, matched):
        return None
    row = await table.at(sid, matched)
    return row if row is not None and row.answer is not None else None


def _asked(answer: dict[str, Any] | None) -> str | None:
    """The model an answer row's call asked for (None in rows written before it was kept)."""
    asked = (answer or {}).get("asked")
    return asked if isinstance(asked, str) else None


def _text_of(request: Any) -> str:
    return json.dumps([request.messages, request.system, request.input, request.instructions])


def _definitions(tools: list[dict[str, Any]]) -> list[FunctionToolIn] | None:
    """The agent's tools as the session measures them (Chat function form); None when they do not fit it.
    Chat tools nest their function; Responses function tools are flat; Anthropic tools name their
    schema ``input_schema``."""
    out = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else {
            "name": tool.get("name"), "description": tool.get("description"),
            "parameters": tool.get("parameters", tool.get("input_schema"))}
        try:
            out.append(FunctionToolIn.model_validate({"type": "function", "function": {
                k: v for k, v in (fn or {}).items() if k in ("name", "description", "parameters") and v is not None}}))
        except ValidationError:
            return None
    return out or None

