"""Activities that bring content into a session: its row, user messages, generated text.

The workflow chooses every id; each write is idempotent, so a retried activity
stores nothing twice and reports the same metadata.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.items import finish_item, item_row, store_item
from activities.runtime import get_runtime
from activities.store import CheckpointNotFound, EventRow, ObservationNotFound
from activities.tools import read_whole
from workflows.checkpoint import LoadCheckpointInput, SaveCheckpointInput, SessionCheckpoint
from workflows.context.classify import classify_tool
from activities.tokens import count_text_message_tokens, count_tool_definitions
from activities.tool_specs import tool_specs
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind
from workflows.messages import (
    EventsInput,
    GeneratedItemsInput,
    IngestItemsInput,
    MeasureTextsInput,
    SessionStartInput,
    SessionStartResult,
    StoreUserMessageInput,
)


@activity.defn(name="start_session")
async def start_session(inp: SessionStartInput) -> SessionStartResult:
    """Register the session and measure the fixed cost of its tool definitions."""
    runtime = await get_runtime()
    await runtime.store.ensure_session(inp.session_id, inp.tenant, inp.config)
    return SessionStartResult(tool_definition_tokens=count_tool_definitions(tool_specs(inp.tools), inp.model))


@activity.defn(name="store_user_message")
async def store_user_message(inp: StoreUserMessageInput) -> Item:
    runtime = await get_runtime()
    content = ItemContent(text=inp.text)
    item = Item(id=inp.item_id, seq=inp.seq, kind=inp.kind, role=inp.role, task=inp.task_id)
    if inp.observation_id is not None:
        # Oversized input stays exact in storage and reaches the model as a bounded source reference.
        await runtime.store.put_observation(inp.session_id, inp.observation_id, inp.item_id, inp.text)
        item = item.model_copy(update={"observation_id": inp.observation_id})
    item = finish_item(item, content, inp.preview_chars, inp.model)
    return await store_item(runtime.store, inp.session_id, inp.lane, item, content)


@activity.defn(name="measure_texts")
async def measure_texts(inp: MeasureTextsInput) -> dict[str, int]:
    """Token cost of texts the engine generated (checkpoint, summary), as full messages."""
    return {key: count_text_message_tokens(text, inp.model) for key, text in inp.texts.items()}


@activity.defn(name="store_generated_items")
async def store_generated_items(inp: GeneratedItemsInput) -> int:
    """Store the content of items a compaction created so requests can render them.

    Generated items live in their own lane ("<lane>.generated"): their seq in the
    engine repeats the lane position they were made at, so they cannot share it.
    """
    runtime = await get_runtime()
    rows = [
        item_row(g.item.model_copy(update={"seq": g.number}), ItemContent(text=g.text), f"{inp.lane}.generated")
        for g in inp.items
    ]
    return await runtime.store.put_items(inp.session_id, rows)


@activity.defn(name="record_events")
async def record_events(inp: EventsInput) -> int:
    """Append engine events (compactions, recoveries...) to the session's event log."""
    runtime = await get_runtime()
    rows = [EventRow(**e.model_dump()) for e in inp.events]
    inserted = await runtime.store.append_events(inp.session_id, rows)
    metrics.observe_events(rows)
    return inserted


ROLE_OF_KIND = {"system": "system", "user": "user", "assistant": "assistant", "tool_result": "tool"}


@activity.defn(name="ingest_items")
async def ingest_items(inp: IngestItemsInput) -> list[Item]:
    """Store the items an external agent appended and measure them.

    Content arrives inline or by reference to an observation the API already wrote;
    tool output is archived as an observation either way, so it is recallable.
    """
    runtime = await get_runtime()
    store = runtime.store
    calls_by_id: dict[str, tuple[str, str]] = {}  # call id -> (tool name, arguments)
    stored: list[Item] = []
    for offset, ext in enumerate(inp.items):
        seq = inp.first_seq + offset
        item_id = f"itm-{seq:06d}"
        text = ext.text
        if ext.content_ref is not None:
            try:
                text = await read_whole(store, inp.session_id, ext.content_ref)
            except ObservationNotFound:
                raise ApplicationError(
                    f"content_ref {ext.content_ref} is not stored for this session", type="ItemInputError",
                    non_retryable=True,
                ) from None
        content = ItemContent(
            text=text or "",
            tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in ext.tool_calls],
            tool_call_id=ext.tool_call_id,
            tool_name=ext.tool_name,
        )
        calls_by_id.update({c.id: (c.name, c.arguments) for c in ext.tool_calls})
        item = Item(id=item_id, seq=seq, kind=ext.kind, role=ext.role or ROLE_OF_KIND.get(ext.kind, "user"),
                    task=inp.task_id)
        if ext.kind == Kind.ASSISTANT.value:
            item = item.model_copy(update={"group": seq, "tool_call_ids": [c.id for c in ext.tool_calls]})
        elif ext.kind == Kind.TOOL_RESULT.value:
            name, arguments = calls_by_id.get(ext.tool_call_id or "") or (ext.tool_name, None)
            obs_id = ext.content_ref or f"obs-{inp.session_id}-{seq:06d}"
            if ext.content_ref is None:
                await store.put_observation(inp.session_id, obs_id, item_id, content.text)
            item = item.model_copy(update={
                "tool_name": ext.tool_name or name,
                "tool_call_ids": [ext.tool_call_id] if ext.tool_call_id else [],
                "exit_code": ext.exit_code,
                "tool_class": classify_tool(ext.tool_name or name, arguments, ext.exit_code),
                "observation_id": obs_id,
            })
        item = finish_item(item, content, inp.preview_chars, inp.model)
        stored.append(await store_item(store, inp.session_id, inp.lane, item, content))
    return stored


@activity.defn(name="save_checkpoint")
async def save_checkpoint(inp: SaveCheckpointInput) -> None:
    """Write the session state the next run continues from (idempotent by id)."""
    runtime = await get_runtime()
    await runtime.store.put_checkpoint(
        inp.session_id, inp.checkpoint_id, inp.checkpoint.lane.lane, inp.checkpoint.model_dump(mode="json")
    )


@activity.defn(name="load_checkpoint")
async def load_checkpoint(inp: LoadCheckpointInput) -> SessionCheckpoint:
    runtime = await get_runtime()
    try:
        state = await runtime.store.get_checkpoint(inp.session_id, inp.checkpoint_id)
    except CheckpointNotFound as error:
        raise ApplicationError(str(error), type="CheckpointNotFound", non_retryable=True) from None
    return SessionCheckpoint.model_validate(state)
