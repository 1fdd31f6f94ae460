"""Fixtures: a scripted upstream for both protocols, and the API (with an in-process worker)
whose gateway forwards to it, on the real stack (Temporal dev server, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.stack import TOKENS, LanesServer
from tests.conftest import StackSettings
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
def gateway_settings(stack_settings: StackSettings, upstream: ScriptedUpstream) -> Settings:
    return stack_settings("gateway", gateway_openai_base_url=f"{upstream.root}/v1",
                          gateway_openai_api_key="sk-upstream-secret", gateway_anthropic_base_url=upstream.root,
                          gateway_anthropic_api_key="ak-upstream-secret",
                          gateway_tenant_upstreams={"tenant-b": {"openai_api_key": "sk-tenant-b-own"}})


@pytest.fixture(scope="session")
def gateway(gateway_settings: Settings) -> Iterator[str]:
    """The API's root URL (with an in-process worker on the settings' task queue)."""
    server = LanesServer(gateway_settings, TOKENS).start()
    yield server.base_url
    server.stop()
