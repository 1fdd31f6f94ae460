"""Items: storing their content, measuring them, and the activities that bring them in.

An item row in PostgreSQL holds the exact content (``ItemContent``) and the static
metadata the renderer needs (``Item`` as it was created). The workflow only ever sees
the ``Item`` with its measured token costs. The workflow chooses every id; each write is
idempotent, so a retried activity stores nothing twice and reports the same metadata.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics, token_memo
from activities.item_names import clipped, key_lines_of, names_of
from activities.runtime import ActivityGroup
from activities.store import MAX_RECALL_CHARS, Store
from activities.store_errors import ItemConflict, ObservationNotFound
from activities.store_rows import EventRow, ItemRow
from activities.tokens import count_text_message_tokens
from workflows.context import (
    CALL_CHARS,  # one line of Item.calls: as long as the checkpoint shows it
    Item,
    ItemContent,
    Kind,
    Projection,
    RecallStyle,
    classify_tool,
    clip,
    ids,
    is_tool_output,
    item_from_json,
    item_message,
    item_to_json,
    item_with,
)
from workflows.contract import rejections
from workflows.contract.failures import ITEMS_CONFLICT
from workflows.contract.items import GeneratedItem, GeneratedItemsInput, IngestItemsInput, MeasureTextsInput, StoreTextInput
from workflows.contract.session import ExternalItem

MEASURED_PROJECTIONS = (
    Projection.FULL,
    Projection.COMPACT,
    Projection.REFERENCE,
    Projection.MINIMAL_REFERENCE,
)
DIGEST_CHARS = 100
MAX_CALLS = 16  # lines per item (workflow state holds metadata only); later calls get none
FENCED = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)  # a fenced block: (language, body)
ROLE_OF_KIND = {"system": "system", "user": "user", "assistant": "assistant", "tool_result": "tool"}


# --- payloads ------------------------------------------------------------------------------


# --- content helpers -----------------------------------------------------------------------


def digest_of(content: ItemContent) -> str:
    """A one-line preview the engine may quote in generated checkpoint text."""
    if content.tool_calls:
        calls = "; ".join(f"{c.name}({c.arguments})" for c in content.tool_calls)
        line = f"{content.text.strip()} [{calls}]" if content.text.strip() else calls
    else:
        line = content.text.strip()
    if content.images:  # what the summary says of a message its images went with
        count = len(content.images)
        line = f"{line} [{count} image{'s' if count > 1 else ''}]".strip()
    return clip(line, DIGEST_CHARS)


def call_lines(content: ItemContent) -> list[str]:
    """One short line per tool call (``Item.calls``): its name and its arguments' values, as
    an agent reads a call (``Read src/app.py``, ``bash grep -n parse src/cli.py``), not JSON.
    An agent that writes its action in its prose (mini-swe-agent's one fenced command per
    turn) gets the last fenced block as its one call."""
    if content.tool_calls:
        return [_call_line(call.name, call.arguments) for call in content.tool_calls[:MAX_CALLS]]
    blocks = FENCED.findall(content.text)
    return [_clipped(f"{blocks[-1][0]} {blocks[-1][1]}")] if blocks else []


def _call_line(name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        parsed = arguments
    if isinstance(parsed, dict):
        values = " ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in parsed.values())
    else:
        values = parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False)
    return _clipped(f"{name} {values}")


def _clipped(line: str) -> str:
    return clipped(line, CALL_CHARS)


def measure(item: Item, content: ItemContent, preview_chars: int, model: str | None,
            recall: RecallStyle = "tool") -> dict[Projection, int]:
    """Token cost of the item in every projection the planner may choose, measured on
    the very message the renderer sends for it (remembered: the requests that carry it count it
    from the memo)."""
    costs: dict[Projection, int] = {}
    for projection in MEASURED_PROJECTIONS:
        message = item_message(item, content, projection, preview_chars, recall=recall)
        costs[projection] = 0 if message is None else token_memo.message_tokens(message, model)
    costs[Projection.OMITTED] = 0
    return costs


def finish_item(item: Item, content: ItemContent, preview_chars: int, model: str | None,
                recall: RecallStyle = "tool", preview_lines: bool = False) -> Item:
    """The item with its size, digest and measured costs filled in; ``preview_lines``: a tool
    output's preview shows lines of its omitted part (measured so, and recorded on the item)."""
    if preview_lines and is_tool_output(item):
        item = item_with(item, preview_lines=True)
    return item_with(item, size_chars=len(content.text), digest=digest_of(content), names=names_of(content),
                     calls=call_lines(content), lines=key_lines_of(content),
                     tokens=measure(item, content, preview_chars, model, recall))


