"""The Python client of the Context Lanes HTTP API.

It needs only httpx and pydantic (and the pure engine's vocabulary): it installs and
imports without the server's dependencies (Temporal, PostgreSQL, the model client).
"""

from lanes_client.client import (
    DEFAULT_URL,
    LanesAPIError,
    LanesClient,
    assistant_item,
    note_item,
    tool_result_item,
    user_item,
)

__all__ = ["DEFAULT_URL", "LanesAPIError", "LanesClient", "assistant_item", "note_item", "tool_result_item",
           "user_item"]
