"""Helpers for worker-process tests: worker processes, replayed sessions, what Temporal
and PostgreSQL recorded about them."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from activities.store import Store
from recordings import Trajectory, recorded_outputs
from tests.integration.support import REPO, worker_env
from tests.recordings import SHORT_TRAJECTORY
from worker import sessions
from worker.local.stack import kill_process, popen_group
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from workflows.context import ItemContent
from workflows.contract.session import ReplaySpec, SessionConfig, SessionStatus

# 16 recorded tool-calling steps, 30 k characters of tool output: short enough to run
# several sessions per test
READY_TIMEOUT = 60.0  # a worker's start on a loaded machine
SESSION_TIMEOUT = 300.0


# --- worker processes -------------------------------------------------------------------

@dataclass
class WorkerProcess:
    """A ``python -m worker.worker`` child in its own process group."""

    proc: subprocess.Popen
    log_path: Path
    log_start: int

    @classmethod
    def start(cls, settings: Settings, log_path: Path, env: dict[str, str] | None = None) -> WorkerProcess:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = log_path.stat().st_size if log_path.exists() else 0
        proc = popen_group([sys.executable, "-m", "worker.worker"], log_path,
                           env={**worker_env(settings), **(env or {})}, cwd=REPO)
        return cls(proc, log_path, start)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def identity(self) -> str:
        """The Temporal identity the worker reports (the SDK's default: ``pid@host``)."""
        return f"{self.proc.pid}@{socket.gethostname()}"

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return "(no log)"

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until the worker prints that it polls (its ``async with worker`` is entered)."""
        deadline = time.monotonic() + timeout
        while f"worker ready pid={self.pid}" not in self.log():
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.pid} exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {self.pid} not ready after {timeout:.0f}s:\n{self.log()}")
            await asyncio.sleep(0.1)

    async def terminate(self, timeout: float) -> tuple[int | None, float]:
        """SIGTERM the worker (the process alone, as tini or the kubelet would) and wait
        up to ``timeout`` seconds; returns (exit code or None if still running, seconds)."""
        started = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)
        deadline = started + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.proc.poll(), time.monotonic() - started

    def kill(self) -> None:
        kill_process(self.proc, signal.SIGKILL, grace=10)


async def ready(*workers: WorkerProcess) -> None:
    await asyncio.gather(*(w.wait_ready() for w in workers))


# --- replayed sessions ------------------------------------------------------------------

def replay_config(session_id: str, trajectory: Trajectory, path: Path, server: ReplayModelServer,
                  **overrides) -> SessionConfig:
    return SessionConfig(
        session_id=session_id,
        model="replay",
        system_prompt=trajectory.system or "You are a helpful assistant.",
        replay=ReplaySpec(trajectory_path=str(path), trajectory_id=trajectory.id, model_base_url=server.base_url),
        **overrides,
    )


async def start_replayed(client: Client, settings: Settings, trajectory: Trajectory, server: ReplayModelServer,
                         path: Path = SHORT_TRAJECTORY, prefix: str = "wk", **overrides) -> tuple[WorkflowHandle, str]:
    """Start a replayed session and submit its recorded task: (handle, task id).

    The handle names no run, so that it follows the session across continue-as-new."""
    started = await sessions.start_session(
        client, replay_config(sessions.new_session_id(prefix), trajectory, path, server, **overrides),
        settings.task_queue)
    task_id = await sessions.submit(started, trajectory.task)
    return client.get_workflow_handle(started.id), task_id


async def wait_done(handle: WorkflowHandle, task_id: str, timeout: float = SESSION_TIMEOUT) -> SessionStatus:
    return await asyncio.wait_for(sessions.wait_task(handle, task_id, poll=0.5), timeout=timeout)


async def pending_activity(handle: WorkflowHandle, activity_type: str, timeout: float = 30.0):
    """The pending activity of that type once a worker has started it (PendingActivityInfo)."""
    deadline = time.monotonic() + timeout
    while True:
        desc = await handle.describe()
        for info in desc.raw_description.pending_activities:
            if info.activity_type.name == activity_type and info.last_worker_identity:
                return info
        if time.monotonic() > deadline:
            raise AssertionError(f"no started {activity_type} activity pending after {timeout:.0f}s")
        await asyncio.sleep(0.1)


# --- what Temporal recorded -------------------------------------------------------------

@dataclass
class ActivityRun:
    activity_id: str
    activity_type: str
    identity: str  # of the worker that ran the attempt that closed the activity
    attempt: int
    outcome: str  # COMPLETED, FAILED, TIMED_OUT, CANCELED or OPEN


_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "COMPLETED",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "FAILED",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "TIMED_OUT",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "CANCELED",
}


async def activity_runs(handle: WorkflowHandle) -> list[ActivityRun]:
    """Every activity of the workflow's history, in scheduling order.

    Temporal writes ActivityTaskStarted when an activity closes, for its last attempt
    only: ``identity`` and ``attempt`` are those of the attempt that counted."""
    history = await handle.fetch_history()
    runs: dict[int, ActivityRun] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes
            runs[event.event_id] = ActivityRun(scheduled.activity_id, scheduled.activity_type.name, "", 0, "OPEN")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            run = runs[started.scheduled_event_id]
            run.identity, run.attempt = started.identity, started.attempt
        elif event.event_type in _CLOSED:
            field = {
                "COMPLETED": "activity_task_completed_event_attributes",
                "FAILED": "activity_task_failed_event_attributes",
                "TIMED_OUT": "activity_task_timed_out_event_attributes",
                "CANCELED": "activity_task_canceled_event_attributes",
            }[_CLOSED[event.event_type]]
            runs[getattr(event, field).scheduled_event_id].outcome = _CLOSED[event.event_type]
    return list(runs.values())


async def settled_activity_runs(handle: WorkflowHandle, seconds: float = 30.0) -> list[ActivityRun]:
    """``activity_runs`` once none is open (at most ``seconds``): a task reads as completed
    before its ``task.completed`` event is written, so a history read at once may hold that
    last activity still running."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        runs = await activity_runs(handle)
        if all(r.outcome != "OPEN" for r in runs) or asyncio.get_running_loop().time() > deadline:
            return runs
        await asyncio.sleep(0.2)


# --- what PostgreSQL stored -------------------------------------------------------------

async def check_stored_once(store: Store, database_url: str, handle: WorkflowHandle,
                            trajectory: Trajectory) -> None:
    """Every item once, in order, in the item table and the event log (as in
    tests/integration/test_worker_crash.py); every recorded tool call answered by exactly
    one tool result whose exact output is archived once."""
    session_id = handle.id
    report = await sessions.context(handle)
    rows = await store.list_items(session_id, limit=10_000)
    lane = [r for r in rows if r.lane == "main"]
    seqs = [r.seq for r in lane]
    assert seqs == sorted(set(seqs)), session_id
    events = await store.list_events(session_id, limit=10_000)
    added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
    assert added == [r.item_id for r in lane], (  # once each, in lane order
        session_id, [(e.id, e.seq, e.payload["item_id"]) for e in events if e.kind == "item.added"],
        [(r.seq, r.item_id, r.kind) for r in lane])
    archived = [e.payload["item_id"] for e in events if e.kind == "item.archived"]
    assert len(archived) == len(set(archived)), session_id
    in_context = {i.id for i in report.items}
    assert in_context <= {r.item_id for r in rows}, session_id
    assert {r.item_id for r in lane} <= in_context | set(archived), session_id

    recorded = recorded_outputs(trajectory)
    results = [r for r in lane if r.kind == "tool_result"]
    answered = Counter(ItemContent.model_validate(r.content["content"]).tool_call_id for r in results)
    assert answered == Counter(list(recorded)), (session_id, answered)  # every recorded call, once
    conn = await asyncpg.connect(database_url)
    try:
        archive = await conn.fetch("SELECT item_id, sha256 FROM observations WHERE session_id = $1", session_id)
    finally:
        await conn.close()
    assert sorted(o["item_id"] for o in archive) == sorted(r.item_id for r in results), session_id
    sha_by_item = {o["item_id"]: o["sha256"] for o in archive}
    for row in results:
        call_id = ItemContent.model_validate(row.content["content"]).tool_call_id
        assert call_id is not None
        expected = hashlib.sha256(recorded[call_id].output.encode("utf-8", "surrogatepass")).hexdigest()
        assert sha_by_item[row.item_id] == expected, (session_id, call_id)