def bounded_item(item: Item, content: ItemContent, preview_chars: int, model: str | None,
                 bound_above_tokens: int | None, observation_id: str | None, recall: RecallStyle = "tool",
                 preview_lines: bool = False) -> Item:
    """The measured item; when its full cost is above ``bound_above_tokens`` (and it has no
    address yet), with ``observation_id`` as its address, so that the engine lets it enter
    bounded (a source reference, or head and tail) with the exact text recallable there."""
    measured = finish_item(item, content, preview_chars, model, recall, preview_lines)
    if (bound_above_tokens is None or observation_id is None or item.observation_id is not None
            or measured.tokens[Projection.FULL] <= bound_above_tokens):
        return measured
    return finish_item(item_with(item, observation_id=observation_id), content, preview_chars, model,
                       recall, preview_lines)


def archived_text(content: ItemContent) -> str:
    """What an oversized item's observation holds: its text, then its tool calls (their
    arguments may be what made it oversized). Offsets into the text are offsets into the
    observation, so a head-and-tail rendering's recall hint stays exact."""
    if not content.tool_calls:
        return content.text
    calls = json.dumps([c.model_dump() for c in content.tool_calls], ensure_ascii=False)
    return f"{content.text}\n\n[tool calls]\n{calls}"


async def archive_if_oversized(store: Store, session_id: str, item: Item, content: ItemContent, preview_chars: int,
                               model: str | None, bound_above_tokens: int | None,
                               observation_id: str | None, content_addressed: bool = False,
                               recall: RecallStyle = "tool") -> Item:
    """``bounded_item``, with its ``archived_text`` stored at the address it was given.
    Idempotent. ``content_addressed``: the address ends with a digest of the text, for
    content a retry may produce differently (a model's answer), so that an item never
    points at another attempt's text."""
    text = archived_text(content)
    if content_addressed and observation_id is not None:
        observation_id = f"{observation_id}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"
    measured = bounded_item(item, content, preview_chars, model, bound_above_tokens, observation_id, recall)
    if measured.observation_id is not None and item.observation_id is None:
        await store.put_observation(session_id, measured.observation_id, item.id, text)
    return measured


async def store_text_item(store: Store, inp: StoreTextInput) -> Item:
    """A user or system text stored as an item of the lane, measured (idempotent by id)."""
    content = ItemContent(text=inp.text)
    item = Item(id=inp.item_id, seq=inp.seq, kind=inp.kind, role=inp.role, task=inp.task_id)
    if inp.observation_id is not None and inp.bound_above_tokens is None:
        # Oversized input stays exact in storage and reaches the model as a bounded source reference.
        await store.put_observation(inp.session_id, inp.observation_id, inp.item_id, inp.text)
        item = item_with(item, observation_id=inp.observation_id)
    item = await archive_if_oversized(store, inp.session_id, item, content, inp.preview_chars, inp.model,
                                      inp.bound_above_tokens, inp.observation_id)
    return await store_item(store, inp.session_id, inp.lane, item, content)


def item_row(item: Item, content: ItemContent, lane: str, client: ExternalItem | None = None,
             usage: dict | None = None) -> ItemRow:
    """The row of an item; ``usage``: what the provider reported for the call that made it (a
    model's answer), kept so that a retry finding the answer stored reports the call once."""
    stored = {"content": content.stored_fields(), "meta": item_to_json(item)}
    if usage is not None:
        stored["usage"] = usage
    return ItemRow(
        client_id=client.client_id if client else None,
        client_digest=client.client_digest if client else None,
        item_id=item.id,
        lane=lane,
        seq=item.seq,
        kind=item.kind,
        role=item.role,
        content=stored,
    )


