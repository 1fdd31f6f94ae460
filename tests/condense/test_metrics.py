"""activities/metrics.py: the helpers move the dedicated registry, and the exporter serves it."""

from __future__ import annotations

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.metrics import REGISTRY
from workflows.context import ToolClass
from workflows.contract.condense import CondensationOutcome
from workflows.contract.events import EventSpec


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_compaction_events_count_and_reclaim_tokens():
    applied = sample("lanes_compactions_total", mode="fallback", outcome="applied")
    not_applied = sample("lanes_compactions_total", mode="llm", outcome="not-applied")
    stale = sample("lanes_compactions_total", mode="explicit", outcome="stale")
    discarded = sample("lanes_compactions_total", mode="llm", outcome="discarded-stale")
    reclaimed = sample("lanes_compaction_tokens_reclaimed_total", mode="fallback")

    events = [
        EventSpec(seq=1, event_id="e1", kind="context.compaction.fallback",
                  payload={"applied": True, "tokens_before": 10_000, "tokens_after": 6_000}),
        EventSpec(seq=2, event_id="e2", kind="context.compaction.llm", payload={"applied": False}),
        EventSpec(seq=3, event_id="e3", kind="context.condense.stale", payload={"reason": "x"}),
        EventSpec(seq=4, event_id="e4", kind="item.archived", payload={"item_id": "itm-1"}),
        {"kind": "context.compaction.llm", "payload": {"outcome": "discarded-stale"}},
    ]
    assert metrics.observe_events(events) == 4

    assert sample("lanes_compactions_total", mode="fallback", outcome="applied") == applied + 1
    assert sample("lanes_compactions_total", mode="llm", outcome="not-applied") == not_applied + 1
    assert sample("lanes_compactions_total", mode="explicit", outcome="stale") == stale + 1
    assert sample("lanes_compactions_total", mode="llm", outcome="discarded-stale") == discarded + 1
    assert sample("lanes_compaction_tokens_reclaimed_total", mode="fallback") == reclaimed + 4_000
    assert metrics.observe_compaction_event("item.added", {}) is False


def test_condensation_outcomes_and_errors():
    ok = sample("lanes_condensations_total", status="succeeded")
    oversized = sample("lanes_condensation_failures_total", status="oversized")
    rejected = sample("lanes_condensation_failures_total", status="rejected")
    latency_sum = sample("lanes_condensation_latency_seconds_sum", status="succeeded")

    metrics.observe_condensation(CondensationOutcome(status="succeeded", latency_ms=1500))
    metrics.observe_condensation(CondensationOutcome(status="oversized"))
    metrics.observe_condensation_error(ApplicationError("no", type="CondenserRejected", non_retryable=True), 0.2)

    assert sample("lanes_condensations_total", status="succeeded") == ok + 1
    assert sample("lanes_condensation_latency_seconds_sum", status="succeeded") == pytest.approx(latency_sum + 1.5)
    assert sample("lanes_condensation_failures_total", status="oversized") == oversized + 1
    assert sample("lanes_condensation_failures_total", status="rejected") == rejected + 1


def test_model_call_timer_and_tool_runs():
    ok = sample("lanes_model_call_latency_seconds_count", purpose="agent", outcome="ok")
    err = sample("lanes_model_call_errors_total", purpose="agent", type="ModelHTTP429")
    tools = sample("lanes_tool_runs_total", tool_class="write", outcome="ok")
    failed_runs = sample("lanes_tool_runs_total", tool_class="error", outcome="error")

    with metrics.model_call_timer("agent"):
        pass
    with pytest.raises(ApplicationError), metrics.model_call_timer("agent"):
        raise ApplicationError("busy", type="ModelHTTP429")
    metrics.observe_tool_run(ToolClass.WRITE, 0)
    metrics.observe_tool_run("error", 2)

    assert sample("lanes_model_call_latency_seconds_count", purpose="agent", outcome="ok") == ok + 1
    assert sample("lanes_model_call_errors_total", purpose="agent", type="ModelHTTP429") == err + 1
    assert sample("lanes_tool_runs_total", tool_class="write", outcome="ok") == tools + 1
    assert sample("lanes_tool_runs_total", tool_class="error", outcome="error") == failed_runs + 1


def test_labels_are_bounded():
    metrics.observe_compaction_event("context.compaction." + "x" * 500 + "\n{}", {"applied": False})
    names = {s.labels.get("mode") for m in REGISTRY.collect() for s in m.samples if s.name == "lanes_compactions_total"}
    assert all(n is None or (len(n) <= 48 and "\n" not in n) for n in names)


def test_exporter_serves_the_registry():
    port = metrics.start_metrics_server(0, addr="127.0.0.1")
    assert metrics.start_metrics_server(port, addr="127.0.0.1") == port  # idempotent
    metrics.observe_tool_run(ToolClass.READ, 0)
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert 'lanes_tool_runs_total{outcome="ok",tool_class="read"}' in body
    assert "lanes_condensation_latency_seconds_bucket" in body
    assert "python_gc_objects_collected_total" not in body  # a dedicated registry, not the global one
