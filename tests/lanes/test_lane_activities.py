"""The lane activities against the test session's real PostgreSQL (and, for describe_lanes,
the real Temporal dev server): idempotent writes, the parent's record, episode repair."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.items import finish_item, load_item, store_item
from activities.lanes import NO_ANSWER, LaneActivities, LaneInspector
from activities.runtime import store_source
from activities.store import Store
from activities.store_rows import EventRow
from worker.settings import Settings
from workflows.context import Item, ItemContent, Kind, Projection, ToolClass, item_message
from workflows.contract.handoff import MAX_UNSTRUCTURED_CHARS, Handoff, handoff_text
from workflows.contract.lanes import CloseLaneEpisodesInput, FinishLaneInput, HandoffRef, RecordHandoffInput

pytestmark = pytest.mark.timeout(120)

MODEL = "gpt-4o-mini"
PREVIEW = 2000
CHILD, PARENT = "sub-0001", "main"
VALID = {"status": "completed", "findings": ["root cause: off-by-one in pager"], "changed_files": ["pager.py"]}


@pytest.fixture
async def lanes(database_url: str) -> AsyncIterator[LaneActivities]:
    """The lane activities as the worker builds them."""
    settings = Settings(database_url=database_url)
    activities = LaneActivities(settings, store_source(settings))
    yield activities
    await activities.stores.close()


@pytest.fixture
async def session(store: Store) -> str:
    sid = f"lanes-{uuid.uuid4().hex[:10]}"
    await store.ensure_session(sid)
    return sid


async def final_answer(store: Store, session: str, text: str, seq: int = 5) -> str:
    """The child's last assistant item, stored as the model activity stores it."""
    item = Item(id=f"{CHILD}-itm-{seq:06d}", seq=seq, kind=Kind.ASSISTANT, role="assistant", group=seq, task="t1")
    content = ItemContent(text=text)
    await store_item(store, session, CHILD, finish_item(item, content, PREVIEW, MODEL), content)
    return item.id


def finish_input(session: str, final_item_id: str | None, failure: str | None = None) -> FinishLaneInput:
    return FinishLaneInput(session_id=session, lane=CHILD, workflow_id=f"{session}-{CHILD}",
                           final_item_id=final_item_id, failure=failure, handoff_item_id=f"{CHILD}-itm-000009",
                           handoff_seq=9, task_id="t1", model=MODEL, preview_chars=PREVIEW)


async def stored_handoff(store: Store, session: str, item_id: str) -> tuple[Item, Handoff]:
    stored = await load_item(store, session, item_id)
    assert stored is not None
    return stored[0], Handoff.model_validate_json(stored[1].text)


async def lane_rows(store: Store, session: str, lane: str) -> list:
    return await store.list_items(session, lane=lane)


# --- finish_lane ---------------------------------------------------------------------------

async def test_finish_lane_stores_the_parsed_handoff_once(store: Store, session: str, lanes: LaneActivities) -> None:
    final = await final_answer(store, session, f"Done.\n```json\n{json.dumps(VALID)}\n```")
    inp = finish_input(session, final)
    ref = await lanes.finish_lane(inp)
    assert ref == HandoffRef(lane=CHILD, workflow_id=inp.workflow_id, item_id=inp.handoff_item_id, status="completed")
    item, handoff = await stored_handoff(store, session, inp.handoff_item_id)
    assert handoff == Handoff(**VALID)
    assert (item.kind, item.role, item.task, item.seq) == ("handoff", "assistant", "t1", 9)
    assert item.tokens[Projection.FULL] > 0 and item.size_chars == len(handoff.model_dump_json())
    # a retry (even one told the lane failed meanwhile) reports what the first attempt stored
    assert await lanes.finish_lane(inp) == ref
    assert await lanes.finish_lane(inp.model_copy(update={"failure": "late failure"})) == ref
    assert [r.item_id for r in await lane_rows(store, session, CHILD)] == [final, inp.handoff_item_id]
    kinds = [(e.lane, e.seq, e.kind) for e in await store.lane_events(session, [CHILD])]
    assert kinds == [(CHILD, 5, "item.added"), (CHILD, 9, "item.added")]


async def test_blocked_status_reaches_the_ref(store: Store, session: str, lanes: LaneActivities) -> None:
    final = await final_answer(store, session, json.dumps({"status": "blocked", "unresolved": ["need a token"]}))
    assert (await lanes.finish_lane(finish_input(session, final))).status == "blocked"


