"""What the model and condenser activities share about OpenAI-compatible providers:
one client per endpoint with SDK retries off (Temporal retries), which HTTP statuses are
worth retrying, how long the provider asks us to wait, and how an overflow looks."""

from __future__ import annotations

import email.utils
import functools
from datetime import UTC, datetime

import openai

OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "too many tokens",
    "context window",
)
RETRYABLE_STATUS = {408, 409, 429}


def is_context_overflow(error: openai.APIStatusError) -> bool:
    """HTTP 400 with one of the overflow messages providers use."""
    if error.status_code != 400:
        return False
    code = getattr(error, "code", None) or ""
    text = f"{code} {error.message}".lower()
    return any(marker in text for marker in OVERFLOW_MARKERS)


@functools.lru_cache(maxsize=8)
def client_for(base_url: str | None, api_key: str, timeout: float) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)


def retry_after_seconds(error: openai.APIStatusError) -> float | None:
    """Seconds the provider asks us to wait (Retry-After-Ms, Retry-After in seconds or as
    an HTTP date), or None."""
    headers = error.response.headers if error.response is not None else {}
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
