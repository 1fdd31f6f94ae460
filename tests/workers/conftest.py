"""Fixtures for tests of worker processes: settings, the replay model, worker spawning.

Every worker here is a real ``python -m worker.worker`` process on a task queue of its
own test (no in-process worker polls it), so a test decides which processes exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recordings import Trajectory
from tests.conftest import StackSettings
from tests.recordings import SHORT_TRAJECTORY, load_recording
from tests.workers.support import WorkerProcess
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings


@pytest.fixture(scope="session")
def short_trajectory() -> Trajectory:
    return load_recording(SHORT_TRAJECTORY)


@pytest.fixture(scope="session")
def workers_replay_server(short_trajectory: Trajectory) -> Iterator[ReplayModelServer]:
    server = ReplayModelServer([short_trajectory]).start()
    yield server
    server.stop()


@pytest.fixture
def replay_server(workers_replay_server: ReplayModelServer) -> Iterator[ReplayModelServer]:
    """The session's replay server, with no fault armed before or after the test."""
    workers_replay_server.set_faults("none")
    yield workers_replay_server
    workers_replay_server.set_faults("none")


@pytest.fixture
def queue_settings(stack_settings: StackSettings) -> Settings:
    """Settings with a fresh task queue: only this test's worker processes poll it."""
    return stack_settings("workers")


@pytest.fixture
def spawn(queue_settings: Settings, stack_dir: Path, request: pytest.FixtureRequest) -> Iterator:
    """``spawn(name, **env)`` starts a worker process on the test's queue; all are
    stopped (SIGKILL after a grace) at the end of the test."""
    started: list[WorkerProcess] = []

    def spawn_worker(name: str, **env: str) -> WorkerProcess:
        log = stack_dir / "logs" / f"{request.node.name}-{name}.log"
        proc = WorkerProcess.start(queue_settings, log, env)
        started.append(proc)
        return proc

    yield spawn_worker
    for proc in started:
        proc.kill()
