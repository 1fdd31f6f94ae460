"""OpenTelemetry tracing (worker/tracing.py): a session's trace from its HTTP call through its
workflow to its activities, the exporter from the environment, and a clear refusal without the SDK."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from recordings import Trajectory
from tests.api.stack import CHECKOUT_PYTHONPATH, REPO, replay_body
from worker import tracing
from worker.api.app import create_app
from worker.local.stack import free_port
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import build_worker, connect

TOKEN = "token-tracing-0123456789"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    # the test's own provider, never the process's global one: other tests stay untraced
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


async def test_a_hosted_session_is_one_trace_from_its_http_call_to_its_activities(
        queue_settings: Settings, provider: TracerProvider, exporter: InMemorySpanExporter,
        short_trajectory: Trajectory, replay_server: ReplayModelServer):
    client = await connect(queue_settings, tracer_provider=provider)
    app = create_app(queue_settings, client=client, tokens={TOKEN: "tenant"}, allow_replay=True,
                     tracer_provider=provider)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                             headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    try:
        async with build_worker(client, queue_settings), http:  # the worker takes the client's interceptor
            created = await http.post("/v1/sessions", json=replay_body(short_trajectory, replay_server))
            assert created.status_code == 201, created.text
            sid = created.json()["session_id"]
            sent = await http.post(f"/v1/sessions/{sid}/messages", params={"wait": 60},
                                   json={"text": short_trajectory.task})
            assert sent.status_code == 200, sent.text
            assert sent.json()["task"]["state"] == "completed"
            await client.get_workflow_handle(sid).terminate("test over")
    finally:
        await app.state.backend.close()
    provider.force_flush()
    spans = [s for s in exporter.get_finished_spans() if s.attributes.get("temporalWorkflowID", sid) == sid]
    by_id = {s.context.span_id: s for s in spans}
    names = Counter(s.name for s in spans)

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None, f"{span.name} has no parent"
        return by_id[span.parent.span_id]

    def request(span: ReadableSpan) -> ReadableSpan:
        """The HTTP call a client span was made in: its root, FastAPI's span of the request."""
        while span.parent is not None:
            span = parent(span)
        assert span.kind == SpanKind.SERVER, span.name
        return span

    # the session's creation: the client's StartWorkflow inside FastAPI's span of the HTTP call
    [start] = [s for s in spans if s.name == "StartWorkflow:SessionWorkflow"]
    assert request(start).name == "POST /v1/sessions"
    trace_id = start.context.trace_id
    # the workflow and every activity it scheduled hang off that StartWorkflow, in the same trace
    [run] = [s for s in spans if s.name == "RunWorkflow:SessionWorkflow"]
    assert parent(run) is start
    turns = len(short_trajectory.turns) + 1  # every recorded model call and the final answer
    assert names["RunActivity:call_model"] == names["StartActivity:call_model"] == turns
    assert names["RunActivity:run_tool"] == sum(len(t.tool_calls) for t in short_trajectory.turns) > 0
    for span in spans:
        if span.name.startswith("RunActivity:"):
            scheduled = parent(span)
            assert scheduled.name == span.name.replace("RunActivity:", "StartActivity:")
            assert parent(scheduled) is start
            assert span.context.trace_id == trace_id
            assert span.attributes["temporalWorkflowID"] == sid
    # the message is an update: a trace of its own (its HTTP call), linked from the workflow's handler
    [update] = [s for s in spans if s.name == "StartWorkflowUpdate:submit"]
    assert request(update).name == "POST /v1/sessions/{session_id}/messages" and update.context.trace_id != trace_id
    [handled] = [s for s in spans if s.name == "HandleUpdate:submit"]
    assert parent(handled) is start
    assert [link.context.span_id for link in handled.links] == [update.context.span_id]


def test_tracing_is_off_unless_the_exporter_variable_names_one(monkeypatch):
    for value in ("", "none", " None "):
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", value)
        settings = Settings(_env_file=None)
        assert settings.traces_exporter == [] and tracing.configure(settings) is None
        assert tracing.interceptors(settings) == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "OTLP, console")
    assert Settings(_env_file=None).traces_exporter == ["otlp", "console"]


def test_exporters_come_from_the_standard_variables(monkeypatch):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    grpc, console = tracing.span_exporters(["otlp", "console"])
    assert isinstance(grpc, GrpcExporter) and isinstance(console, ConsoleSpanExporter)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    [http_exporter] = tracing.span_exporters(["otlp"])
    assert isinstance(http_exporter, HttpExporter)
    assert http_exporter._endpoint == "http://collector.example:4318/v1/traces"
    with pytest.raises(tracing.TracingUnavailable, match="'zipkin'.*installed: .*console"):
        tracing.span_exporters(["zipkin"])
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with pytest.raises(tracing.TracingUnavailable, match="carrier-pigeon"):
        tracing.span_exporters(["otlp"])


def test_the_service_name_defaults_to_the_role_and_the_environment_wins(monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert tracing.resource("context-lanes-worker").attributes["service.name"] == "context-lanes-worker"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "lanes-eu")
    assert tracing.resource("context-lanes-worker").attributes["service.name"] == "lanes-eu"


# Blocks the SDK as if the `tracing` extra were not installed, then runs a CLI command.
WITHOUT_SDK = """
import sys
sys.modules["opentelemetry.sdk"] = None  # `import opentelemetry.sdk...` now raises ImportError
from worker.cli import run
sys.exit(run(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", [["worker"], ["api", "--port", str(free_port())]])
def test_asking_for_tracing_without_the_sdk_is_one_line_naming_the_extra(command, tmp_path):
    env = {**os.environ, "PYTHONPATH": CHECKOUT_PYTHONPATH, "OTEL_TRACES_EXPORTER": "otlp",
           "LANES_DATA_DIR": str(tmp_path), "TEMPORAL_ADDRESS": "127.0.0.1:1", "LANES_API_TOKENS": "tenant:token-0123456789"}
    out = subprocess.run([sys.executable, "-c", WITHOUT_SDK, *command], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert f"lanes {command[0]}: tracing is on" in out.stderr
    assert "pip install 'context-lanes[tracing]'" in out.stderr


def test_lanes_dev_refuses_an_exporter_it_cannot_load_before_starting_anything(tmp_path):
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": CHECKOUT_PYTHONPATH, "OTEL_TRACES_EXPORTER": "zipkin"}
    done = subprocess.run([sys.executable, "-m", "worker.cli", "dev", "--data-dir", str(data_dir),
                           "--api-port", str(free_port())], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "'zipkin'" in done.stderr and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert not (data_dir / "postgres").exists() and not (data_dir / "logs").exists()  # nothing was started
