"""The worker process: runs SessionWorkflow and every activity on one task queue.

``lanes worker`` runs one; ``lanes dev`` and ``lanes demo`` start one as a child
process so that it can be killed and replaced while sessions carry on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from datetime import timedelta

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities import ingest, model, tools
from activities.runtime import configure_runtime
from activities.store import close_stores
from worker.settings import Settings, get_settings
from workflows.session import SessionWorkflow

log = logging.getLogger("lanes.worker")

ACTIVITIES = [
    ingest.start_session,
    ingest.store_user_message,
    ingest.measure_texts,
    ingest.store_generated_items,
    ingest.record_events,
    ingest.ingest_items,
    ingest.save_checkpoint,
    ingest.load_checkpoint,
    model.call_model,
    tools.run_tool,
]
WORKFLOWS = [SessionWorkflow]


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
    )


def build_worker(client: Client, settings: Settings, **options) -> Worker:
    configure_runtime(settings)
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        # Let in-flight activities finish on SIGTERM before the worker goes away.
        graceful_shutdown_timeout=timedelta(seconds=settings.shutdown_grace_seconds),
        **options,
    )


async def run_worker(settings: Settings | None = None) -> None:
    settings = settings or get_settings()
    client = await connect(settings)
    worker = build_worker(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling %s on %s", settings.task_queue, settings.temporal_address)
    async with worker:
        print(f"worker ready pid={os.getpid()} queue={settings.task_queue}", flush=True)
        await stop.wait()
    await close_stores()


def main() -> None:
    logging.basicConfig(level=os.environ.get("LANES_LOG_LEVEL", "WARNING"))
    code = 0
    try:
        asyncio.run(run_worker())
    except Exception:
        log.exception("worker failed")
        code = 1
    # The SDK can abort at interpreter exit and spoil exit codes (DESIGN §4).
    os._exit(code)


if __name__ == "__main__":
    main()
