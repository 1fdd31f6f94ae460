"""What activities share inside one worker process: its settings and its store.

The worker configures it once at start; activities call :func:`get_runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.exceptions import ApplicationError

from activities.store import Store, get_store
from worker.settings import Settings, get_settings

_settings: Settings | None = None


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    store: Store


def configure_runtime(settings: Settings) -> None:
    """Use these settings (instead of the environment's) in this process."""
    global _settings
    _settings = settings


async def get_runtime() -> Runtime:
    settings = _settings or get_settings()
    if not settings.database_url:
        raise ApplicationError(
            "DATABASE_URL is not set in the worker process", type="WorkerMisconfigured", non_retryable=True
        )
    return Runtime(settings, await get_store(settings.database_url))
