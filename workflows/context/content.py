"""What is stored per item in PostgreSQL: the exact content the renderer projects."""

from __future__ import annotations

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
