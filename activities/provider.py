"""What the model and condenser activities share about OpenAI-compatible providers:
one client per endpoint with SDK retries off (Temporal retries), which HTTP statuses are
worth retrying, how long the provider asks us to wait, and how an overflow looks."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta
from typing import Any

import openai
from openai.types.chat import ChatCompletion
from temporalio.exceptions import ApplicationError

from workflows.contract.failures import CONTEXT_LENGTH_EXCEEDED, MODEL_REQUEST_REJECTED

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


class ModelClients:
    """One client (and its connection pool) per endpoint, key and timeout, for the worker's
    life; built by the worker and shared by the model and condenser activities."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str | None, str | None, float], openai.AsyncOpenAI] = {}

    def client(self, base_url: str | None, api_key: str | None, timeout: float) -> openai.AsyncOpenAI:
        key = (base_url, api_key, timeout)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                                                             timeout=timeout)
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


async def complete(client: openai.AsyncOpenAI, body: dict[str, Any], headers: dict[str, str]) -> ChatCompletion:
    """``client.chat.completions.create(**body)`` without the SDK's request transform: it walks
    every message field by field against its TypedDicts (for plain chat dicts, an identity) and
    was most of the worker's CPU per turn. The same endpoint, body, errors and parsed answer."""
    if not body.get("tools"):
        body = {k: v for k, v in body.items() if k != "tools"}
    return await client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                             options={"headers": headers})


def map_provider_error(error: openai.APIError) -> ApplicationError:
    """Translate a provider error into what Temporal should do about it."""
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if is_context_overflow(error):
            return ApplicationError(
                f"provider rejected the request as too long: {error.message}",
                type=CONTEXT_LENGTH_EXCEEDED,
                non_retryable=True,
            )
        if 400 <= status < 500 and status not in RETRYABLE_STATUS:
            return ApplicationError(
                f"provider rejected the request (HTTP {status}): {error.message}",
                type=MODEL_REQUEST_REJECTED,
                non_retryable=True,
            )
        retry_after = retry_after_seconds(error)
        return ApplicationError(
            f"provider error HTTP {status}: {error.message}",
            type=f"ModelHTTP{status}",
            next_retry_delay=None if retry_after is None else timedelta(seconds=retry_after),
        )
    return ApplicationError(f"model call failed: {type(error).__name__}: {error}", type="ModelUnavailable")


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
