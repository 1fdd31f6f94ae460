"""Storing items and rendering plans: the bridge between engine metadata and content.

An item row in PostgreSQL holds the exact content (``ItemContent``) and the static
metadata the renderer needs (``Item`` as it was created). The workflow only ever
sees the ``Item`` with its measured token costs.
"""

from __future__ import annotations

from activities.store import EventRow, ItemRow, Store
from activities.tokens import count_message_tokens
from workflows.context.content import ItemContent
from workflows.context.items import Item, Projection
from workflows.context.render import item_message

MEASURED_PROJECTIONS = (
    Projection.FULL,
    Projection.COMPACT,
    Projection.REFERENCE,
    Projection.MINIMAL_REFERENCE,
)
DIGEST_CHARS = 100


def digest_of(content: ItemContent) -> str:
    """A one-line preview the engine may quote in generated checkpoint text."""
    if content.tool_calls:
        calls = "; ".join(f"{c.name}({c.arguments})" for c in content.tool_calls)
        line = f"{content.text.strip()} [{calls}]" if content.text.strip() else calls
    else:
        line = content.text.strip()
    line = " ".join(line.split())
    return line if len(line) <= DIGEST_CHARS else line[: DIGEST_CHARS - 1] + "…"


def measure(item: Item, content: ItemContent, preview_chars: int, model: str | None) -> dict[Projection, int]:
    """Token cost of the item in every projection the planner may choose, measured on
    the very message the renderer sends for it."""
    costs: dict[Projection, int] = {}
    for projection in MEASURED_PROJECTIONS:
        message = item_message(item, content, projection, preview_chars)
        costs[projection] = 0 if message is None else count_message_tokens(message, model)
    costs[Projection.OMITTED] = 0
    return costs


def finish_item(item: Item, content: ItemContent, preview_chars: int, model: str | None) -> Item:
    """The item with its size, digest and measured costs filled in."""
    return item.model_copy(
        update={
            "size_chars": len(content.text),
            "digest": digest_of(content),
            "tokens": measure(item, content, preview_chars, model),
        }
    )


def item_row(item: Item, content: ItemContent, lane: str) -> ItemRow:
    return ItemRow(
        item_id=item.id,
        lane=lane,
        seq=item.seq,
        kind=item.kind,
        role=item.role,
        content={"content": content.model_dump(mode="json"), "meta": item.model_dump(mode="json")},
    )


def item_event(item: Item, lane: str) -> EventRow:
    """The event-log entry recording that an item joined the lane (seq = item seq)."""
    return EventRow(
        lane=lane,
        seq=item.seq,
        event_id=f"evt-{item.id}",
        kind="item.added",
        payload={"item_id": item.id, "kind": item.kind, "tokens": item.tokens.get(Projection.FULL, 0)},
    )


async def store_item(store: Store, session_id: str, lane: str, item: Item, content: ItemContent) -> Item:
    """Write content, metadata and the event; a retried write is a no-op.

    Both writes are always attempted (each is idempotent) so that an attempt killed
    between them is completed by the retry. When the row already existed, the stored
    metadata wins, so every attempt reports the same item.
    """
    await store.put_items(session_id, [item_row(item, content, lane)])
    await store.append_events(session_id, [item_event(item, lane)])
    stored = await load_item(store, session_id, item.id)
    assert stored is not None
    return stored[0]


async def stored_item(store: Store, session_id: str, lane: str, item_id: str) -> tuple[Item, ItemContent] | None:
    """The item an earlier attempt already stored, its event log entry completed (that
    attempt may have died between the two writes); None when it was never stored."""
    done = await load_item(store, session_id, item_id)
    if done is not None:
        await store.append_events(session_id, [item_event(done[0], lane)])
    return done


async def load_item(store: Store, session_id: str, item_id: str) -> tuple[Item, ItemContent] | None:
    rows = await store.get_items(session_id, [item_id])
    row = rows.get(item_id)
    if row is None:
        return None
    return Item.model_validate(row.content["meta"]), ItemContent.model_validate(row.content["content"])


async def load_items(store: Store, session_id: str, item_ids: list[str]) -> tuple[dict[str, Item], dict[str, ItemContent]]:
    rows = await store.get_items(session_id, item_ids)
    missing = [i for i in item_ids if i not in rows]
    if missing:
        raise LookupError(f"session {session_id}: items {missing[:5]} are not stored")
    items = {i: Item.model_validate(r.content["meta"]) for i, r in rows.items()}
    contents = {i: ItemContent.model_validate(r.content["content"]) for i, r in rows.items()}
    return items, contents
