"""The worker process: runs SessionWorkflow and every activity on one task queue.

``lanes worker`` runs one; ``lanes dev`` and ``lanes demo`` start one as a child
process so that it can be killed and replaced while sessions carry on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.condense import CondenseActivities
from activities.events import EventActivities
from activities.failures import ConciseFailures
from activities.items import ItemActivities
from activities.lanes import LaneActivities, LaneInspector
from activities.model import ModelActivities
from activities.provider import ModelClients
from activities.runtime import ActivityGroup, ActivitySettings, StoreSource, store_source
from activities.sessions import SessionActivities
from activities.tools import ToolActivities
from activities.workspace import sandbox_status
from worker import payload_visits, tracing
from worker.payload_codec import DATA_CONVERTER
from worker.settings import Settings, get_settings
from worker.workflow_runner import workflow_runner
from workflows.lane_workflow import LaneWorkflow
from workflows.session import SessionWorkflow

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("lanes.worker")

# On SIGTERM/SIGINT in-flight activities get LANES_SHUTDOWN_GRACE_SECONDS to finish (the
# SDK then cancels them; Temporal retries them on another worker). The SDK's own shutdown
# and closing the store come after that; if the whole shutdown overruns the grace by this
# much (an activity that ignores cancellation, a hung connection), the process exits
# anyway with code 1: its activities are retried elsewhere after their heartbeat timeout.
# Keep grace + slack below the orchestrator's kill deadline (Kubernetes
# terminationGracePeriodSeconds, compose stop_grace_period: grace + 20 s).
SHUTDOWN_SLACK_SECONDS = 15.0

WORKFLOWS = [SessionWorkflow, LaneWorkflow]


def activity_objects(client: Client, settings: ActivitySettings, stores: StoreSource) -> list[object]:
    """Every activity class, built once with what it uses (one store and one set of model
    clients for all of them); ``describe_lanes`` asks Temporal with this worker's client."""
    clients = ModelClients()
    return [
        SessionActivities(settings, stores), ItemActivities(settings, stores), EventActivities(settings, stores),
        ModelActivities(settings, stores, clients), ToolActivities(settings, stores),
        CondenseActivities(settings, stores, clients), LaneActivities(settings, stores), LaneInspector(client),
    ]


def activity_methods(objects: list[object]) -> list[Callable[..., Any]]:
    """The bound activity methods of ``objects`` (what ``Worker(activities=...)`` takes): exactly
    the names ``workflows.activity_calls.ACTIVITY_NAMES`` calls (tests/test_layout.py)."""
    return [getattr(obj, name) for obj in objects for name in dir(type(obj))
            if not name.startswith("_") and activity._Definition.from_callable(getattr(type(obj), name)) is not None]


class LanesWorker(Worker):
    """The worker, which closes the store its activities opened when it stops."""

    def __init__(self, client: Client, *, stores: StoreSource, objects: list[object], **options: Any) -> None:
        super().__init__(client, activities=activity_methods(objects), **options)
        self.stores = stores
        self.objects = objects

    def use_settings(self, settings: ActivitySettings) -> None:
        """Run the activities with other settings from now on (tests point them at their own
        model endpoint); the store stays the one opened."""
        for obj in self.objects:
            if isinstance(obj, ActivityGroup):
                obj.settings = settings

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await super().__aexit__(*exc)
        finally:
            await close_stores(self.stores)


async def close_stores(stores: StoreSource) -> None:
    """The last step of a shutdown (a test replaces it with one that hangs)."""
    await stores.close()


class CannotConnect(Exception):
    """Temporal is not reachable: one line for the user, no traceback."""


async def connect(settings: Settings, *, tracer_provider: TracerProvider | None = None) -> Client:
    """A client of the settings' Temporal; traced when tracing is on (OTEL_TRACES_EXPORTER) or
    when given a tracer provider (tests), and so are the workers built on it."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=DATA_CONVERTER,
        interceptors=tracing.interceptors(settings, tracer_provider),
    )


def concurrency(settings: Settings) -> dict[str, int]:
    """The worker's share of the work at once (LANES_MAX_CONCURRENT_*, LANES_MAX_CACHED_WORKFLOWS)."""
    return {"max_concurrent_workflow_tasks": settings.max_concurrent_workflow_tasks,
            "max_concurrent_activities": settings.max_concurrent_activities,
            "max_cached_workflows": settings.max_cached_workflows}


def build_worker(client: Client, settings: Settings, **options: Any) -> LanesWorker:
    payload_visits.install()  # no walk over an activation's payloads that cannot change one
    stores = store_source(settings)
    return LanesWorker(
        client,
        stores=stores,
        objects=activity_objects(client, settings, stores),
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(),  # the SDK's sandbox, without its cost per payload
        interceptors=[ConciseFailures()],  # failures that fit history, traces in the worker's log
        # Let in-flight activities finish on SIGTERM before the worker goes away.
        graceful_shutdown_timeout=timedelta(seconds=settings.shutdown_grace_seconds),
        **{**concurrency(settings), **options},
    )


async def run_worker(settings: Settings | None = None) -> None:
    settings = settings or get_settings()
    tracing.configure(settings, "context-lanes-worker")  # before anything else: a missing extra is one line
    # Prometheus metrics (activities/metrics.py) on http://0.0.0.0:$LANES_METRICS_PORT/metrics, when set.
    if metrics_port := os.environ.get("LANES_METRICS_PORT", "").strip():
        from activities.metrics import start_metrics_server

        log.info("metrics on port %d", start_metrics_server(int(metrics_port)))
    assert settings.workspace_root is not None  # resolved by Settings
    usable, status = sandbox_status(settings.unsafe_no_sandbox, settings.workspace_root)
    (log.info if usable else log.warning)("%s", status)
    try:
        client = await connect(settings)
    except Exception as exc:  # the SDK's message is enough; its transport traceback is not for users
        raise CannotConnect(f"cannot connect to Temporal at {settings.temporal_address} ({exc}); "
                            "start it with `lanes dev` or set TEMPORAL_ADDRESS") from None
    worker = build_worker(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    grace = settings.shutdown_grace_seconds

    def request_stop(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s: stopping; in-flight activities have %gs to finish", sig.name, grace)
            _exit_if_still_running_after(grace + SHUTDOWN_SLACK_SECONDS)
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop, sig)
    log.info("worker polling %s on %s", settings.task_queue, settings.temporal_address)
    async with worker:
        print(f"worker ready pid={os.getpid()} queue={settings.task_queue}", flush=True)
        await stop.wait()
    tracing.shutdown()


def _exit_if_still_running_after(seconds: float) -> None:
    """Hard deadline for a shutdown: a thread, so that it fires even if the loop is stuck."""
    def expire() -> None:
        log.error("shutdown still not finished %gs after the signal: exiting anyway", seconds)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def main() -> None:
    logging.basicConfig(level=os.environ.get("LANES_LOG_LEVEL", "WARNING"))
    code = 0
    try:
        asyncio.run(run_worker())
    except CannotConnect as exc:
        print(f"lanes worker: {exc}", file=sys.stderr, flush=True)
        code = 1
    except tracing.TracingUnavailable as exc:
        print(f"lanes worker: {exc}", file=sys.stderr, flush=True)
        code = 2
    except Exception:
        log.exception("worker failed")
        code = 1
    # The SDK can abort at interpreter exit and spoil exit codes (DESIGN §4).
    os._exit(code)


if __name__ == "__main__":
    main()
