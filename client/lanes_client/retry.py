"""When a failed call is tried again, and after how long: the one policy both clients follow.

Retried: 429 and 503 answers, connection failures and timeouts, with exponential backoff
and full jitter, or after the server's ``Retry-After`` when it gave one (capped by
``max_delay``), until ``max_retries`` retries or ``max_elapsed`` seconds are spent.

A call that may have taken effect is retried only when repeating it is harmless: reads,
and appends carrying an idempotency key or step id (the client gives every append one, so
a retry answers what the first attempt stored). Any other call (creating a session,
sending a message...) is retried only when it certainly did not reach the server: the
connection was refused, or the server answered 429 (busy: it did nothing).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from lanes_client.errors import LanesAPIError

RETRY_STATUSES = frozenset({429, 503})
# The request never left: no connection was made, so nothing can have happened.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3  # retries after the first attempt (0: never retry)
    base_delay: float = 0.5  # the first backoff's ceiling, in seconds; doubles per retry
    max_delay: float = 30.0  # no single wait longer than this (Retry-After included)
    max_elapsed: float = 120.0  # no retry once this many seconds passed since the first attempt

    def backoff(self, retry: int) -> float:
        """Full jitter: uniform in [0, base * 2**retry], capped."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** retry))

    def delay(self, retry: int, failure: BaseException, *, safe: bool, elapsed: float) -> float | None:
        """Seconds to wait before retry number ``retry`` (0-based) after ``failure``; None: give up.

        ``safe``: repeating the call is harmless even if the failed attempt took effect."""
        if retry >= self.max_retries:
            return None
        if isinstance(failure, LanesAPIError):
            if failure.status not in RETRY_STATUSES or (not safe and failure.status != 429):
                return None
            wait = failure.retry_after if failure.retry_after is not None else self.backoff(retry)
        elif isinstance(failure, httpx.TransportError):
            if not safe and not isinstance(failure, NOT_SENT):
                return None
            wait = self.backoff(retry)
        else:
            return None
        wait = min(wait, self.max_delay)
        return None if elapsed + wait > self.max_elapsed else wait


NO_RETRIES = RetryPolicy(max_retries=0)
