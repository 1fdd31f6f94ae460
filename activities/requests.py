"""The request materialiser: a plan's (item id, projection) entries become the exact
messages and tool definitions a model receives, with their token counts.

The hosted model activity and the API's ``GET /request`` both call :func:`materialise`,
so an external agent gets byte for byte the request a hosted session would send.
Plans travel from the workflow as deltas against the previous plan (:class:`PlanDelta`):
between compactions a request only grows at its end, so history grows by O(1) per turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import BaseModel

from activities.items import load_items
from activities.store import Store
from activities.tokens import count_message_tokens, count_tool_definitions
from workflows.context.items import Projection
from workflows.context.observations import RecallStyle
from workflows.context.render import Entries, render_messages
from workflows.tools import tool_specs

PlanEntries = list[tuple[str, Projection]]


class PlanDelta(BaseModel):
    """A request plan, sent as a change against the previous one."""

    version: int
    base_version: int | None  # None: ``entries`` is the whole plan
    entries: list[tuple[str, Projection]]


class PlanBaseMissing(LookupError):
    """The delta names a base plan that was never stored (a workflow bug, not retryable)."""


async def resolve_plan(store: Store, session_id: str, lane: str, delta: PlanDelta) -> PlanEntries:
    """The full plan of ``delta.version``; stored so the next delta can build on it.

    Idempotent: a retried activity rebuilds the same plan and the second write is a no-op.
    """
    if delta.base_version is None:
        entries = list(delta.entries)
    else:
        base = await store.get_plan(session_id, lane, delta.base_version)
        if base is None:
            raise PlanBaseMissing(f"session {session_id} lane {lane}: base plan {delta.base_version} is not stored")
        entries = [(item_id, Projection(p)) for item_id, p in base] + list(delta.entries)
    await store.put_plan(session_id, lane, delta.version, [[i, p.value] for i, p in entries])
    return entries


@dataclass(frozen=True)
class Request:
    """A materialised request: what is sent, and what it costs."""

    messages: list[dict]
    tools: list[dict]
    message_tokens: list[int]  # one count per message
    tool_tokens: int  # the tool definitions
    stable_prefix_messages: int  # leading messages that stay byte-identical until the next compaction

    @property
    def total_tokens(self) -> int:
        return sum(self.message_tokens) + self.tool_tokens


async def materialise(store: Store, session_id: str, entries: Entries, *, preview_chars: int, tools: list[str],
                      model: str, stable_prefix_entries: int = 0, tool_set: str | None = None,
                      recall: RecallStyle = "tool") -> Request:
    """Load the entries' content, render them, add the tool definitions and count.

    ``stable_prefix_entries``: the plan's entries laid out at its last layout change; the
    messages they render alone, as far as they equal the request's own, are its stable prefix.
    ``tool_set``: the agent's own tool definitions (after the catalog's ``tools``).
    Raises LookupError when an entry's item or the tool set is not stored.
    """
    items, contents = await load_items(store, session_id, list(dict.fromkeys(item_id for item_id, _ in entries)))
    messages = render_messages(entries, items, contents, preview_chars, recall)
    specs = tool_specs(tools) + (await store.get_tool_set(session_id, tool_set) if tool_set else [])
    stable = 0
    if stable_prefix_entries:
        prefix = render_messages(entries[:stable_prefix_entries], items, contents, preview_chars, recall)
        while stable < min(len(prefix), len(messages)) and prefix[stable] == messages[stable]:
            stable += 1

    def count() -> tuple[list[int], int]:  # tiktoken: CPU work off the event loop
        return [count_message_tokens(m, model) for m in messages], count_tool_definitions(specs, model)

    message_tokens, tool_tokens = await asyncio.to_thread(count)
    return Request(messages=messages, tools=specs, message_tokens=message_tokens, tool_tokens=tool_tokens,
                   stable_prefix_messages=stable)
