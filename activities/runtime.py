"""What activities share inside one worker process: their settings and the store.

The worker configures it once at start (``configure_runtime``); activities call
:func:`get_runtime`. The settings are whatever the process read (``worker.settings``):
activities only need the fields of :class:`ActivitySettings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import SecretStr
from temporalio.exceptions import ApplicationError

from activities.store import Store, get_store
from workflows.context.usage import ModelPrice
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
    def prices(self) -> dict[str, ModelPrice]: ...


_settings: ActivitySettings | None = None


@dataclass(frozen=True)
class Runtime:
    settings: ActivitySettings
    store: Store

    @property
    def workspace_root(self) -> Path:
        if self.settings.workspace_root is None:
            raise misconfigured("the workspace root is not set (LANES_WORKSPACE_ROOT)")
        return self.settings.workspace_root


def configure_runtime(settings: ActivitySettings) -> None:
    """Use these settings in this process (the worker calls it before it polls)."""
    global _settings
    _settings = settings


def misconfigured(message: str) -> ApplicationError:
    return ApplicationError(message, type=WORKER_MISCONFIGURED, non_retryable=True)


async def get_runtime() -> Runtime:
    if _settings is None:
        raise misconfigured("activities run in a process that never called configure_runtime")
    if not _settings.database_url:
        raise misconfigured("DATABASE_URL is not set in the worker process")
    return Runtime(_settings, await get_store(_settings.database_url, retry_for=_settings.store_outage_seconds))
