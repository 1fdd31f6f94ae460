"""Migrations: applied once, idempotent, safe when several workers start together."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import asyncpg
import pytest

from activities.store import Store
from activities.store_errors import MigrationError
from activities.store_migrations import apply_migrations, load_migrations
from worker.local.stack import PostgresHandle, create_database, drop_database

pytestmark = pytest.mark.integration

TABLES = {"sessions", "items", "events", "observations", "checkpoints", "schema_migrations"}


@pytest.fixture
def fresh_database(postgres_server: PostgresHandle) -> Iterator[str]:
    name = f"lanes_test_{os.getpid()}_mig"
    yield create_database(postgres_server.dsn, name, drop_existing=True)
    drop_database(postgres_server.dsn, name)


def test_migration_files() -> None:
    migrations = load_migrations()
    assert migrations and migrations[0].name == "0001_initial.sql"
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))


async def _schema(dsn: str) -> tuple[set[str], list[tuple[int, str]]]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        applied = [tuple(r) for r in await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY 1")]
        return tables, applied
    finally:
        await conn.close()


async def test_apply_twice_is_a_no_op(fresh_database: str) -> None:
    conn = await asyncpg.connect(fresh_database)
    try:
        first = await apply_migrations(conn)
        assert first == [m.name for m in load_migrations()]
        assert await apply_migrations(conn) == []
    finally:
        await conn.close()
    tables, applied = await _schema(fresh_database)
    assert tables >= TABLES
    assert applied == [(m.version, m.name) for m in load_migrations()]


async def test_concurrent_opens(fresh_database: str) -> None:
    stores = await asyncio.gather(*(Store.open(fresh_database, min_size=1, max_size=2) for _ in range(4)))
    try:
        tables, applied = await _schema(fresh_database)
        assert tables >= TABLES and len(applied) == len(load_migrations())
        await stores[0].ensure_session("s")
        assert await stores[3].count_items("s") == 0
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_edited_migration_is_refused(fresh_database: str) -> None:
    await (await Store.open(fresh_database)).close()
    conn = await asyncpg.connect(fresh_database)
    try:
        await conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    finally:
        await conn.close()
    with pytest.raises(MigrationError, match="0001_initial.sql changed"):
        await Store.open(fresh_database)
