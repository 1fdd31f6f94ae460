"""Schema migrations: the numbered SQL files of ``activities/migrations``, applied in order in
one transaction under an advisory lock, each recorded with its checksum so that a file
edited after it was applied is refused instead of silently diverging."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from importlib.resources import files

import asyncpg

from activities.store_errors import MigrationError

log = logging.getLogger(__name__)

MIGRATION_LOCK_KEY = 0x6C616E6573  # "lanes": pg_advisory_xact_lock key for migrations


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    found: dict[int, Migration] = {}
    for entry in files("activities").joinpath("migrations").iterdir():
        m = re.fullmatch(r"(\d{4})_([A-Za-z0-9_]+)\.sql", entry.name)
        if not m:
            continue
        version = int(m.group(1))
        if version in found:
            raise MigrationError(f"two migrations with version {version:04d}: {found[version].name}, {entry.name}")
        found[version] = Migration(version, entry.name, entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations in one transaction; returns the names applied."""
    applied_now: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"]: r for r in await conn.fetch("SELECT version, name, checksum FROM schema_migrations")}
        for mig in load_migrations():
            if mig.version in done:
                if done[mig.version]["checksum"] != mig.checksum:
                    raise MigrationError(
                        f"migration {mig.name} changed after it was applied to this database; "
                        "add a new migration instead (or recreate a throwaway database)"
                    )
                continue
            await conn.execute(mig.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                mig.version, mig.name, mig.checksum,
            )
            applied_now.append(mig.name)
    if applied_now:
        log.info("applied migrations: %s", ", ".join(applied_now))
    return applied_now
