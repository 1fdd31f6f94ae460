"""Activities of subagent lanes: the child's handoff, its record in the parent, recovery.

A child lane (``LaneWorkflow``) ends by storing its handoff as an item of its own lane
(``finish_lane``); the parent records that handoff as one item of its lane
(``record_handoff``), never the child's trace. When a child dies, the parent closes the
episodes it left open (``close_lane_episodes``) and asks Temporal what became of its
children (``LaneInspector.describe_lanes``).

Every write uses an id the workflow chose, so a retried activity reports what the first
attempt stored instead of writing again.
"""

from __future__ import annotations

import asyncio
import logging

from pydantic import ValidationError
from temporalio import activity
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.items import finish_item, load_item, read_whole, store_item, stored_item
from activities.runtime import ActivityGroup
from activities.store import Store
from activities.store_rows import EventRow
from workflows.context import Item, ItemContent, Kind, ToolClass, ids
from workflows.contract.failures import HANDOFF_INVALID, HANDOFF_MISSING, LANE_REPAIR_CONFLICT
from workflows.contract.handoff import (
    MAX_UNSTRUCTURED_CHARS,
    Handoff,
    failed_handoff,
    handoff_text,
    parse_handoff,
)
from workflows.contract.lane_events import EPISODE_ABANDONED, EPISODE_BEGUN, EPISODE_ENDED
from workflows.contract.lanes import CloseLaneEpisodesInput, FinishLaneInput, HandoffRef, LaneStatus, RecordHandoffInput
from workflows.contract.tools import SPAWN_TOOL

log = logging.getLogger(__name__)

NO_ANSWER = "the subagent ended without an answer"
# Concurrent repairs of one lane can pick the same recovery seq; the loser re-reads and
# writes again. Two rounds settle it in practice; the bound only stops a livelock.
_REPAIR_ROUNDS = 5


# --- payloads ----------------------------------------------------------------------------


# --- the child's handoff ------------------------------------------------------------------


async def _child_handoff(store: Store, inp: FinishLaneInput) -> Handoff:
    text = None
    if inp.final_item_id is not None:
        final = await load_item(store, inp.session_id, inp.final_item_id)
        if final is None:
            # The lane stored its answer before asking for this; a missing one is a bug
            # upstream. Hand back a failed handoff rather than leave the parent waiting.
            log.warning("session %s lane %s: final item %s is not stored", inp.session_id, inp.lane,
                        inp.final_item_id)
            return failed_handoff(inp.failure or f"the subagent's final answer {inp.final_item_id} is not stored")
        text = final[1].text
    if inp.failure is not None:
        kept = _bounded(text or "")
        return failed_handoff(inp.failure, findings=[kept] if kept else None)
    if text is None:
        return failed_handoff(NO_ANSWER)
    return parse_handoff(text)[0]


def _bounded(text: str) -> str:
    """A final answer kept as one finding, cut like parse_handoff cuts unstructured answers."""
    kept = text.strip()
    if len(kept) > MAX_UNSTRUCTURED_CHARS:
        kept = kept[:MAX_UNSTRUCTURED_CHARS] + f" [... {len(kept) - MAX_UNSTRUCTURED_CHARS} characters cut]"
    return kept


def _ref(inp: FinishLaneInput, handoff: Handoff) -> HandoffRef:
    return HandoffRef(lane=inp.lane, workflow_id=inp.workflow_id, item_id=inp.handoff_item_id, status=handoff.status)


# --- its record in the parent -------------------------------------------------------------


async def _handoff_in_lane(store: Store, session_id: str, lane: str) -> Handoff | None:
    """The handoff a child lane stored (its last item of kind handoff), if any."""
    found, after = None, -1
    while True:
        rows = await store.list_items(session_id, lane=lane, after_seq=after, limit=500)
        for row in rows:
            if row.kind == Kind.HANDOFF.value:
                found = row
        if len(rows) < 500:
            break
        after = rows[-1].seq
    if found is None:
        return None
    try:
        return Handoff.model_validate_json(found.content["content"]["text"])
    except ValidationError:
        return None


async def _source_handoff(store: Store, inp: RecordHandoffInput) -> Handoff:
    # Retrying cannot make a missing or malformed handoff appear: fail for the workflow to decide.
    if inp.source_item_id is None:
        raise ApplicationError(f"no handoff given for lane {inp.child_lane} (neither a handoff nor its item)",
                               type=HANDOFF_MISSING, non_retryable=True)
    source = await load_item(store, inp.session_id, inp.source_item_id)
    if source is None:
        raise ApplicationError(f"handoff item {inp.source_item_id} of lane {inp.child_lane} is not stored",
                               type=HANDOFF_MISSING, non_retryable=True)
    try:
        return Handoff.model_validate_json(source[1].text)
    except ValidationError as error:
        raise ApplicationError(f"item {inp.source_item_id} of lane {inp.child_lane} is not a handoff: "
                               f"{error.errors()[:1]}", type=HANDOFF_INVALID, non_retryable=True) from error


# --- recovery -----------------------------------------------------------------------------


# --- what became of the children ----------------------------------------------------------

