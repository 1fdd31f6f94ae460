"""Registering a session: what the workflow hands the store at start, and the fixed cost of its
tool definitions it gets back.
"""

from __future__ import annotations

from pydantic import BaseModel

from workflows.context import EngineConfig, Item
from workflows.contract.items import StoreTextInput


class SessionStartInput(BaseModel):
    session_id: str
    tenant: str
    config: dict
    tools: list[str]
    model: str
    tool_set: str | None = None  # the agent's own definitions (stored by the API)
    # The system prompt, stored by the same activity (one round trip for a new session, not
    # two). Its preview width follows the measured tool definitions, so ``preview_chars`` is
    # set by the activity from ``engine_config`` (the lane's, with no tool definitions yet).
    system_prompt: StoreTextInput | None = None
    engine_config: EngineConfig | None = None


class SessionStartResult(BaseModel):
    tool_definition_tokens: int
    system_prompt: Item | None = None  # None: none was asked for, or a worker older than the field ran it
