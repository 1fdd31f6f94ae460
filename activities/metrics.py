"""Prometheus metrics of the worker process.

Everything lives in one dedicated :data:`REGISTRY` (not prometheus_client's global
one), so tests read values with ``REGISTRY.get_sample_value(...)`` and a process that
imports this module twice never registers a metric twice. The worker exposes it on
``/metrics`` when ``LANES_METRICS_PORT`` is set (:func:`start_metrics_server`).

Metrics (label values are short, bounded vocabularies; never ids or content):

=====================================================  =========================================
``lanes_compactions_total{mode,outcome}``              compaction/condensation events logged
``lanes_compaction_tokens_reclaimed_total{mode}``      tokens_before - tokens_after, applied ones
``lanes_condensations_total{status}``                  LLM condensation activity outcomes
``lanes_condensation_failures_total{status}``          the ones that were not ``succeeded``
``lanes_condensation_latency_seconds{status}``         histogram, whole activity
``lanes_model_call_latency_seconds{purpose,outcome}``  histogram, one HTTP model call
``lanes_model_call_errors_total{purpose,type}``        failed model calls by error type
``lanes_tool_runs_total{tool_class,outcome}``          tool runs by eviction class, ok / error
``lanes_model_tokens_total{purpose,model,type}``       provider-reported tokens: prompt, cached, completion
``lanes_model_cost_units_total{purpose,model}``        cost units of those tokens (configured prices)
``lanes_token_estimate_ratio{purpose,model}``          histogram, provider prompt tokens / our count
=====================================================  =========================================

Counters are at-least-once: an activity retried by Temporal counts again.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from temporalio.exceptions import ApplicationError

from workflows.context import CallUsage

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)

COMPACTIONS = Counter(
    "lanes_compactions", "Compaction and condensation attempts recorded in the event log.",
    ("mode", "outcome"), registry=REGISTRY)
TOKENS_RECLAIMED = Counter(
    "lanes_compaction_tokens_reclaimed", "Working-set tokens reclaimed by applied compactions "
    "(tokens_before - tokens_after).", ("mode",), registry=REGISTRY)
CONDENSATIONS = Counter(
    "lanes_condensations", "LLM condensation activity outcomes.", ("status",), registry=REGISTRY)
CONDENSATION_FAILURES = Counter(
    "lanes_condensation_failures", "LLM condensations that did not succeed, by status "
    "(invalid, oversized, unavailable, failed, rejected).", ("status",), registry=REGISTRY)
CONDENSATION_LATENCY = Histogram(
    "lanes_condensation_latency_seconds", "Duration of one LLM condensation activity attempt.",
    ("status",), buckets=_LATENCY_BUCKETS, registry=REGISTRY)
MODEL_CALL_LATENCY = Histogram(
    "lanes_model_call_latency_seconds", "Duration of one model HTTP call.",
    ("purpose", "outcome"), buckets=_LATENCY_BUCKETS, registry=REGISTRY)
MODEL_CALL_ERRORS = Counter(
    "lanes_model_call_errors", "Failed model calls by error type.", ("purpose", "type"), registry=REGISTRY)
TOOL_RUNS = Counter(
    "lanes_tool_runs", "Tool runs by eviction class and outcome.", ("tool_class", "outcome"), registry=REGISTRY)

MODEL_TOKENS = Counter(
    "lanes_model_tokens", "Tokens the provider reported for model calls, by type (prompt, cached, completion).",
    ("purpose", "model", "type"), registry=REGISTRY)
MODEL_COST = Counter(
    "lanes_model_cost_units", "Cost units of the provider-reported tokens (LANES_PRICES).", ("purpose", "model"),
    registry=REGISTRY)
TOKEN_ESTIMATE_RATIO = Histogram(
    "lanes_token_estimate_ratio", "Provider prompt tokens / our count of the request, per call.",
    ("purpose", "model"), buckets=(0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0, 4.0),
    registry=REGISTRY)

_LABEL_RE = re.compile(r"[^A-Za-z0-9_.:-]+")
_COMPACTION_PREFIXES = ("context.compaction.", "context.condense.")


def _label(value: Any, default: str = "unknown") -> str:
    """A bounded label value: no ids, no content, at most 48 characters."""
    text = _LABEL_RE.sub("_", str(value)).strip("_") if value is not None else ""
    return text[:48] or default


# --- compactions (from the event log) --------------------------------------------

def observe_compaction_event(kind: str, payload: Mapping[str, Any] | None) -> bool:
    """Count one ``context.compaction.*`` / ``context.condense.*`` event; other kinds are
    ignored. Returns whether it counted.

    ``context.compaction.<mode>``: outcome = payload ``outcome``/``status`` when present,
    else ``applied`` / ``not-applied`` from payload ``applied``; an applied one adds
    ``tokens_before - tokens_after`` to the reclaimed tokens.
    ``context.condense.<status>`` (a refused explicit condensation): mode ``explicit``.
    """
    payload = payload or {}
    if kind.startswith("context.condense."):
        mode, outcome = "explicit", _label(kind.removeprefix("context.condense."))
    elif kind.startswith("context.compaction."):
        mode = _label(kind.removeprefix("context.compaction."))
        explicit = payload.get("outcome") or payload.get("status")
        applied = bool(payload.get("applied"))
        outcome = _label(explicit) if explicit else ("applied" if applied else "not-applied")
        if applied:
            before, after = payload.get("tokens_before"), payload.get("tokens_after")
            if isinstance(before, int) and isinstance(after, int) and before > after:
                TOKENS_RECLAIMED.labels(mode=mode).inc(before - after)
    else:
        return False
    COMPACTIONS.labels(mode=mode, outcome=outcome).inc()
    return True


def observe_events(events) -> int:
    """Count the compaction events among ``events`` (objects or dicts with ``kind`` and
    ``payload``), and the usage external agents reported (``model.usage`` with source
    ``agent``: no activity of ours made that call, so no other place counts it); returns how
    many counted. For the activities that write events."""
    counted = 0
    for event in events:
        kind = event.get("kind") if isinstance(event, Mapping) else getattr(event, "kind", None)
        payload = event.get("payload") if isinstance(event, Mapping) else getattr(event, "payload", None)
        if isinstance(kind, str) and kind.startswith(_COMPACTION_PREFIXES):
            counted += observe_compaction_event(kind, payload)
        elif kind == "model.usage" and isinstance(payload, Mapping) and payload.get("source") == "agent":
            observe_usage(str(payload.get("kind")), str(payload.get("model")),
                          CallUsage.model_validate({k: v for k, v in payload.items() if k in CallUsage.model_fields}))
            counted += 1
    return counted


# --- LLM condensation ----------------------------------------------------------------

def observe_condensation(outcome: Any) -> None:
    """Count a ``CondensationOutcome`` (status, latency_ms) the activity returned."""
    status = _label(getattr(outcome, "status", None))
    latency_ms = getattr(outcome, "latency_ms", 0) or 0
    CONDENSATIONS.labels(status=status).inc()
    CONDENSATION_LATENCY.labels(status=status).observe(max(0.0, latency_ms / 1000))
    if status != "succeeded":
        CONDENSATION_FAILURES.labels(status=status).inc()


def observe_condensation_error(error: BaseException, seconds: float) -> None:
    """Count a condensation attempt that raised: ``rejected`` when non-retryable
    (the workflow falls back at once), else ``failed`` (Temporal may retry it)."""
    status = "rejected" if isinstance(error, ApplicationError) and error.non_retryable else "failed"
    CONDENSATIONS.labels(status=status).inc()
    CONDENSATION_LATENCY.labels(status=status).observe(max(0.0, seconds))
    CONDENSATION_FAILURES.labels(status=status).inc()


# --- model calls and tool runs ------------------------------------------------------

def error_type(error: BaseException) -> str:
    if isinstance(error, ApplicationError) and error.type:
        return error.type
    return type(error).__name__


def observe_model_call(purpose: str, seconds: float, error: BaseException | str | None = None) -> None:
    """One model HTTP call (``purpose``: ``agent`` or ``condenser``) and its error, if any."""
    outcome = "ok" if error is None else "error"
    MODEL_CALL_LATENCY.labels(purpose=_label(purpose), outcome=outcome).observe(max(0.0, seconds))
    if error is not None:
        kind = error if isinstance(error, str) else error_type(error)
        MODEL_CALL_ERRORS.labels(purpose=_label(purpose), type=_label(kind)).inc()


@contextlib.contextmanager
def model_call_timer(purpose: str = "agent") -> Iterator[None]:
    """Time the block as one model call; an exception leaving it counts as an error
    of its type (``ApplicationError.type`` when mapped) and is re-raised."""
    start = time.monotonic()
    try:
        yield
    except BaseException as error:
        observe_model_call(purpose, time.monotonic() - start, error)
        raise
    observe_model_call(purpose, time.monotonic() - start)


def observe_tool_run(tool_class: Any, exit_code: int | None = None) -> None:
    """One tool run; ``tool_class`` is the item's ToolClass (write/read/run/error)."""
    value = getattr(tool_class, "value", tool_class)
    outcome = "ok" if not exit_code else "error"
    TOOL_RUNS.labels(tool_class=_label(value, "none"), outcome=outcome).inc()


