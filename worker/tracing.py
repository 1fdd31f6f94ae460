"""Optional OpenTelemetry tracing of workflows and activities (Temporal's ``TracingInterceptor``).

Off unless ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``, or any other
the installed packages register). Then the process installs an SDK tracer provider built
from the standard ``OTEL_*`` variables (the exporters read their endpoint, headers and
protocol themselves; the resource reads ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``,
the provider ``OTEL_TRACES_SAMPLER``), and every Temporal client made by :func:`connect
<worker.worker.connect>` carries the interceptor, and so do the workers built on it. The
SDK comes with the ``tracing`` extra; asking for tracing without it is
:class:`TracingUnavailable`, one line naming the extra.

A provider already installed in the process (``opentelemetry-instrument``, a test) is used
as it is. The interceptor only makes spans for workflows started by a traced client (no
orphans after replay): a session's spans hang off the ``StartWorkflow`` span of the call that
created it, itself a child of FastAPI's span for that HTTP request in the API process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worker.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import TracingInterceptor

log = logging.getLogger("lanes.tracing")

EXTRA = "tracing"
INSTALL_HINT = f"pip install 'context-lanes[{EXTRA}]'"
DEFAULT_SERVICE = "context-lanes"
TRACER_NAME = "context-lanes"
# the SDK's own names for OTLP (its auto-configuration's): `otlp` picks the protocol
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}

_lock = threading.Lock()
_provider: TracerProvider | None = None  # the process's, once configured
_owned = False  # installed by us (so flushed and shut down by us)


class TracingUnavailable(Exception):
    """Tracing is asked for but cannot run here: one line for the user, no traceback."""


def enabled(settings: Settings) -> bool:
    return bool(settings.traces_exporter)


def _sdk() -> Any:
    """The SDK's trace module, or TracingUnavailable naming the extra."""
    try:
        import opentelemetry.sdk.trace as sdk_trace
        import temporalio.contrib.opentelemetry  # noqa: F401  (needs opentelemetry-api, also from the extra)
    except ImportError as exc:
        raise TracingUnavailable(
            f"tracing is on (OTEL_TRACES_EXPORTER is set) but the OpenTelemetry SDK is not installed ({exc}); "
            f"install the `{EXTRA}` extra: {INSTALL_HINT}, or unset OTEL_TRACES_EXPORTER") from None
    return sdk_trace


def _drop_empty_otel_variables() -> None:
    # Deployments list every variable with an empty default ("empty means unset", like the
    # settings); the SDK would read OTEL_EXPORTER_OTLP_ENDPOINT="" as an endpoint.
    for name in [n for n, v in os.environ.items() if n.startswith("OTEL_") and not v.strip()]:
        del os.environ[name]


def _entry_point_name(name: str) -> str:
    if name != "otlp":
        return name
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "grpc").strip()
    if protocol not in _OTLP_BY_PROTOCOL:
        raise TracingUnavailable(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not one of {', '.join(_OTLP_BY_PROTOCOL)}")
    return _OTLP_BY_PROTOCOL[protocol]


def check(settings: Settings) -> None:
    """Before a process starts others that would trace (``lanes dev``, ``lanes demo``): the SDK
    and every named exporter are installed, else TracingUnavailable, one line naming the
    extra (instead of a child process failing with it in its log)."""
    if not enabled(settings):
        return
    from importlib.metadata import entry_points

    _sdk()
    for name in settings.traces_exporter:
        if not list(entry_points(group="opentelemetry_traces_exporter", name=_entry_point_name(name))):
            raise _unknown_exporter(name)


def span_exporters(names: Sequence[str]) -> list[SpanExporter]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names, found as the SDK's auto-configuration finds
    them (entry points ``opentelemetry_traces_exporter``), each built from the environment."""
    from importlib.metadata import entry_points

    _sdk()
    exporters = []
    for name in names:
        found = list(entry_points(group="opentelemetry_traces_exporter", name=_entry_point_name(name)))
        if not found:
            raise _unknown_exporter(name)
        exporters.append(found[0].load()())
    return exporters


def _unknown_exporter(name: str) -> TracingUnavailable:
    from importlib.metadata import entry_points

    known = sorted(e.name for e in entry_points(group="opentelemetry_traces_exporter"))
    return TracingUnavailable(f"OTEL_TRACES_EXPORTER names {name!r}, which no installed package provides "
                              f"(installed: {', '.join(known) or 'none'}; {INSTALL_HINT} brings otlp and console)")


def resource(service: str) -> Resource:
    """The process's resource: OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over ``service``."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    detected = Resource.create()
    if str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        detected = detected.merge(Resource({SERVICE_NAME: service}))
    return detected


def configure(settings: Settings, service: str = DEFAULT_SERVICE) -> TracerProvider | None:
    """The process's tracer provider when tracing is on (set up from the environment the first
    time, then the same), None when it is off. Raises TracingUnavailable."""
    global _provider, _owned
    if not enabled(settings):
        return None
    sdk_trace = _sdk()
    with _lock:
        if _provider is not None:
            return _provider
        from opentelemetry import trace
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        current = trace.get_tracer_provider()
        if isinstance(current, sdk_trace.TracerProvider):  # someone else's: theirs to export and flush
            _provider = current
            return current
        _drop_empty_otel_variables()
        provider = sdk_trace.TracerProvider(resource=resource(service), shutdown_on_exit=False)
        for exporter in span_exporters(settings.traces_exporter):
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _provider, _owned = provider, True
        log.info("tracing: %s spans of %s", ", ".join(settings.traces_exporter), service)
        return provider


def interceptors(settings: Settings, provider: TracerProvider | None = None) -> list[TracingInterceptor]:
    """For ``Client.connect``: Temporal's tracing interceptor (the client's workers take it
    too), or nothing when tracing is off. ``provider``: where spans go (default: the process's)."""
    provider = provider if provider is not None else configure(settings)
    if provider is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(provider.get_tracer(TRACER_NAME))]


def shutdown() -> None:
    """Export the spans still buffered (the processes leave through os._exit, which skips atexit)."""
    global _provider, _owned
    with _lock:
        provider, owned = _provider, _owned
        _provider, _owned = None, False
    if provider is not None and owned:
        try:
            provider.shutdown()
        except Exception as exc:  # an unreachable collector must not spoil the exit
            log.warning("tracing: spans not exported at exit: %s", exc)
