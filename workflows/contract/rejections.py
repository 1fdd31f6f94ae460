"""Why a session refused a call, as a type: callers branch on the type, never on wording.

Update validators and handlers raise these non-retryable ``ApplicationError``s; an update
refused by its validator leaves nothing stored, and one refused inside its handler fails
that update only (never the workflow task). Activities that find an input they can never
accept raise ``INVALID_INPUT`` too. The HTTP API maps each type to a status with one table
(``worker/api/errors.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.exceptions import ApplicationError

from workflows.context import EngineError

INVALID_INPUT = "InvalidInput"  # the input itself is wrong; the same call never succeeds
CONFLICT = "Conflict"  # the session's current state does not allow it; it may succeed later
SESSION_CLOSED = "SessionClosed"  # the session was closed and takes no more work
WRONG_MODE = "WrongMode"  # a hosted-mode call on an external session, or the reverse
# The context cannot be planned within the budget, even at the ladder's last rung (e.g. the
# system prompt, tools and protected items alone exceed it): no provider call is made.
REQUEST_UNFIT = "RequestDoesNotFit"
# A tool result without its call, or a call left without its result: either would silently
# vanish from the requests (the renderer keeps calls and results paired).
UNPAIRED_TOOL_CALL = "UnpairedToolCall"
# An idempotency key (or step id) used again for a different call.
KEY_REUSED = "IdempotencyKeyReused"
# A client item id already names another item of the session (or other content).
ITEM_ID_TAKEN = "ItemIdTaken"
# The items' ids were taken by other content on every try (see Lane.store_external): nothing
# of the call was stored; it can be sent again.
STORE_CONFLICT = "StoreConflict"
# The session is handing over to its next run (continue-as-new): the same call succeeds in a
# moment, on the new run. Clients retry it (worker/sessions.py, the HTTP API does so itself).
HANDING_OVER = "SessionHandingOver"
REJECTION_TYPES = (INVALID_INPUT, CONFLICT, SESSION_CLOSED, WRONG_MODE, REQUEST_UNFIT, UNPAIRED_TOOL_CALL, KEY_REUSED,
                   ITEM_ID_TAKEN, STORE_CONFLICT, HANDING_OVER)

# Queries cannot carry an error type (the client sees a message only): a query asked
# while a run restores its checkpoint fails with a message holding this, which clients test for.
STILL_STARTING = "is still starting"


def rejection(type_: str, message: str) -> ApplicationError:
    return ApplicationError(message, type=type_, non_retryable=True)


def invalid_input(message: str) -> ApplicationError:
    return rejection(INVALID_INPUT, message)


def conflict(message: str) -> ApplicationError:
    return rejection(CONFLICT, message)


def session_closed(action: str) -> ApplicationError:
    return rejection(SESSION_CLOSED, f"{action} rejected: the session is closed")


def wrong_mode(mode: str, action: str) -> ApplicationError:
    hint = ("send messages with POST /v1/sessions/{id}/messages (update submit)" if mode == "hosted"
            else "append items with POST /v1/sessions/{id}/items and read GET /v1/sessions/{id}/request")
    wanted = "external" if mode == "hosted" else "hosted"
    return rejection(WRONG_MODE, f"the session is in {mode} mode: {action} needs {wanted} mode ({hint})")


def request_unfit(reason: str) -> ApplicationError:
    return rejection(REQUEST_UNFIT, f"the next request does not fit the budget: {reason}")


def unfit_after_store(unfit: ApplicationError, item_ids: list[str]) -> ApplicationError:
    """A step whose items were stored but whose next request does not fit: the refusal names
    the stored ids (details: ``item_ids``), so a client knows the step itself took effect."""
    return ApplicationError(f"{unfit.message}; the step's items were stored all the same (item_ids "
                            f"{', '.join(item_ids)}): do not send them again", {"item_ids": item_ids},
                            type=REQUEST_UNFIT, non_retryable=True)


def unpaired(message: str) -> ApplicationError:
    return rejection(UNPAIRED_TOOL_CALL, message)


def key_reused(key: str) -> ApplicationError:
    return rejection(KEY_REUSED, f"the key {key!r} was already used for a different call; use a new key for new "
                                 "content, or resend exactly the same call to get its result")


def item_id_taken(client_id: str, item_id: str) -> ApplicationError:
    return rejection(ITEM_ID_TAKEN, f"item_id {client_id!r} is already stored (as {item_id}) with other content; "
                                    "an item id names one item: send new content under a new id")


def store_conflict(item_ids: list[str]) -> ApplicationError:
    return rejection(STORE_CONFLICT, f"the items could not be stored: their ids ({', '.join(item_ids[:3])}...) were "
                                     "taken by other content on every try; nothing was stored, send the call again")


def handing_over(action: str) -> ApplicationError:
    return rejection(HANDING_OVER, f"{action}: the session is handing over to its next run; retry in a moment")


def still_starting(what: str) -> ApplicationError:
    return conflict(f"the {what} {STILL_STARTING}")


def from_engine(error: EngineError, action: str | None = None) -> ApplicationError:
    """An engine refusal: a conflict when the lane's state is why, else invalid input."""
    message = str(error) if action is None else f"{action} rejected: {error}"
    return rejection(CONFLICT if error.conflict else INVALID_INPUT, message)


def engine_call(fn, *args):
    """Engine refusals (bad episode transitions...) fail the update, typed, never the workflow task."""
    with engine_refusals():
        return fn(*args)


@contextmanager
def engine_refusals() -> Iterator[None]:
    """An engine refusal inside becomes the typed rejection of the update (never a failed
    workflow task, which would retry for ever and freeze the session)."""
    try:
        yield
    except EngineError as error:
        raise from_engine(error) from None