def item_event(item: Item, lane: str) -> EventRow:
    """The event-log entry recording that an item joined the lane (seq = item seq)."""
    return EventRow(
        lane=lane,
        seq=item.seq,
        event_id=ids.item_event_id(item.id),
        kind="item.added",
        payload={"item_id": item.id, "kind": item.kind, "tokens": item.tokens.get(Projection.FULL, 0)},
    )


async def store_item(store: Store, session_id: str, lane: str, item: Item, content: ItemContent) -> Item:
    """Write content, metadata and the event; a retried write is a no-op (see store_items)."""
    return (await store_items(store, session_id, lane, [(item, content)]))[0]


async def store_items(store: Store, session_id: str, lane: str, pairs: list[tuple[Item, ItemContent]],
                      clients: list[ExternalItem] | None = None, events: list[EventRow] | None = None,
                      observation: tuple[str, str, str] | None = None) -> list[Item]:
    """Write the items' content and metadata and their events (after ``events``, other
    events the caller has to write) in one statement; with ``observation`` (see
    ``Store.put_items_with_events``) too.

    Both writes are always attempted (each is idempotent), so a retry completes the events
    of items an attempt of older code stored without them. Where a row already existed,
    the stored metadata wins, so every attempt reports the same items.
    """
    return [item for item, _ in await store_items_kept(store, session_id, lane, pairs, clients, events, observation)]


async def store_items_kept(store: Store, session_id: str, lane: str, pairs: list[tuple[Item, ItemContent]],
                           clients: list[ExternalItem] | None = None, events: list[EventRow] | None = None,
                           observation: tuple[str, str, str] | None = None,
                           usage: dict | None = None) -> list[tuple[Item, ItemContent]]:
    """``store_items``, with the content that is stored: where a row already existed, its
    content too (an earlier write's, not the one given). ``usage``: see ``item_row``."""
    rows = [item_row(item, content, lane, clients[n] if clients else None, usage)
            for n, (item, content) in enumerate(pairs)]
    inserted = await store.put_items_with_events(
        session_id, rows, [*(events or ()), *(item_event(item, lane) for item, _ in pairs)], observation)
    if inserted == len(rows):  # every row is this attempt's: no need to read them back
        kept = [item_of(row) for row in rows]  # parsed as a read would parse them
    else:
        stored = await store.get_items(session_id, [item.id for item, _ in pairs])
        kept = [item_of(stored[item.id]) for item, _ in pairs]
    for item, content in kept:
        store.recent_items.put(session_id, item, content)
    return kept


async def stored_item(store: Store, session_id: str, lane: str, item_id: str) -> tuple[Item, ItemContent] | None:
    """The item an earlier attempt already stored, its event log entry completed (that
    attempt may have died between the two writes); None when it was never stored."""
    done = await stored_answer(store, session_id, lane, item_id)
    return None if done is None else done[:2]


async def stored_answer(store: Store, session_id: str, lane: str,
                        item_id: str) -> tuple[Item, ItemContent, dict | None] | None:
    """``stored_item`` with the provider usage its row kept (None: stored without it)."""
    rows = await store.get_items(session_id, [item_id])
    row = rows.get(item_id)
    if row is None:
        return None
    item, content = item_of(row)
    await store.append_events(session_id, [item_event(item, lane)])
    return item, content, row.content.get("usage")


async def load_item(store: Store, session_id: str, item_id: str) -> tuple[Item, ItemContent] | None:
    rows = await store.get_items(session_id, [item_id])
    row = rows.get(item_id)
    return None if row is None else item_of(row)


def item_of(row: ItemRow) -> tuple[Item, ItemContent]:
    """A stored row's item metadata and exact content."""
    return item_from_json(row.content["meta"]), ItemContent.model_validate(row.content["content"])


async def write_generated(store: Store, inp: GeneratedItemsInput) -> int:
    """Store generated items and their events (idempotent: a repeat writes nothing twice)."""
    rows = [item_row(*generated_pair(g), ids.generated_lane(inp.lane)) for g in inp.items]
    if not inp.events:
        return await store.put_items(inp.session_id, rows)
    events = [EventRow(**e.model_dump()) for e in inp.events]
    inserted = await store.put_items_with_events(inp.session_id, rows, events)
    metrics.observe_events(events)
    return inserted


