"""The Python client of the Context Lanes HTTP API (distribution ``context-lanes-client``).

It needs only httpx, pydantic and httpx-sse: it installs and imports without the server's
dependencies. ``LanesClient`` (sync) and ``AsyncLanesClient`` have the same methods.
"""

from lanes_client.client import DEFAULT_URL, AsyncLanesClient, LanesClient
from lanes_client.errors import (
    AuthenticationError,
    BadRequest,
    Conflict,
    LanesAPIError,
    LanesConnectionError,
    LanesError,
    LanesTimeout,
    NotFound,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    TaskStillRunning,
    Unprocessable,
    ValidationError,
)
from lanes_client.items import assistant_item, note_item, tool_result_item, user_item
from lanes_client.retry import RetryPolicy

__all__ = [
    "DEFAULT_URL", "AsyncLanesClient", "AuthenticationError", "BadRequest", "Conflict", "LanesAPIError",
    "LanesClient", "LanesConnectionError", "LanesError", "LanesTimeout", "NotFound", "RateLimited", "RetryPolicy",
    "ServerError", "ServiceUnavailable", "TaskStillRunning", "Unprocessable", "ValidationError", "assistant_item",
    "note_item", "tool_result_item", "user_item",
]
