"""PostgreSQL outages on the real stack: sessions stall and resume with nothing lost.

Each test runs its own embedded PostgreSQL (the suite's shared server stays up) and its own
worker process, whose activities wait out an outage only ``OUTAGE_WINDOW`` seconds per
attempt here (240 in production), so that a short real outage spans several attempts of
every activity kind, the heartbeat timeout and Temporal's retries, as a long one does.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from activities.store import Store
from tests.integration.support import replay_config_for, spawn_worker
from tests.recordings import SHORT_TRAJECTORY, load_recording
from worker import sessions
from worker.api.app import create_app
from worker.local.stack import kill_process, start_postgres
from worker.replay.model_server import ReplayModelServer
from workflows.session import SessionWorkflow

OUTAGE_WINDOW = 4.0  # LANES_STORE_OUTAGE_SECONDS of the test's worker


@pytest.fixture
def own_postgres():
    data_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"lanes-outage-{uuid.uuid4().hex[:6]}"  # short socket path
    handles = [start_postgres(data_dir, database="lanes", use_database_url=False)]

    def restart():
        pgdata = handles[-1].pgdata
        assert pgdata is not None
        pidfile = pgdata / "postmaster.pid"
        if pidfile.exists() and not _is_running(_postmaster_pid(pgdata)):
            # A SIGKILLed postmaster whose parent is this sandbox's pid 1, which never reaps:
            # its pid stays taken (a zombie), and PostgreSQL refuses a lock file naming a live
            # pid. Under a real init the pid is gone and PostgreSQL replaces the file itself.
            pidfile.unlink()
        handles[-1].stop()  # forget the dead server (the package would reuse its record); a no-op after a stop
        handles.append(start_postgres(data_dir, use_database_url=False))  # same data, same socket

    yield handles, restart
    handles[-1].stop()
    shutil.rmtree(data_dir, ignore_errors=True)


def _is_running(pid: int) -> bool:
    """The process exists and is no zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


async def _pending_failure(handle) -> str:
    """The last failure of the session's pending activities, once one has failed."""
    while True:
        described = await handle.describe()
        for pending in described.raw_description.pending_activities:
            if pending.last_failure.message:
                return pending.last_failure.message
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("fault", ["stop", "sigkill-postmaster"])
async def test_a_session_outlives_a_postgresql_outage(temporal_client, settings, stack_dir, own_postgres, fault):
    handles, restart = own_postgres
    dsn = handles[0].dsn
    own = settings.model_copy(update={"task_queue": f"lanes-outage-{uuid.uuid4().hex[:8]}", "database_url": dsn,
                                      "store_outage_seconds": OUTAGE_WINDOW})
    trajectory = load_recording(SHORT_TRAJECTORY)
    worker = spawn_worker(own, stack_dir / "logs" / f"outage-{fault}.log")
    try:
        with ReplayModelServer([trajectory]) as server:
            # each answer takes 0.3 s, so the session cannot run past the stop between two polls
            server.set_faults("timeout", count=-1, delay_seconds=0.3)
            session_id = sessions.new_session_id("outage")
            handle = await sessions.start_session(
                temporal_client, replay_config_for(session_id, trajectory, SHORT_TRAJECTORY, server), own.task_queue)
            task_id = await sessions.submit(handle, trajectory.task)
            stopped: list[float] = []

            async def stop_midway(status) -> None:
                if not stopped and status.turns >= 4:
                    stopped.append(time.monotonic())
                    if fault == "stop":
                        handles[-1].stop()
                    else:
                        pgdata = handles[-1].pgdata
                        assert pgdata is not None
                        os.kill(_postmaster_pid(pgdata), signal.SIGKILL)

            waiting = asyncio.create_task(sessions.wait_task(handle, task_id, on_status=stop_midway))
            while not stopped:
                await asyncio.sleep(0.1)
            # the activities say what is down, and the API answers fast, without internals
            message = await asyncio.wait_for(_pending_failure(handle), 60)
            assert "PostgreSQL" in message and "unavailable" in message, message
            app = create_app(own, tokens={"token-xxxxxxxx": "t"})
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
                started = time.monotonic()
                answer = await api.get("/v1/sessions", headers={"Authorization": "Bearer token-xxxxxxxx"})
                took = time.monotonic() - started
            assert answer.status_code == 503 and took < 2.0, (answer.status_code, took)
            assert answer.json()["error"]["message"] == "PostgreSQL is unavailable; retry shortly"
            await asyncio.sleep(max(0.0, stopped[0] + 4 * OUTAGE_WINDOW + 12 - time.monotonic()))
            assert not waiting.done()  # stalled, not failed
            restart()
            status = await asyncio.wait_for(waiting, 240)
        task = next(t for t in status.tasks if t.task_id == task_id)
        assert task.state == "completed", task.error
        assert task.turns == len(trajectory.turns) + 1  # every recorded step, then the end of the recording
        store = await Store.open(dsn)
        try:
            events = await store.list_events(session_id, limit=10_000)
            added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
            assert len(added) == len(set(added))  # nothing stored twice
            assert await store.count_observations(session_id) == len(trajectory.turns)
        finally:
            await store.close()
        await handle.signal(SessionWorkflow.close)
    finally:
        kill_process(worker, signal.SIGKILL)
