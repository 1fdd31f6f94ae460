"""What a call can fail with: one base class, the API's answers by status, and the
transport's failures (no connection, no answer in time).

Every HTTP error body of the API is ``{"error": {"code", "message", "details"}}``; the
``code`` is the finer reason (``session_closed``, ``request_unfit``, ``idempotency_key_reused``...).
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx


class LanesError(Exception):
    """Anything the client raises about a call."""


class LanesAPIError(LanesError):
    """The API answered with an error status."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, *,
                 retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retry_after = retry_after  # seconds, from the Retry-After header when it had one


class BadRequest(LanesAPIError):
    """400: the input was refused (the message says why)."""


class AuthenticationError(LanesAPIError):
    """401/403: a missing, unknown or insufficient bearer token."""


class NotFound(LanesAPIError):
    """404: no such session for this tenant, or nothing of that id under it."""


class Conflict(LanesAPIError):
    """409: the session's state does not allow this now (closed, wrong mode, not ready...)."""


class Unprocessable(LanesAPIError):
    """422: malformed input, a request that cannot fit the budget, a reused idempotency key."""


ValidationError = Unprocessable  # the name the HTTP status suggests (not pydantic's)


class RateLimited(LanesAPIError):
    """429: the server is busy; ``retry_after`` says when to come back."""


class ServiceUnavailable(LanesAPIError):
    """503: Temporal or PostgreSQL unreachable, or the session still starting."""


class ServerError(LanesAPIError):
    """Any other 5xx (504: the session did not answer in time)."""


class LanesConnectionError(LanesError):
    """The API could not be reached, or the connection dropped before an answer."""


class LanesTimeout(LanesError):
    """No answer within the client's timeout (or a wait the caller bounded ran out)."""


class TaskStillRunning(LanesTimeout):
    """``wait_task`` ran out of time: the API answered all along, the task has not ended yet."""

    def __init__(self, session_id: str, task_id: str, timeout: float) -> None:
        super().__init__(f"task {task_id} did not end within {timeout:.0f}s")
        self.session_id, self.task_id, self.timeout = session_id, task_id, timeout


_BY_STATUS: dict[int, type[LanesAPIError]] = {
    400: BadRequest, 401: AuthenticationError, 403: AuthenticationError, 404: NotFound, 409: Conflict,
    422: Unprocessable, 429: RateLimited, 503: ServiceUnavailable,
}


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The Retry-After header as seconds from now: a number, or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a zone-less one is read as such
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_from_response(response: httpx.Response, hint: str | None = None) -> LanesAPIError:
    """The typed error of an error response (its body read already); ``hint`` is added to its
    message."""
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else LanesAPIError)
    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    try:
        body = response.json()
        error = body.get("error") or {}
        code, message, details = str(error.get("code", "error")), str(error.get("message", response.text[:500])), \
            error.get("details")
    except (ValueError, AttributeError):
        code, message, details = "error", response.text[:500] or response.reason_phrase, None
    if hint:
        message = f"{message} {hint}"
    return cls(status, code, message, details, retry_after=retry_after)
