"""An external agent's own world, as ``POST /sessions`` declares it: its tool definitions,
its system prompt (none of ours), and how it reads archived text back.

The definitions are stored in PostgreSQL under a digest of them (the workflow carries only
that id); every request renders them after the catalog tools, and the session's budget is
charged for them. An agent without a ``recall_observation`` tool is never told to call it:
its placeholders point at the API's recall endpoint instead.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lanes_client.schemas import MAX_TOOL_DEFINITIONS_CHARS, SessionCreate
from worker.api.errors import ApiError
from workflows.contract.tools import RECALL_TOOL


def tool_set_id(definitions: list[dict[str, Any]]) -> str:
    """The content address of a tool set (idempotent storage, stable across retries)."""
    canonical = json.dumps(definitions, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "ts-" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def agent_definitions(body: SessionCreate, catalog_tools: list[str]) -> list[dict[str, Any]]:
    """The agent's tool definitions as they will be sent (422 naming what is wrong)."""
    if not body.tool_definitions:
        return []
    if body.mode != "external":
        raise ApiError(422, "invalid", "tool_definitions are for external sessions: a hosted session runs "
                                       "the catalog's tools (see tools)")
    definitions = [d.model_dump(mode="json", exclude_none=True) for d in body.tool_definitions]
    seen = set(catalog_tools)
    for index, definition in enumerate(definitions):
        name = definition["function"]["name"]
        if name in seen:
            raise ApiError(422, "invalid", f"tool_definitions[{index}]: the name {name!r} is already defined "
                                           f"{'by tools' if name in catalog_tools else 'earlier in the list'}")
        seen.add(name)
    size = len(json.dumps(definitions, ensure_ascii=False))
    if size > MAX_TOOL_DEFINITIONS_CHARS:
        raise ApiError(422, "invalid", f"tool_definitions take {size} characters as JSON; the limit is "
                                       f"{MAX_TOOL_DEFINITIONS_CHARS}")
    return definitions


def recall_style(body: SessionCreate, offered: list[str]) -> str:
    """How placeholders say to read archived text back: the declared style, else "tool"
    exactly when the session offers a tool of that name."""
    has_tool = RECALL_TOOL in offered
    if body.recall == "tool" and not has_tool:
        raise ApiError(422, "invalid", f"recall 'tool' needs a tool named {RECALL_TOOL!r}: declare it in "
                                       "tool_definitions (or tools: 'recall'), or use recall 'endpoint'")
    if body.mode == "hosted":
        if body.recall == "endpoint":
            raise ApiError(422, "invalid", "a hosted session recalls with its recall_observation tool: "
                                           "recall 'endpoint' is for external sessions")
        return "tool"
    return body.recall or ("tool" if has_tool else "endpoint")