async def test_an_answer_that_is_no_handoff_keeps_its_text(store: Store, session: str, lanes: LaneActivities) -> None:
    text = "I think the pager drops the last line; not sure how to fix it."
    inp = finish_input(session, await final_answer(store, session, text))
    assert (await lanes.finish_lane(inp)).status == "completed"
    _, handoff = await stored_handoff(store, session, inp.handoff_item_id)
    assert handoff.findings == [text]
    assert "not a structured handoff" in handoff.unresolved[0]


async def test_a_failure_keeps_the_bounded_final_text(store: Store, session: str, lanes: LaneActivities) -> None:
    text = "partial: " + "p" * (MAX_UNSTRUCTURED_CHARS + 50)
    inp = finish_input(session, await final_answer(store, session, text), failure="max turns reached")
    assert (await lanes.finish_lane(inp)).status == "failed"
    _, handoff = await stored_handoff(store, session, inp.handoff_item_id)
    assert handoff.unresolved == ["max turns reached"]
    (finding,) = handoff.findings
    assert finding == text[:MAX_UNSTRUCTURED_CHARS] + " [... 59 characters cut]"


@pytest.mark.parametrize(("failure", "unresolved"), [(None, NO_ANSWER), ("model unavailable", "model unavailable")])
async def test_no_final_answer_is_a_failed_handoff(store: Store, session: str, failure, unresolved,
                                                   lanes: LaneActivities) -> None:
    inp = finish_input(session, None, failure=failure)
    assert (await lanes.finish_lane(inp)).status == "failed"
    _, handoff = await stored_handoff(store, session, inp.handoff_item_id)
    assert handoff == Handoff(status="failed", unresolved=[unresolved])


# --- record_handoff -------------------------------------------------------------------------

def record_input(session: str, **overrides: Any) -> RecordHandoffInput:
    fields: dict[str, Any] = {
        "session_id": session, "lane": PARENT, "child_lane": CHILD, "item_id": "itm-000042", "seq": 42,
        "observation_id": f"obs-{session}-000042", "task_id": "t7", "tool_call_id": "call_spawn_1", "group": 40,
        "model": MODEL, "preview_chars": PREVIEW,
    }
    return RecordHandoffInput(**(fields | overrides))


async def test_record_from_the_child_item_answers_the_spawn_call(store: Store, session: str, lanes: LaneActivities) -> None:
    finished = finish_input(session, await final_answer(store, session, json.dumps(VALID)))
    ref = await lanes.finish_lane(finished)
    inp = record_input(session, source_item_id=ref.item_id)
    item = await lanes.record_handoff(inp)
    expected_text = handoff_text(CHILD, Handoff(**VALID))
    assert (item.id, item.seq, item.kind, item.role) == ("itm-000042", 42, "handoff", "tool")
    assert item.tool_call_ids == ["call_spawn_1"] and item.tool_name == "spawn_subagent"
    assert (item.tool_class, item.exit_code, item.group, item.task) == (ToolClass.RUN, 0, 40, "t7")
    assert item.observation_id == inp.observation_id and item.tokens[Projection.REFERENCE] > 0
    stored = await load_item(store, session, item.id)
    assert stored is not None and stored[1].text == expected_text
    assert stored[1].tool_call_id == "call_spawn_1"
    # it renders as the tool message answering the call, and its exact text is recallable
    message = item_message(item, stored[1], Projection.FULL, PREVIEW)
    assert message == {"role": "tool", "tool_call_id": "call_spawn_1", "content": expected_text}
    recalled = await store.read_observation(session, inp.observation_id, 0, 65_536)
    assert recalled.text == expected_text and recalled.eof
    # a retry returns the same item and writes nothing new
    assert await lanes.record_handoff(inp) == item
    assert [r.item_id for r in await lane_rows(store, session, PARENT)] == ["itm-000042"]
    assert await store.count_observations(session) == 1


async def test_record_of_a_dead_lane_is_a_user_message_and_an_error(store: Store, session: str, lanes: LaneActivities) -> None:
    handoff = Handoff(status="failed", unresolved=["the lane workflow was terminated"])
    item = await lanes.record_handoff(record_input(session, tool_call_id=None, group=None, task_id=None, handoff=handoff))
    assert (item.role, item.tool_call_ids, item.tool_class, item.exit_code) == ("user", [], ToolClass.ERROR, 1)
    stored = await load_item(store, session, item.id)
    assert stored is not None and stored[1].tool_call_id is None
    assert stored[1].text == handoff_text(CHILD, handoff)


