"""The request materialiser: a plan's (item id, projection) entries become the exact
messages and tool definitions a model receives, with their token counts.

The hosted model activity and the API's ``GET /request`` both call :func:`materialise`,
so an external agent gets byte for byte the request a hosted session would send.
Plans travel from the workflow as deltas against the previous plan (:class:`PlanDelta`):
between compactions a request only grows at its end, so history grows by O(1) per turn.
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass, field

from activities import token_memo
from activities.items import generated_pair, load_items, write_generated
from activities.recent_rows import PlanEntries
from activities.store import Store
from activities.store_rows import EventRow
from activities.tokens import count_tool_definitions
from workflows.context import (
    Entries,
    FormattedRequest,
    Item,
    ItemContent,
    Projection,
    RecallStyle,
    Rendered,
    RequestFormat,
    format_request,
    render_messages,
    render_turns,
)
from workflows.contract.model import ModelCallInput, PlanDelta
from workflows.contract.tools import tool_specs


class PlanBaseMissing(LookupError):
    """The delta names a base plan that was never stored (a workflow bug, not retryable)."""


async def plan_entries(store: Store, session_id: str, lane: str, delta: PlanDelta) -> PlanEntries:
    """The full plan of ``delta.version`` (not stored yet: ``store_plan``)."""
    if delta.base_version is None:
        return list(delta.entries)
    base = store.recent_plans.get(session_id, lane, delta.base_version)
    if base is None:
        stored = await store.get_plan(session_id, lane, delta.base_version)
        if stored is None:
            raise PlanBaseMissing(f"session {session_id} lane {lane}: base plan {delta.base_version} is not stored")
        base = [(item_id, Projection(p)) for item_id, p in stored]
    return base + list(delta.entries)


async def store_plan(store: Store, session_id: str, lane: str, version: int, entries: PlanEntries) -> None:
    """Store plan ``version`` once (the first write wins), so that the next delta can build on it."""
    if await store.put_plan(session_id, lane, version, [[i, p.value] for i, p in entries]):
        store.recent_plans.put(session_id, lane, version, entries)


@dataclass(frozen=True)
class Request:
    """A materialised request: what is sent, and what it costs."""

    messages: list[dict]
    tools: list[dict]
    message_tokens: list[int]  # one count per message
    tool_tokens: int  # the tool definitions
    stable_prefix_messages: int  # leading messages that stay byte-identical until the next compaction
    turns: list[Rendered] = field(default_factory=list)  # the messages with the entry each renders
    contents: dict[str, ItemContent] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return sum(self.message_tokens) + self.tool_tokens

    def formatted(self, fmt: RequestFormat) -> FormattedRequest:
        """This request as ``fmt`` asks (the counts stay the chat rendering's: same text)."""
        return format_request(fmt, self.turns, self.contents, self.tools, self.stable_prefix_messages)


@functools.lru_cache(maxsize=256)
def _tool_tokens_of(specs_json: str, model: str) -> int:
    return count_tool_definitions(json.loads(specs_json), model)


def _tool_tokens(specs: list[dict], model: str) -> int:
    """The tool definitions' cost; the same few sets come every turn (cached by their text)."""
    return _tool_tokens_of(json.dumps(specs, sort_keys=True), model) if specs else 0


async def materialise(store: Store, session_id: str, entries: Entries, *, preview_chars: int, tools: list[str],
                      model: str, stable_prefix_entries: int = 0, tool_set: str | None = None,
                      recall: RecallStyle = "tool", given: dict[str, tuple[Item, ItemContent]] | None = None,
                      ) -> Request:
    """Load the entries' content, render them, add the tool definitions and count.

    ``stable_prefix_entries``: the plan's entries laid out at its last layout change; the
    messages they render alone, as far as they equal the request's own, are its stable prefix.
    ``tool_set``: the agent's own tool definitions (after the catalog's ``tools``).
    ``given``: items whose write may still be running, as they will be stored (``load_items``).
    Raises LookupError when an entry's item or the tool set is not stored.
    """
    items, contents = await load_items(store, session_id, list(dict.fromkeys(item_id for item_id, _ in entries)),
                                       given)
    turns = render_turns(entries, items, contents, preview_chars, recall)
    messages = [turn.message for turn in turns]
    specs = tool_specs(tools) + (await store.get_tool_set(session_id, tool_set) if tool_set else [])
    stable = 0
    if stable_prefix_entries:
        prefix = render_messages(entries[:stable_prefix_entries], items, contents, preview_chars, recall)
        while stable < min(len(prefix), len(messages)) and prefix[stable] == messages[stable]:
            stable += 1

    # Only what this worker has not counted yet is tokenised (token_memo: the same numbers as a
    # full recount), in a thread: tiktoken is CPU work that must stay off the event loop.
    known = [token_memo.known(m, model) for m in messages]
    new = [m for m, tokens in zip(messages, known, strict=True) if tokens is None]
    counted = iter(await asyncio.to_thread(lambda: [token_memo.message_tokens(m, model) for m in new]) if new else ())
    message_tokens = [next(counted) if tokens is None else tokens for tokens in known]
    tool_tokens = _tool_tokens(specs, model)
    return Request(messages=messages, tools=specs, message_tokens=message_tokens, tool_tokens=tool_tokens,
                   stable_prefix_messages=stable, turns=turns, contents=contents)


async def model_request(store: Store, inp: ModelCallInput) -> Request:
    """The request of a model call: its plan (usually built on the one this worker stored
    last, with no round trip) materialised, while the plan, the call's request event and the
    items the plan generated are written beside it (one round trip for all; each idempotent, so
    a retry writes them once)."""
    events = [EventRow(**inp.request_event.model_dump())] if inp.request_event is not None else []
    entries = await plan_entries(store, inp.session_id, inp.lane, inp.plan)
    writes = [store.append_events(inp.session_id, events), store_plan(store, inp.session_id, inp.lane,
                                                                      inp.plan.version, entries)]
    given = {}
    if inp.generated is not None:
        writes.append(write_generated(store, inp.generated))
        given = {g.item.id: generated_pair(g) for g in inp.generated.items}
    request, *_ = await asyncio.gather(
        materialise(store, inp.session_id, entries, preview_chars=inp.preview_chars, tools=inp.tools, model=inp.model,
                    given=given),
        *writes)
    assert isinstance(request, Request)
    return request