class LaneInspector:
    """Asks Temporal about child lane workflows (needs the worker's client)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn
    async def describe_lanes(self, workflow_ids: list[str]) -> list[LaneStatus]:
        return list(await asyncio.gather(*(self._describe(wid) for wid in workflow_ids)))

    async def _describe(self, workflow_id: str) -> LaneStatus:
        handle = self.client.get_workflow_handle(workflow_id, result_type=HandoffRef)
        try:
            desc = await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return LaneStatus(workflow_id=workflow_id, status="NOT_FOUND")
            raise  # the service is unreachable or busy: Temporal retries the activity
        status = desc.status.name if desc.status is not None else "UNSPECIFIED"
        handoff = None
        if status == "COMPLETED":
            try:
                handoff = await handle.result()
            except RPCError as error:
                if error.status != RPCStatusCode.NOT_FOUND:  # transient: retry rather than lose the handoff
                    raise
                log.warning("lane workflow %s: its history is gone (retention)", workflow_id)
            except (WorkflowFailureError, ValueError) as error:
                # a result that is no HandoffRef (or a run that failed meanwhile): the parent treats it as lost
                log.warning("lane workflow %s completed without a readable handoff: %r", workflow_id, error)
        return LaneStatus(workflow_id=workflow_id, status=status, handoff=handoff)


class LaneActivities(ActivityGroup):
    """A subagent lane's handoff, its record in the parent, and recovery when it died."""

    @activity.defn
    async def finish_lane(self, inp: FinishLaneInput) -> HandoffRef:
        """Store the child's handoff as the last item of its lane (idempotent)."""
        store = await self.store()
        # stored_item also completes the item's event when an earlier attempt died in between
        done = await stored_item(store, inp.session_id, inp.lane, inp.handoff_item_id)
        if done is not None:
            return _ref(inp, Handoff.model_validate_json(done[1].text))

        handoff = await _child_handoff(store, inp)
        content = ItemContent(text=handoff.model_dump_json())
        item = Item(id=inp.handoff_item_id, seq=inp.handoff_seq, kind=Kind.HANDOFF, role="assistant", task=inp.task_id)
        item = finish_item(item, content, inp.preview_chars, inp.model)
        await store_item(store, inp.session_id, inp.lane, item, content)
        # Another attempt may have stored first (a lost race): its handoff is the truth.
        stored = await load_item(store, inp.session_id, inp.handoff_item_id)
        assert stored is not None
        return _ref(inp, Handoff.model_validate_json(stored[1].text))

    @activity.defn
    async def record_handoff(self, inp: RecordHandoffInput) -> Item:
        """Record a child's handoff as one item of the parent's lane (idempotent)."""
        store = await self.store()
        done = await stored_item(store, inp.session_id, inp.lane, inp.item_id)
        if done is not None:
            return done[0]

        if inp.handoff is not None:
            # a lane repaired as dead may have stored its real handoff just before it died
            handoff = await _handoff_in_lane(store, inp.session_id, inp.child_lane) or inp.handoff
        else:
            handoff = await _source_handoff(store, inp)
        text = handoff_text(inp.child_lane, handoff)
        # The exact handoff is archived, so a compacted record still points at it.
        meta = await store.put_observation(inp.session_id, inp.observation_id, inp.item_id, text)
        if not meta.inserted:  # an earlier attempt archived it: that text is the truth
            text = await read_whole(store, inp.session_id, inp.observation_id)
        completed = handoff.status == "completed"
        content = ItemContent(text=text, tool_call_id=inp.tool_call_id, tool_name=SPAWN_TOOL)
        item = Item(
            id=inp.item_id,
            seq=inp.seq,
            kind=Kind.HANDOFF,
            # answering a spawn_subagent call keeps the call/result pairing the chat API needs
            role="tool" if inp.tool_call_id else "user",
            group=inp.group,
            task=inp.task_id,
            tool_name=SPAWN_TOOL,
            tool_call_ids=[inp.tool_call_id] if inp.tool_call_id else [],
            # a blocked or failed child is evicted last, like a failed command
            tool_class=ToolClass.RUN if completed else ToolClass.ERROR,
            exit_code=0 if completed else 1,
            observation_id=inp.observation_id,
        )
        item = finish_item(item, content, inp.preview_chars, inp.model)
        return await store_item(store, inp.session_id, inp.lane, item, content)

    @activity.defn
    async def close_lane_episodes(self, inp: CloseLaneEpisodesInput) -> list[str]:
        """Abandon the episodes a dead lane left open; returns the ids this repair abandoned
        (the same list when retried, since its events carry ``repair_id``)."""
        store = await self.store()
        events_lane, recovery_lane = ids.events_lane(inp.lane), ids.recovery_lane(inp.lane)
        for _ in range(_REPAIR_ROUNDS):
            log_events = await store.lane_events(inp.session_id, [events_lane],
                                                 [EPISODE_BEGUN, EPISODE_ENDED, EPISODE_ABANDONED])
            recovery = await store.lane_events(inp.session_id, [recovery_lane])  # every kind: for the next seq
            begun: list[str] = []  # in begun order (by seq)
            closed: set[str] = set()
            for event in log_events + recovery:
                episode_id = str(event.payload.get("episode_id"))
                if event.kind == EPISODE_BEGUN and episode_id not in begun:
                    begun.append(episode_id)
                elif event.kind in (EPISODE_ENDED, EPISODE_ABANDONED):
                    closed.add(episode_id)
            still_open = [e for e in begun if e not in closed]
            if not still_open:
                return [str(e.payload.get("episode_id")) for e in recovery
                        if e.kind == EPISODE_ABANDONED and e.payload.get("repair_id") == inp.repair_id]
            first = max((e.seq for e in recovery), default=-1) + 1
            rows = [EventRow(lane=recovery_lane, seq=seq, event_id=ids.event_id(recovery_lane, seq), kind=EPISODE_ABANDONED,
                             payload={"episode_id": episode_id, "reason": inp.reason, "repair_id": inp.repair_id})
                    for seq, episode_id in enumerate(still_open, start=first)]
            await store.append_events(inp.session_id, rows)  # a row whose seq was taken meanwhile is dropped
        raise ApplicationError(f"lane {inp.lane}: open episodes kept changing while being closed",
                               type=LANE_REPAIR_CONFLICT)