def generated_pair(generated: GeneratedItem) -> tuple[Item, ItemContent]:
    """A generated item and its content, as ``store_generated_items`` stores them."""
    return as_stored(item_with(generated.item, seq=generated.number), ItemContent(text=generated.text))


async def load_items(store: Store, session_id: str, item_ids: list[str],
                     given: dict[str, tuple[Item, ItemContent]] | None = None,
                     ) -> tuple[dict[str, Item], dict[str, ItemContent]]:
    """Items and their content; only those this worker has not stored or loaded lately are read.
    ``given``: items whose write may still be running (a step's generated items), as they will be stored."""
    loaded = {**store.recent_items.get(session_id, item_ids), **(given or {})}
    wanted = [i for i in item_ids if i not in loaded]
    if wanted:
        rows = await store.get_items(session_id, wanted)
        missing = [i for i in wanted if i not in rows]
        if missing:
            raise LookupError(f"session {session_id}: items {missing[:5]} are not stored")
        for item_id, row in rows.items():
            loaded[item_id] = item_of(row)
            store.recent_items.put(session_id, *loaded[item_id])
    return {i: loaded[i][0] for i in item_ids}, {i: loaded[i][1] for i in item_ids}


async def read_whole(store: Store, session_id: str, obs_id: str) -> str:
    """The whole text of an observation, read in bounded slices."""
    parts, offset = [], 0
    while True:
        piece = await store.read_observation(session_id, obs_id, offset, MAX_RECALL_CHARS)
        parts.append(piece.text)
        if piece.eof or piece.next_offset is None:
            return "".join(parts)
        offset = piece.next_offset


# --- activities ----------------------------------------------------------------------------


async def _stored_pairs(store: Store, session_id: str, rows: list[ItemRow]) -> list[tuple[Item, ItemContent]]:
    """The stored items of ``rows`` (an earlier attempt wrote some: its metadata wins)."""
    stored = await store.get_items(session_id, [row.item_id for row in rows])
    return [item_of(stored[row.item_id]) for row in rows]


async def _check_client_ids(store: Store, session_id: str, items: list[ExternalItem], item_ids: list[str]) -> None:
    """Refuse, before anything is written, a client id another item already holds. The API
    recognises a resent item first; this catches two calls racing with the same new id."""
    planned = {ext.client_id: item_id for ext, item_id in zip(items, item_ids, strict=True) if ext.client_id}
    for client_id, use in (await store.client_id_uses(session_id, list(planned))).items():
        if use.item_id != planned[client_id]:  # the same item id: an earlier attempt of this call
            raise rejections.item_id_taken(client_id, use.item_id)


async def _external_text(store: Store, session_id: str, ext: ExternalItem) -> str | None:
    if ext.content_ref is None:
        return ext.text
    try:
        return await read_whole(store, session_id, ext.content_ref)
    except ObservationNotFound:
        raise rejections.invalid_input(f"content_ref {ext.content_ref} is not stored for this session") from None


EXTRA_FIELDS = ("reasoning_content", "responses_items", "images")


async def _external_extras(store: Store, session_id: str, ext: ExternalItem) -> dict:
    """The verbatim extras (reasoning, Responses items, images) the API stored for an item, as content fields."""
    if ext.extra_ref is None:
        return {}
    try:
        stored = json.loads(await read_whole(store, session_id, ext.extra_ref))
    except ObservationNotFound:
        raise rejections.invalid_input(f"extra_ref {ext.extra_ref} is not stored for this session") from None
    return extra_fields(stored)


def extra_fields(extras: dict) -> dict:
    """The content fields of an item's extras, as stored (``_external_extras`` reads them back)."""
    stored = json.loads(json.dumps(extras, ensure_ascii=False, sort_keys=True))
    return {name: stored[name] for name in EXTRA_FIELDS if stored.get(name)}


