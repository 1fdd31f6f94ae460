"""Fixtures: a scripted upstream for both protocols, and the API (with an in-process worker)
whose gateway forwards to it, on the real stack (Temporal dev server, PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.stack import TOKENS, LanesServer
from tests.gateway.upstream import ScriptedUpstream
from worker.settings import Settings

TOKEN = next(iter(TOKENS))  # tenant-a's
TOKEN_B = list(TOKENS)[1]  # tenant-b's: its own OpenAI key upstream


@pytest.fixture(scope="session")
def upstream() -> Iterator[ScriptedUpstream]:
    server = ScriptedUpstream()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gateway_settings(database_url: str, temporal_address: str, stack_dir: Path, upstream: ScriptedUpstream) -> Settings:
    return Settings(temporal_address=temporal_address, database_url=database_url,
                    task_queue=f"lanes-gateway-{uuid.uuid4().hex[:8]}", data_dir=stack_dir / "gateway-data",
                    gateway_openai_base_url=f"{upstream.root}/v1", gateway_openai_api_key="sk-upstream-secret",
                    gateway_anthropic_base_url=upstream.root, gateway_anthropic_api_key="ak-upstream-secret",
                    gateway_tenant_upstreams={"tenant-b": {"openai_api_key": "sk-tenant-b-own"}})


@pytest.fixture(scope="session")
def gateway(gateway_settings: Settings) -> Iterator[str]:
    """The API's root URL (with an in-process worker on the settings' task queue)."""
    server = LanesServer(gateway_settings, TOKENS).start()
    yield server.base_url
    server.stop()
