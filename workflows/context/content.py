"""What is stored per item in PostgreSQL: the exact content the renderer projects."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str = "{}"  # the raw argument string exactly as the model produced it


class ItemContent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)  # assistant items
    tool_call_id: str | None = None  # tool results answering a native tool call
    tool_name: str | None = None
    # Reasoning of an assistant turn, verbatim and only ever passed back while the turn is kept
    # at full fidelity: chat-style ``reasoning_content`` text (DeepSeek, Kimi...), and the
    # Responses API items the item was appended as (its ``reasoning`` items among them).
    reasoning_content: str | None = None
    responses_items: list[dict[str, Any]] = Field(default_factory=list)
    # Images of a user message or tool result (``activities/image_tokens.py`` has their stored
    # shape and cost), sent only while the item is kept at full fidelity: a preview names them.
    images: list[dict[str, Any]] = Field(default_factory=list)

    def stored_fields(self) -> dict[str, Any]:
        """What a row stores: the newer optional fields only when set, so rows of items
        without them keep the shape earlier versions wrote and read."""
        unset = {name for name in ("reasoning_content", "responses_items", "images") if not getattr(self, name)}
        return self.model_dump(mode="json", exclude=unset)