def external_content(ext: ExternalItem, text: str | None, fields: dict) -> ItemContent:
    """The content ``ingest_items`` stores for ``ext``: its whole ``text`` (inline or behind its
    content_ref) and its extras' ``fields`` (``extra_fields``)."""
    return ItemContent(text=text or "", tool_calls=list(ext.tool_calls), tool_call_id=ext.tool_call_id,
                       tool_name=ext.tool_name, **fields)


def as_stored(item: Item, content: ItemContent) -> tuple[Item, ItemContent]:
    """An item and its content as a read of the row storing them returns them."""
    return item_of(item_row(item, content, ids.MAIN_LANE))  # the lane is not part of what is read back


@dataclass
class _Ingest:
    """What ``ingest_items`` writes: the rows, the items as measured with their content,
    the observations archiving their text, the workflow's events and one per item."""

    rows: list[ItemRow]
    measured: list[tuple[Item, ItemContent]]
    archives: list[tuple[str, str, str]]
    events: list[EventRow]
    item_events: list[EventRow]


async def _ingest(store: Store, inp: IngestItemsInput) -> _Ingest:
    """Read the items' content, check their client ids and measure them (no write)."""
    texts = [await _external_text(store, inp.session_id, ext) for ext in inp.items]  # all, before any is stored
    extras = [await _external_extras(store, inp.session_id, ext) for ext in inp.items]
    await _check_client_ids(store, inp.session_id, inp.items, ingest_ids(inp)[0])
    measured, archives = measure_external(inp, texts, extras)
    rows = [item_row(item, content, inp.lane, inp.items[n]) for n, (item, content) in enumerate(measured)]
    return _Ingest(rows=rows, measured=[item_of(row) for row in rows], archives=archives,
                   events=[EventRow(**e.model_dump()) for e in inp.events],
                   item_events=[item_event(item, inp.lane) for item, _ in measured])


def ingest_ids(inp: IngestItemsInput) -> tuple[list[str], list[str]]:
    """The items' ids and their observations' (derived from the seqs when not given)."""
    count = len(inp.items)
    item_ids = inp.item_ids or [ids.item_id(inp.lane, inp.first_seq + n) for n in range(count)]
    obs_ids = inp.observation_ids or [ids.observation_id(inp.session_id, inp.lane, inp.first_seq + n)
                                      for n in range(count)]
    return item_ids, obs_ids


def measure_external(inp: IngestItemsInput, texts: list[str | None], extras: list[dict],
                     ) -> tuple[list[tuple[Item, ItemContent]], list[tuple[str, str, str]]]:
    """The items of ``inp`` measured from their content (``texts``, ``extras``), as
    ``ingest_items`` stores them, and the observations that archive them ((obs id, item id,
    text)). Pure: the gateway measures a continued request's turns with it before the session
    stores them (worker/api/gateway/continuation.py)."""
    item_ids, obs_ids = ingest_ids(inp)
    calls_by_id: dict[str, tuple[str, str]] = {}  # call id -> (tool name, arguments)
    measured: list[tuple[Item, ItemContent]] = []
    archives: list[tuple[str, str, str]] = []  # (obs id, item id, text) written with the items
    for offset, ext in enumerate(inp.items):
        seq = inp.first_seq + offset
        item_id = item_ids[offset]
        content = external_content(ext, texts[offset], extras[offset])
        calls_by_id.update({c.id: (c.name, c.arguments) for c in ext.tool_calls})
        item = Item(id=item_id, seq=seq, kind=ext.kind, role=ext.role or ROLE_OF_KIND.get(ext.kind, "user"),
                    task=inp.task_id)
        if ext.kind == Kind.ASSISTANT.value:
            item = item_with(item, group=seq, tool_call_ids=[c.id for c in ext.tool_calls])
        elif ext.kind == Kind.TOOL_RESULT.value:
            call = calls_by_id.get(ext.tool_call_id or "")
            name, arguments = call or (ext.tool_name, None)
            obs_id = ext.content_ref or obs_ids[offset]
            if ext.content_ref is None:
                archives.append((obs_id, item_id, content.text))
            # a call appended before this batch: its class as the caller read it from the call
            tool_class = (ext.tool_class if call is None and ext.tool_class is not None
                          else classify_tool(ext.tool_name or name, arguments, ext.exit_code))
            item = item_with(item, tool_name=ext.tool_name or name,
                             tool_call_ids=[ext.tool_call_id] if ext.tool_call_id else [], exit_code=ext.exit_code,
                             tool_class=tool_class, observation_id=obs_id)
        bounded = bounded_item(item, content, inp.preview_chars, inp.model, inp.bound_above_tokens,
                               ext.content_ref or obs_ids[offset], inp.recall, inp.preview_lines)
        if bounded.observation_id is not None and item.observation_id is None and ext.content_ref is None:
            archives.append((bounded.observation_id, item_id, archived_text(content)))  # oversized: archived exactly
        measured.append((bounded, content))
    return measured, archives


