"""Fixtures: the scripted condenser, the activity runtime and a session recorded from a real
trajectory, stored in the test session's PostgreSQL exactly as the activities store it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from activities.condense import CondenseActivities
from activities.items import finish_item, item_row, store_item
from activities.provider import ModelClients
from activities.runtime import store_source
from activities.store import Store
from activities.store_rows import EventRow
from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, load_trajectory
from tests.condense.condenser_server import CondenserServer
from worker.settings import Settings
from workflows.context import Item, ItemContent, Kind, MemoryDoc, ToolCall, classify_tool, memory_text

TRAJECTORY = (Path(DEFAULT_TRAJECTORY_ROOT)
              / "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pydicom__pydicom-1256.traj.json.gz")
MODEL = "gpt-4o-mini"
PREVIEW_CHARS = 2000
SOURCE_TURNS = 10  # recorded turns whose assistant/tool items form the source prefix
TASK_ID = "task-1"


@dataclass
class Seeded:
    session_id: str
    lane: str
    source_ids: list[str]
    anchor_ids: list[str]  # newest first
    memory_id: str
    known_observation_ids: list[str]
    tail_ids: list[str] = field(default_factory=list)  # later items, not condensed


@pytest.fixture(scope="session")
def condenser() -> Iterator[CondenserServer]:
    server = CondenserServer()
    yield server
    server.stop()


def condense_settings(database_url: str, condenser: CondenserServer | None) -> Settings:
    return Settings(
        database_url=database_url,
        openai_base_url=condenser.base_url if condenser else None,
        openai_api_key="sk-test-not-a-secret" if condenser else None,
        model=MODEL,
    )


def condense_activities(settings: Settings) -> CondenseActivities:
    """The condenser activity as the worker builds it, with these settings."""
    return CondenseActivities(settings, store_source(settings), ModelClients())


@pytest.fixture
async def runtime(database_url: str, condenser: CondenserServer) -> AsyncIterator[CondenseActivities]:
    """The condenser activity pointed at the scripted condenser."""
    activities = condense_activities(condense_settings(database_url, condenser))
    condenser.script()
    yield activities
    await activities.stores.close()


@pytest.fixture(scope="session")
def trajectory() -> Trajectory:
    if not TRAJECTORY.exists():
        pytest.fail(f"recorded trajectory {TRAJECTORY} is missing (../shared/data)")
    return load_trajectory(TRAJECTORY)


async def seed_session(store: Store, trajectory: Trajectory, turns: int = SOURCE_TURNS + 3) -> Seeded:
    """Store system prompt, task, ``turns`` recorded turns, a pinned note and a live memory."""
    session_id = f"cond-{uuid.uuid4().hex[:10]}"
    lane = "main"
    await store.ensure_session(session_id, config={"model": MODEL})
    seq = 0
    stored: list[Item] = []

    async def put(item: Item, content: ItemContent) -> Item:
        item = finish_item(item, content, PREVIEW_CHARS, MODEL)
        item = await store_item(store, session_id, lane, item, content)
        stored.append(item)
        return item

    def next_seq() -> int:
        nonlocal seq
        seq += 1
        return seq - 1

    if trajectory.system:
        await put(Item(id=f"itm-{seq:06d}", seq=next_seq(), kind=Kind.SYSTEM, role="system"),
                  ItemContent(text=trajectory.system))
    task = await put(Item(id=f"itm-{seq:06d}", seq=next_seq(), kind=Kind.USER, role="user", task=TASK_ID),
                     ItemContent(text=trajectory.task))
    source: list[str] = []
    tail: list[str] = []
    observations: list[str] = []
    for number, turn in enumerate(trajectory.turns[:turns]):
        target = source if number < SOURCE_TURNS else tail
        group = next_seq()
        calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in turn.tool_calls]
        assistant = await put(
            Item(id=f"itm-{group:06d}", seq=group, kind=Kind.ASSISTANT, role="assistant", group=group,
                 task=TASK_ID, tool_call_ids=[c.id for c in calls]),
            ItemContent(text=turn.assistant_text, tool_calls=calls))
        target.append(assistant.id)
        arguments = {c.id: c.arguments for c in calls}
        for result in turn.results:
            rseq = next_seq()
            obs_id = f"obs-{session_id}-{rseq:06d}"
            item_id = f"itm-{rseq:06d}"
            await store.put_observation(session_id, obs_id, item_id, result.output)
            exit_code = result.exit_code if result.exit_code is not None else 0
            item = await put(
                Item(id=item_id, seq=rseq, kind=Kind.TOOL_RESULT, role=result.render_role, group=group,
                     task=TASK_ID, tool_name=result.tool_name, tool_call_ids=[result.tool_call_id],
                     tool_class=classify_tool(result.tool_name, arguments.get(result.tool_call_id), exit_code),
                     exit_code=exit_code, observation_id=obs_id),
                ItemContent(text=result.output, tool_call_id=result.tool_call_id, tool_name=result.tool_name))
            target.append(item.id)
            observations.append(obs_id)
        for text in turn.user_after:
            user = await put(Item(id=f"itm-{seq:06d}", seq=next_seq(), kind=Kind.USER, role="user", task=TASK_ID),
                             ItemContent(text=text))
            target.append(user.id)
    note = await put(Item(id=f"itm-{seq:06d}", seq=next_seq(), kind=Kind.NOTE, role="user"),
                     ItemContent(text="Note: keep the fix minimal and do not touch the public API."))
    # the live memory of an earlier condensation, stored as store_generated_items stores it
    doc = MemoryDoc(completed_work=["Read the issue: empty values crash the DICOM writer."],
                    references=[f"observation://{observations[-1]}"])  # a tail observation
    memory = Item(id="memory-1", seq=1, kind=Kind.MEMORY, role="user")
    memory_content = ItemContent(text=memory_text(doc))
    memory = finish_item(memory, memory_content, PREVIEW_CHARS, MODEL)
    await store.put_items(session_id, [item_row(memory, memory_content, f"{lane}.generated")])
    await store.append_events(session_id, [EventRow(
        lane=lane, seq=seq + 1000, event_id=f"evt-{lane}-{seq + 1000:06d}", kind="context.compaction.explicit",
        payload={"applied": True, "tokens_before": 9000, "tokens_after": 4000})])
    return Seeded(session_id=session_id, lane=lane, source_ids=source, anchor_ids=[note.id, task.id],
                  memory_id=memory.id, known_observation_ids=observations, tail_ids=tail)


@pytest.fixture(scope="session")
async def seeded(store: Store, trajectory: Trajectory) -> Seeded:
    return await seed_session(store, trajectory)


_TABLES = {
    "sessions": "session_id",
    "items": "item_id",
    "observations": "obs_id",
    "events": "id",
    "checkpoints": "checkpoint_id",
    "request_plans": "lane, version",
}


async def dump_history(database_url: str, session_id: str) -> dict[str, list[str]]:
    """Every stored row of the session, as PostgreSQL's own text of the whole row."""
    conn = await asyncpg.connect(database_url)
    try:
        return {table: [r[0] for r in await conn.fetch(
            f"SELECT t::text FROM {table} t WHERE session_id = $1 ORDER BY {order}", session_id)]
            for table, order in _TABLES.items()}
    finally:
        await conn.close()
