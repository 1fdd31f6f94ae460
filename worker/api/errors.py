"""One error shape for every failure the API reports, and the mapping of Temporal errors.

Every 4xx/5xx body is ``{"error": {"code": ..., "message": ..., "details": [...]}}``.
Temporal's own errors are translated here so that no malformed input ever surfaces
as a 500: an unknown workflow is 404, a rejected update has the status its rejection
type maps to in ``REJECTION_STATUS`` (with the workflow's message), an unreachable
service is 503, a session that does not answer in time is 504.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    RPCTimeoutOrCancelledError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from activities.store_errors import StoreUnavailable
from workflows.contract import rejections

log = logging.getLogger("lanes.api")

# A workflow's typed rejection -> (HTTP status, error code).
REJECTION_STATUS: dict[str, tuple[int, str]] = {
    rejections.INVALID_INPUT: (400, "rejected"),
    rejections.CONFLICT: (409, "conflict"),
    rejections.SESSION_CLOSED: (409, "session_closed"),
    rejections.WRONG_MODE: (409, "wrong_mode"),
    rejections.REQUEST_UNFIT: (422, "request_unfit"),
    rejections.UNPAIRED_TOOL_CALL: (422, "unpaired_tool_call"),
    rejections.KEY_REUSED: (422, "idempotency_key_reused"),
    rejections.ITEM_ID_TAKEN: (409, "item_id_conflict"),
    rejections.STORE_CONFLICT: (503, "store_conflict"),  # nothing was stored: safe to send again
    rejections.HANDING_OVER: (503, "handing_over"),  # only after the API's own retries ran out
}


class ErrorInfo(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    error: ErrorInfo


class ApiError(Exception):
    """An error with its HTTP status; raised anywhere, rendered by the app's handler."""

    def __init__(self, status: int, code: str, message: str, *, details: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return ErrorResponse(error=ErrorInfo(code=self.code, message=self.message, details=self.details)).model_dump(
            exclude_none=True
        )


def store_unavailable() -> ApiError:
    """PostgreSQL is down: a short answer (the cause goes to the API's log, not the client)."""
    return ApiError(503, "postgres_unavailable", "PostgreSQL is unavailable; retry shortly",
                    headers={"Retry-After": "2"})


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def session_not_found(session_id: str) -> ApiError:
    return not_found(f"session {session_id!r}")


def outcome_unknown(session_id: str, action: str) -> ApiError:
    """An update whose outcome could not be learnt: it may have been applied, or not."""
    return ApiError(503, "outcome_unknown",
                    f"could not {action}: session {session_id!r} did not settle the call in time; it may or may not "
                    "have been applied. A call with an Idempotency-Key (a step with a step_id) is safe to send again "
                    "with the same key and answers its outcome; without one, read the session (GET .../items, "
                    "GET .../status) before sending it again", headers={"Retry-After": "2"})


def is_recovering(error: BaseException) -> bool:
    """Temporal refused an update while the session's workflow task is being retried (a worker
    died in it, or it failed): the update was not admitted, and is taken once the task recovers."""
    return isinstance(error, RPCError) and error.status == RPCStatusCode.FAILED_PRECONDITION \
        and "Workflow Task in failed state" in error.message


def recovering(session_id: str, action: str) -> ApiError:
    return ApiError(503, "session_recovering",
                    f"could not {action}: session {session_id!r} is recovering from a lost workflow task (a worker "
                    "stopped in the middle of it); nothing was applied, send the call again shortly",
                    headers={"Retry-After": "2"})


def session_ended(session_id: str, action: str) -> ApiError:
    return ApiError(409, "session_ended", f"could not {action}: session {session_id!r} has ended")


# Temporal's failure type for an update the run ended under after accepting it (a session
# terminated mid-step: a closing session waits for its handlers).
ACCEPTED_UPDATE_COMPLETED_WORKFLOW = "AcceptedUpdateCompletedWorkflow"

# The SDK's own message for an update or query the workflow has no handler for (a session
# started by an older version of the workflow): Temporal gives it no type of ours.
_NO_HANDLER = re.compile(r"(handler for .* (expected but )?not found|unknown (update|query)|"
                         r"no (update|query) handler)", re.IGNORECASE)


def _root_message(error: BaseException) -> tuple[str, str | None]:
    """The innermost application failure's message and type."""
    cause: BaseException | None = error
    found: tuple[str, str | None] | None = None
    for _ in range(20):  # a cause chain is short; never loop on a cycle
        if cause is None:
            break
        if isinstance(cause, ApplicationError):
            found = (cause.message, cause.type)
        elif isinstance(cause, FailureError) and found is None:
            found = (cause.message, None)
        cause = cause.__cause__ or getattr(cause, "cause", None)
    if found is None:
        return str(error), None
    return found


def _root_details(error: BaseException) -> list[dict[str, Any]] | None:
    """The innermost application failure's details that are objects (e.g. stored item ids)."""
    cause: BaseException | None = error
    found = None
    for _ in range(20):
        if cause is None:
            break
        if isinstance(cause, ApplicationError):
            found = [d for d in cause.details if isinstance(d, dict)] or None
        cause = cause.__cause__ or getattr(cause, "cause", None)
    return found


def rejected(message: str, type_: str | None = None, details: list[dict[str, Any]] | None = None) -> ApiError:
    """A failed update: the status its rejection type maps to."""
    if type_ in REJECTION_STATUS:
        status, code = REJECTION_STATUS[type_]
        return ApiError(status, code, message, details=details)
    if _NO_HANDLER.search(message):
        return ApiError(409, "unsupported", f"this session's workflow does not support that operation: {message}")
    log.error("update failed without a rejection type (%s): %s", type_, message)
    return ApiError(500, "update_failed", f"the session failed to handle the call ({type_ or 'untyped'}): {message}")


def from_temporal(error: BaseException, session_id: str, action: str) -> ApiError:
    """Translate an exception raised by a Temporal client call on a session."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, RPCTimeoutOrCancelledError,
                          WorkflowUpdateRPCTimeoutOrCancelledError)):
        return ApiError(504, "timeout", f"could not {action}: session {session_id!r} did not answer in time "
                                        "(is a worker polling its task queue?)")
    if isinstance(error, WorkflowUpdateFailedError):
        message, type_ = _root_message(error)
        if type_ == ACCEPTED_UPDATE_COMPLETED_WORKFLOW:
            return session_ended(session_id, action)
        return rejected(message, type_, _root_details(error))
    if isinstance(error, WorkflowQueryRejectedError):
        return ApiError(409, "conflict", f"could not {action}: session {session_id!r} has ended")
    if isinstance(error, WorkflowQueryFailedError):
        message = str(error)
        if rejections.STILL_STARTING in message:
            return ApiError(503, "starting", f"session {session_id!r} is still starting; retry shortly",
                            headers={"Retry-After": "1"})
        if _NO_HANDLER.search(message):
            return ApiError(409, "unsupported", f"could not {action}: this session's workflow does not support it "
                                                f"({message})")
        return ApiError(409, "query_failed", f"could not {action}: {message}")
    if isinstance(error, RPCError):
        if error.status == RPCStatusCode.NOT_FOUND:
            if "already completed" in error.message or "already finished" in error.message:
                return session_ended(session_id, action)
            return session_not_found(session_id)
        if error.status == RPCStatusCode.INVALID_ARGUMENT:
            return ApiError(400, "rejected", f"could not {action}: {error.message}")
        if is_recovering(error):
            return recovering(session_id, action)
        if error.status in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.ALREADY_EXISTS):
            return ApiError(409, "conflict", f"could not {action}: {error.message}")
        if error.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            return ApiError(429, "busy", f"could not {action}: {error.message}", headers={"Retry-After": "1"})
        if error.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            return ApiError(504, "timeout", f"could not {action}: session {session_id!r} did not answer in time")
        return ApiError(503, "temporal_unavailable", f"could not {action}: Temporal said {error.message}")
    if isinstance(error, StoreUnavailable):
        log.warning("%s", error)
        return store_unavailable()
    if isinstance(error, (ConnectionError, OSError)):
        return ApiError(503, "unavailable", f"could not {action}: {type(error).__name__}: {error}")
    raise error