def _conflict_error(conflict: ItemConflict) -> ApplicationError:
    return ApplicationError(str(conflict), {"next_free_seq": conflict.next_free_seq, "ids": conflict.ids[:20]},
                            type=ITEMS_CONFLICT, non_retryable=True)


class ItemActivities(ActivityGroup):
    """Storing and measuring the items the workflows bring in."""

    @activity.defn
    async def store_text(self, inp: StoreTextInput) -> Item:
        """Store a user or system text as an item of the lane."""
        return await store_text_item((await self.runtime()).store, inp)

    @activity.defn(name="store_user_message")
    async def store_user_message(self, inp: StoreTextInput) -> Item:
        """``store_text`` under its former name, which runs recorded before the rename still call."""
        return await self.store_text(inp)

    @activity.defn
    async def measure_texts(self, inp: MeasureTextsInput) -> dict[str, int]:
        """Token cost of texts the engine generated (checkpoint, summary), as full messages."""
        return {key: count_text_message_tokens(text, inp.model) for key, text in inp.texts.items()}

    @activity.defn(name="store_generated_items")
    async def store_generated_items(self, inp: GeneratedItemsInput) -> int:
        """Store the content of items a compaction created so requests can render them.

        Generated items live in their own lane: their seq in the engine repeats the lane
        position they were made at, so they cannot share it.
        """
        return await write_generated((await self.runtime()).store, inp)

    @activity.defn
    async def ingest_items(self, inp: IngestItemsInput) -> list[Item]:
        """Store the items an external agent appended and measure them.

        Content arrives inline or by reference to an observation the API already wrote;
        tool output is archived as an observation either way, so it is recallable. The items,
        their observations and events are written in one transaction or not at all: ids that
        already hold other content (seqs handed out by a workflow task that was lost) fail the
        call with ``ITEMS_CONFLICT`` (non-retryable), naming the lane's next free seq, and the
        workflow retries on free ids. An earlier attempt's rows of the same content are no
        conflict: their stored metadata is answered.
        """
        store = await self.store()
        ingest = await _ingest(store, inp)
        try:
            inserted = await store.put_items_exactly(inp.session_id, inp.lane, ingest.rows,
                                                     [*ingest.events, *ingest.item_events], ingest.archives)
        except ItemConflict as conflict:
            raise _conflict_error(conflict) from None
        kept = ingest.measured if inserted == len(ingest.rows) else await _stored_pairs(store, inp.session_id,
                                                                                        ingest.rows)
        for item, content in kept:
            store.recent_items.put(inp.session_id, item, content)
        metrics.observe_events(ingest.events)
        return [item for item, _ in kept]

    @activity.defn
    async def measure_items(self, inp: IngestItemsInput) -> list[Item]:
        """``ingest_items`` without the write: the items as it will store them, refused as it
        would refuse them (ids taken by other content, a client id another item holds, content
        not stored), for a step that answers before its write finishes (the write is scheduled
        with the step's answer: nothing can take the ids in between). Reads only, so a repeat
        is harmless (a local activity)."""
        store = await self.store()
        ingest = await _ingest(store, inp)
        try:
            stored = await store.check_items_free(inp.session_id, inp.lane, ingest.rows, ingest.archives)
        except ItemConflict as conflict:
            raise _conflict_error(conflict) from None
        return [item_from_json(stored[row.item_id]["meta"]) if row.item_id in stored else item
                for row, (item, _) in zip(ingest.rows, ingest.measured, strict=True)]