async def test_a_dead_lane_that_had_stored_its_handoff_keeps_it(store: Store, session: str, lanes: LaneActivities) -> None:
    # the child handed off, then died before the parent heard: its real handoff wins over the repair's
    await lanes.finish_lane(finish_input(session, await final_answer(store, session, json.dumps(VALID))))
    repair = Handoff(status="failed", unresolved=["terminated from outside"])
    item = await lanes.record_handoff(record_input(session, handoff=repair))
    stored = await load_item(store, session, item.id)
    assert stored is not None and stored[1].text == handoff_text(CHILD, Handoff(**VALID))
    assert (item.exit_code, item.tool_class) == (0, ToolClass.RUN)


async def test_blocked_child_is_recorded_as_an_error(store: Store, session: str, lanes: LaneActivities) -> None:
    item = await lanes.record_handoff(record_input(session, handoff=Handoff(status="blocked", unresolved=["need input"])))
    assert (item.tool_class, item.exit_code) == (ToolClass.ERROR, 1)


async def test_an_archived_text_from_an_earlier_attempt_wins(store: Store, session: str, lanes: LaneActivities) -> None:
    # an attempt died after archiving but before storing the item: the archive is the truth
    inp = record_input(session, handoff=Handoff(status="completed", findings=["second attempt"]))
    earlier = handoff_text(CHILD, Handoff(status="completed", findings=["first attempt"]))
    await store.put_observation(session, inp.observation_id, inp.item_id, earlier)
    item = await lanes.record_handoff(inp)
    stored = await load_item(store, session, item.id)
    assert stored is not None and stored[1].text == earlier and item.size_chars == len(earlier)


@pytest.mark.parametrize("source", ["sub-0001-itm-999999", None])
async def test_a_missing_handoff_is_not_retried(store: Store, session: str, source: str | None, lanes: LaneActivities) -> None:
    with pytest.raises(ApplicationError) as raised:
        await lanes.record_handoff(record_input(session, source_item_id=source))
    assert raised.value.type == "HandoffMissing" and raised.value.non_retryable
    assert await lane_rows(store, session, PARENT) == [] and await store.count_observations(session) == 0


# --- close_lane_episodes ---------------------------------------------------------------------

def episode_event(lane: str, seq: int, event_kind: str, episode_id: str, **payload: Any) -> EventRow:
    return EventRow(lane=lane, seq=seq, event_id=f"evt-{lane}-{seq:06d}", kind=event_kind,
                    payload={"episode_id": episode_id, **payload})


async def seed_episodes(store: Store, session: str) -> None:
    """e1..e5 begun; e2 ended; e4 abandoned in the log; e5 abandoned by an earlier repair."""
    log, recovery = f"{CHILD}:events", f"{CHILD}:recovery"
    rows = [episode_event(log, seq, "episode.begun", f"e{seq}", kind="exploration", goal=f"goal {seq}")
            for seq in range(1, 6)]
    rows += [episode_event(log, 6, "episode.ended", "e2"),
             episode_event(log, 7, "episode.abandoned", "e4", reason="gave up"),
             EventRow(lane=log, seq=8, event_id=f"evt-{log}-000008", kind="context.compaction.fallback"),
             episode_event(recovery, 0, "episode.abandoned", "e5", reason="crash", repair_id="r0"),
             EventRow(lane=recovery, seq=1, event_id=f"evt-{recovery}-000001", kind="context.recovery.completed"),
             # another lane's open episode is not this lane's business
             episode_event("sub-0002:events", 0, "episode.begun", "x1")]
    await store.append_events(session, list(reversed(rows)))  # insertion order must not matter


def close_input(session: str, repair_id: str) -> CloseLaneEpisodesInput:
    return CloseLaneEpisodesInput(session_id=session, lane=CHILD, reason="lane terminated", repair_id=repair_id)


async def test_open_episodes_are_abandoned_once(store: Store, session: str, lanes: LaneActivities) -> None:
    await seed_episodes(store, session)
    assert await lanes.close_lane_episodes(close_input(session, "r1")) == ["e1", "e3"]
    recovery = await store.lane_events(session, [f"{CHILD}:recovery"])
    assert [(e.seq, e.event_id, e.kind, e.payload) for e in recovery[2:]] == [
        (2, f"evt-{CHILD}:recovery-000002", "episode.abandoned",
         {"episode_id": "e1", "reason": "lane terminated", "repair_id": "r1"}),
        (3, f"evt-{CHILD}:recovery-000003", "episode.abandoned",
         {"episode_id": "e3", "reason": "lane terminated", "repair_id": "r1"}),
    ]
    # the retried call reports the same episodes and writes nothing; a later repair finds none
    assert await lanes.close_lane_episodes(close_input(session, "r1")) == ["e1", "e3"]
    assert await lanes.close_lane_episodes(close_input(session, "r2")) == []
    assert len(await store.lane_events(session, [f"{CHILD}:recovery"])) == 4