def observe_usage(purpose: str, model: str, usage: Any) -> None:
    """Provider-reported usage of a call (a ``CallUsage``): tokens by type, cost units, and
    the ratio of the provider's prompt count to ours when both are known."""
    labels = {"purpose": _label(purpose), "model": _label(model)}
    for kind in ("prompt", "cached", "completion"):
        count = getattr(usage, kind, 0) or 0
        if count > 0:
            MODEL_TOKENS.labels(**labels, type=kind).inc(count)
    if (usage.cost or 0) > 0:
        MODEL_COST.labels(**labels).inc(usage.cost)
    if usage.reported and usage.prompt > 0 and usage.estimate > 0:
        TOKEN_ESTIMATE_RATIO.labels(**labels).observe(usage.prompt / usage.estimate)


# --- exposition ---------------------------------------------------------------------

_server_lock = threading.Lock()
_servers: dict[int, Any] = {}


def start_metrics_server(port: int, addr: str = "0.0.0.0") -> int:
    """Serve :data:`REGISTRY` on ``http://addr:port/metrics`` from a daemon thread.

    Idempotent per port within a process. ``port=0`` picks a free port; returns the port.
    """
    with _server_lock:
        if port and port in _servers:
            return port
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=addr, registry=REGISTRY)
        bound = server.server_address[1]
        _servers[bound] = server
        return bound


def metrics_text() -> bytes:
    """The registry in Prometheus text format (for an HTTP endpoint or a test)."""
    return generate_latest(REGISTRY)
