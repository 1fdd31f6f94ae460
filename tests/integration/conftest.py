"""Fixtures for hosted sessions on the real stack: settings, workers, the replay model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from temporalio.client import Client

from recordings import Trajectory
from tests.conftest import StackSettings
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
def settings(stack_settings: StackSettings, scripted_model: ScriptedModel) -> Settings:
    return stack_settings("test", openai_base_url=scripted_model.base_url, openai_api_key="sk-test-not-a-secret")


@pytest.fixture(scope="session")
async def worker(temporal_client: Client, settings: Settings) -> AsyncIterator[None]:
    """An in-process worker on the session's task queue."""
    async with build_worker(temporal_client, settings):
        yield
