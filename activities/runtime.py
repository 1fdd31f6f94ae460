"""What the activity classes are built with: the worker's settings and its store.

The worker constructs each activity class once (``worker.worker.activity_objects``) with
these, as Temporal's samples build activities that hold a client or a pool; nothing here is
looked up from a process-global. The settings are whatever the process read
(``worker.settings``): activities only need the fields of :class:`ActivitySettings`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import SecretStr
from temporalio.exceptions import ApplicationError

from activities.store import Store
from workflows.context import ModelPrice
from workflows.contract.failures import WORKER_MISCONFIGURED


class ActivitySettings(Protocol):
    @property
    def database_url(self) -> str | None: ...
    @property
    def openai_base_url(self) -> str | None: ...
    @property
    def openai_api_key(self) -> SecretStr | None: ...
    @property
    def condenser_model(self) -> str: ...
    @property
    def model_timeout_seconds(self) -> float: ...
    @property
    def workspace_root(self) -> Path | None: ...
    @property
    def workspace_quota_bytes(self) -> int: ...
    @property
    def unsafe_no_sandbox(self) -> bool: ...
    @property
    def store_outage_seconds(self) -> float: ...
    @property
    def db_pool_size(self) -> int: ...
    @property
    def prices(self) -> dict[str, ModelPrice]: ...


def misconfigured(message: str) -> ApplicationError:
    """An error no retry can fix: the worker process is set up wrong."""
    return ApplicationError(message, type=WORKER_MISCONFIGURED, non_retryable=True)


class StoreSource:
    """The worker's one :class:`Store`, opened on first use on the loop the activities run on
    (the worker is built before its loop runs them) and opened again if it was closed."""

    def __init__(self, database_url: str | None, retry_for: float = 15.0, pool_size: int = 10) -> None:
        self.database_url = database_url
        self.retry_for = retry_for
        self.pool_size = pool_size
        self._store: Store | None = None
        self._opening: asyncio.Task[Store] | None = None

    async def get(self) -> Store:
        if not self.database_url:
            raise misconfigured("DATABASE_URL is not set in the worker process")
        loop = asyncio.get_running_loop()
        store = self._store
        if store is not None and store.loop is loop and not store.closed:
            return store
        pending = self._opening
        if pending is None or pending.get_loop() is not loop:
            pending = self._opening = loop.create_task(Store.open(self.database_url, retry_for=self.retry_for,
                                                                max_size=self.pool_size))
        try:
            self._store = await asyncio.shield(pending)  # a cancelled caller does not cancel the open
        finally:
            if pending.done() and self._opening is pending:
                self._opening = None
        return self._store

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is not None and not store.closed:
            await store.close()


def store_source(settings: ActivitySettings) -> StoreSource:
    return StoreSource(settings.database_url, retry_for=settings.store_outage_seconds,
                       pool_size=settings.db_pool_size)


@dataclass(frozen=True)
class Runtime:
    """What one activity call works with."""

    settings: ActivitySettings
    store: Store

    @property
    def workspace_root(self) -> Path:
        if self.settings.workspace_root is None:
            raise misconfigured("the workspace root is not set (LANES_WORKSPACE_ROOT)")
        return self.settings.workspace_root


class ActivityGroup:
    """Base of the activity classes: each is built once per worker with its settings and store."""

    def __init__(self, settings: ActivitySettings, stores: StoreSource) -> None:
        self.settings = settings
        self.stores = stores

    async def store(self) -> Store:
        return await self.stores.get()

    async def runtime(self) -> Runtime:
        return Runtime(self.settings, await self.stores.get())