async def test_a_retry_after_a_partial_repair_reports_every_episode(store: Store, session: str, lanes: LaneActivities) -> None:
    await seed_episodes(store, session)
    # the first attempt abandoned e1 only (say, one write of two) before it died
    await store.append_events(session, [episode_event(f"{CHILD}:recovery", 2, "episode.abandoned", "e1",
                                                      reason="lane terminated", repair_id="r1")])
    assert await lanes.close_lane_episodes(close_input(session, "r1")) == ["e1", "e3"]


async def test_concurrent_repairs_abandon_each_episode_once(store: Store, session: str, lanes: LaneActivities) -> None:
    await seed_episodes(store, session)
    first, second = await asyncio.gather(lanes.close_lane_episodes(close_input(session, "ra")),
                                         lanes.close_lane_episodes(close_input(session, "rb")))
    assert sorted(first + second) == ["e1", "e3"]
    abandoned = await store.lane_events(session, [f"{CHILD}:recovery"], ["episode.abandoned"])
    assert sorted(e.payload["episode_id"] for e in abandoned) == ["e1", "e3", "e5"]


async def test_a_lane_without_episodes_needs_no_repair(store: Store, session: str, lanes: LaneActivities) -> None:
    assert await lanes.close_lane_episodes(close_input(session, "r1")) == []
    assert await store.lane_events(session, [f"{CHILD}:recovery"]) == []


async def test_lane_events_filters_and_orders(store: Store, session: str) -> None:
    await seed_episodes(store, session)
    both = await store.lane_events(session, [f"{CHILD}:recovery", f"{CHILD}:events"])
    assert [(e.lane, e.seq) for e in both] == sorted((e.lane, e.seq) for e in both) and len(both) == 10
    ended = await store.lane_events(session, [f"{CHILD}:events"], ["episode.ended", "episode.abandoned"])
    assert [(e.kind, e.payload["episode_id"]) for e in ended] == [("episode.ended", "e2"), ("episode.abandoned", "e4")]
    assert await store.lane_events(session, ["nothing"]) == []


# --- describe_lanes (real Temporal) -----------------------------------------------------------

@workflow.defn(sandboxed=False)  # defined in a test module: keep pytest out of the sandbox
class LaneProbe:
    @workflow.run
    async def run(self, mode: str) -> Any:
        if mode == "wait":
            await workflow.wait_condition(lambda: False)
        if mode == "fail":
            raise ApplicationError("the lane broke", non_retryable=True)
        if mode == "junk":
            return {"not": "a handoff ref"}
        return HandoffRef(lane=CHILD, workflow_id=workflow.info().workflow_id, item_id="sub-0001-itm-000009",
                          status="blocked")


async def test_describe_lanes(temporal_client: Client) -> None:
    queue = f"lanes-probe-{uuid.uuid4().hex[:8]}"
    ids = {mode: f"lane-probe-{mode}-{uuid.uuid4().hex[:8]}" for mode in
           ("done", "junk", "fail", "terminated", "running")}
    async with Worker(temporal_client, task_queue=queue, workflows=[LaneProbe]):
        handles = {mode: await temporal_client.start_workflow(
            LaneProbe.run, "wait" if mode in ("terminated", "running") else mode, id=wid, task_queue=queue)
            for mode, wid in ids.items()}
        await handles["done"].result()
        await handles["junk"].result()
        with pytest.raises(WorkflowFailureError):
            await handles["fail"].result()
        await handles["terminated"].terminate("test")
        try:
            missing = f"lane-probe-missing-{uuid.uuid4().hex[:8]}"
            statuses = await LaneInspector(temporal_client).describe_lanes([*ids.values(), missing])
        finally:
            await handles["running"].terminate("test over")
    got = {s.workflow_id: (s.status, s.handoff) for s in statuses}
    assert [s.workflow_id for s in statuses] == [*ids.values(), missing]  # the caller's order
    assert got[ids["done"]] == ("COMPLETED", HandoffRef(lane=CHILD, workflow_id=ids["done"],
                                                        item_id="sub-0001-itm-000009", status="blocked"))
    assert got[ids["junk"]] == ("COMPLETED", None)  # completed, but with no readable handoff
    assert got[ids["fail"]] == ("FAILED", None)
    assert got[ids["terminated"]] == ("TERMINATED", None)
    assert got[ids["running"]] == ("RUNNING", None)
    assert got[missing] == ("NOT_FOUND", None)
