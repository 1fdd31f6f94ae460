"""What the item activities take and give back: ids the workflow chose, content to store, and the
metadata (``Item``) the workflow keeps.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.context import Item, RecallStyle, ids
from workflows.contract.events import EventSpec
from workflows.contract.session import ExternalItem, GeneratedItem


class ToolCallRef(BaseModel):
    """A tool call as the workflow sees it: the arguments travel only for tools the
    workflow runs itself (the rest stay in PostgreSQL with the assistant item)."""

    id: str
    name: str
    arguments: str | None = None


class StoredItem(BaseModel):
    """Metadata an activity returns after it stored an item's content."""

    item: Item
    tool_calls: list[ToolCallRef] = Field(default_factory=list)


class StoreTextInput(BaseModel):
    """A user or system text (a submitted message, a system prompt, a subagent's brief)."""

    session_id: str
    lane: str = ids.MAIN_LANE
    # Where oversized input is archived: always when ``bound_above_tokens`` is None (runs of
    # engine rules 1), else only when the text's full cost is above it.
    observation_id: str | None = None
    bound_above_tokens: int | None = None
    item_id: str
    seq: int
    task_id: str
    text: str
    kind: str = "user"
    role: str = "user"
    model: str
    preview_chars: int


class GeneratedItemsInput(BaseModel):
    session_id: str
    lane: str = ids.MAIN_LANE
    items: list[GeneratedItem]
    events: list[EventSpec] = Field(default_factory=list)  # the compaction's events, written with the items


class MeasureTextsInput(BaseModel):
    model: str
    texts: dict[str, str]


class IngestItemsInput(BaseModel):
    session_id: str
    lane: str = ids.MAIN_LANE
    model: str
    preview_chars: int
    task_id: str | None
    first_seq: int
    items: list[ExternalItem]
    # Per item: its id, and the observation that archives it (tool output). Empty in inputs
    # scheduled by workers older than these fields; those are derived the same way below.
    item_ids: list[str] = Field(default_factory=list)
    observation_ids: list[str] = Field(default_factory=list)
    # Engine rules 2: a user or assistant text whose full cost is above this is archived at
    # its observation id too, so that it can enter bounded (see archive_if_oversized).
    bound_above_tokens: int | None = None
    recall: RecallStyle = "tool"  # how placeholders say to read archived text back
    preview_lines: bool = False  # previews show lines of the omitted part (EngineConfig.preview_lines)
    events: list[EventSpec] = Field(default_factory=list)  # the workflow's deferred events, written with the items
