"""Registering a session: what the workflow hands the store at start, and the fixed cost of its
tool definitions it gets back.
"""

from __future__ import annotations

from pydantic import BaseModel


class SessionStartInput(BaseModel):
    session_id: str
    tenant: str
    config: dict
    tools: list[str]
    model: str
    tool_set: str | None = None  # the agent's own definitions (stored by the API)


class SessionStartResult(BaseModel):
    tool_definition_tokens: int
