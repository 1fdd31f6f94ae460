"""What every body module shares: id patterns, size limits, the strict base model."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
OBS_PATTERN = r"^obs-[A-Za-z0-9][A-Za-z0-9_.-]*$"
MAX_ITEM_CHARS = 1_000_000  # one appended item; the request body limit applies on top
MAX_PROMPT_CHARS = 100_000

ToolsMode = Literal["workspace", "recall", "none"]
# Context-management tools a session can offer its model on top of its tools mode.
ContextTool = Literal["begin_episode", "end_episode", "condense_context", "pin_note"]
CapabilityKind = Literal["tool_schema", "skill", "manual_skill"]
MAX_CAPABILITY_CHARS = 200_000
MAX_NOTE_CHARS = 20_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
