"""The state of one event stream across its connections (``GET .../events/stream``,
server-sent events), shared by the sync and the async client.

Each event's SSE id is its event id. When a connection drops (or the server ends it before
the caller's ``timeout``), the client connects again with ``Last-Event-ID`` set to the last
id it received, and the server resumes right after it: no event is lost or repeated. The
reconnection waits follow the retry policy, counted from the last event received (a stream
that keeps delivering never runs out of retries).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from lanes_client.endpoints import session_path
from lanes_client.errors import LanesConnectionError, LanesError, LanesTimeout
from lanes_client.retry import RetryPolicy
from lanes_client.schemas import EventOut

# The server sends a keep-alive comment every 15 s: a read silent for longer is a dead connection.
STREAM_TIMEOUT = httpx.Timeout(10.0, read=45.0)


class EventStream:
    def __init__(self, session_id: str, after: int, timeout: float | None, policy: RetryPolicy) -> None:
        self.path = session_path(session_id, "events", "stream")
        self.after = after
        self.last_id: int | None = None  # the last event received
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.policy = policy
        self.failures = 0  # connections in a row that ended without an event
        self.progress = time.monotonic()  # when the stream last delivered (or started)
        self.connections = 0

    def request(self) -> dict[str, Any]:
        """The next connection's query and headers."""
        self.connections += 1
        params: dict[str, Any] = {"after": self.after}
        if self.deadline is not None:
            params["timeout"] = max(0.001, round(self.deadline - time.monotonic(), 3))
        headers = {} if self.last_id is None else {"Last-Event-ID": str(self.last_id)}
        return {"params": params, "headers": headers, "timeout": STREAM_TIMEOUT}

    def accept(self, sse: ServerSentEvent) -> EventOut | None:
        """The log event an SSE carries (None: a server notice or keep-alive)."""
        if sse.event not in ("", "message") or not sse.data:
            return None
        payload = json.loads(sse.data)
        if not isinstance(payload, dict) or "event_id" not in payload:
            return None
        event = EventOut.model_validate(payload)
        self.last_id = int(sse.id) if sse.id and sse.id.isdigit() else event.id
        self.failures = 0
        self.progress = time.monotonic()
        return event

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def reconnect_after(self, failure: BaseException | None) -> float | None:
        """Seconds to wait before connecting again; None: the stream is over. Raises the
        typed error when ``failure`` is not worth retrying or the retries ran out."""
        if self.expired():
            return None
        # An end before the caller's timeout is a drop too (the server ends streams only when asked).
        cause = failure if failure is not None else httpx.RemoteProtocolError("the event stream ended early")
        wait = self.policy.delay(self.failures, cause, safe=True, elapsed=time.monotonic() - self.progress)
        if wait is None:
            raise public_error(cause, self.path)
        self.failures += 1
        if self.deadline is not None:
            wait = min(wait, max(0.0, self.deadline - time.monotonic()))
        return wait


def public_error(error: BaseException, where: str) -> LanesError:
    """The client's error for a failure of the transport (or the API's error as it is)."""
    if isinstance(error, LanesError):
        return error
    if isinstance(error, httpx.TimeoutException):
        return LanesTimeout(f"no answer in time from {where}: {type(error).__name__}: {error}")
    return LanesConnectionError(f"cannot reach {where}: {type(error).__name__}: {error}")

