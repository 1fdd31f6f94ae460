"""Fixtures for hosted sessions on the real stack: settings, workers, the replay model."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from recordings import Trajectory
from tests.integration.scripted_model import ScriptedModel
from tests.integration.support import LIVE_SCRIPT
from tests.recordings import LONG_TRAJECTORY, load_recording
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import build_worker


@pytest.fixture(scope="session")
def trajectory() -> Trajectory:
    return load_recording(LONG_TRAJECTORY)


@pytest.fixture(scope="session")
def replay_server(trajectory: Trajectory) -> Iterator[ReplayModelServer]:
    server = ReplayModelServer([trajectory]).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def scripted_model() -> Iterator[ScriptedModel]:
    """The live-mode model of this test session (see test_live_workspace.py)."""
    model = ScriptedModel(LIVE_SCRIPT)
    yield model
    model.stop()


@pytest.fixture(scope="session")
def settings(database_url: str, temporal_address: str, stack_dir: Path, scripted_model: ScriptedModel) -> Settings:
    return Settings(
        temporal_address=temporal_address,
        database_url=database_url,
        task_queue=f"lanes-test-{uuid.uuid4().hex[:8]}",
        data_dir=stack_dir / "data",
        openai_base_url=scripted_model.base_url,
        openai_api_key="sk-test-not-a-secret",
    )


@pytest.fixture(scope="session")
async def worker(temporal_client: Client, settings: Settings) -> AsyncIterator[None]:
    """An in-process worker on the session's task queue."""
    async with build_worker(temporal_client, settings):
        yield
