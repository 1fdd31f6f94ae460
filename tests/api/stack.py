"""The API on the real stack for tests: one background thread runs, on its own event loop,
an in-process worker and the API (uvicorn on a free port), both on a task queue of their
own, against the session's Temporal dev server and PostgreSQL database.

tests/api, tests/cli and tests/ui import these fixtures (``from tests.api.stack import *``);
the server is shared by all of them (started once per test session).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn

from lanes_client import AsyncLanesClient
from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory
from tests.conftest import StackSettings
from tests.integration.scripted_model import ScriptedModel
from tests.recordings import SHORT_TRAJECTORY, load_recording
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.worker import LanesWorker

__all__ = [
    "CHECKOUT_PYTHONPATH", "UNREACHABLE_MODEL_URL", "ApiStack", "TRAJECTORY", "api_settings", "api_stack", "client_a",
    "client_b", "replay", "scripted", "trajectory",
]

# PYTHONPATH for a subprocess running this checkout: the server's packages and the client's
# (client/, its own distribution), whatever the virtualenv has installed.
REPO = Path(__file__).resolve().parents[2]
CHECKOUT_PYTHONPATH = os.pathsep.join((str(REPO), str(REPO / "client")))

# 16 recorded tool-calling steps, 30 k characters of tool output (largest 10.6 k)
TRAJECTORY = SHORT_TRAJECTORY

TENANT_A, TOKEN_A = "tenant-a", "token-tenant-a-0123456789"
TENANT_B, TOKEN_B = "tenant-b", "token-tenant-b-9876543210"
TOKENS = {TOKEN_A: TENANT_A, TOKEN_B: TENANT_B}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The stack's model endpoint: configured (hosted sessions are accepted) but nothing listens
# there, so a hosted session that is not a replay fails its task with the connection error.
UNREACHABLE_MODEL_URL = f"http://127.0.0.1:{_closed_port()}/v1"


class LanesServer:
    """Worker + API on a background thread with its own loop (so sync tests and
    subprocesses can use it while the test loop is idle)."""

    def __init__(self, settings: Settings, tokens: dict[str, str]) -> None:
        self.settings = settings
        self.tokens = tokens
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self.worker: LanesWorker | None = None
        self.app: Any = None  # the API's FastAPI app, once started (a test may put a fault in its state)

    def use_settings(self, settings: Settings) -> None:
        """Point the running worker's activities at other settings (a test's own model
        endpoint); the API keeps its own."""
        assert self.worker is not None
        self.worker.use_settings(settings)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LanesServer:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, args=(sock,), name="lanes-api-test", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            raise RuntimeError(f"API server did not start: {self._error!r}")
        return self

    def _run(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self._main(sock))
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
        finally:
            sock.close()

    async def _main(self, sock: socket.socket) -> None:
        from worker.api.app import create_app
        from worker.worker import build_worker, connect

        client = await connect(self.settings)
        app = self.app = create_app(self.settings, client=client, tokens=self.tokens, allow_replay=True)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                                                     timeout_graceful_shutdown=2))
        worker = self.worker = build_worker(client, self.settings)
        async with worker:
            serving = asyncio.create_task(self._server.serve(sockets=[sock]))
            while not self._server.started and not serving.done():
                await asyncio.sleep(0.02)
            self._ready.set()
            await serving

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)


@dataclass
class ApiStack:
    server: LanesServer
    settings: Settings
    tokens: dict[str, str] = field(default_factory=lambda: dict(TOKENS))
    token_a: str = TOKEN_A
    token_b: str = TOKEN_B
    tenant_a: str = TENANT_A
    tenant_b: str = TENANT_B

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def client(self, token: str | None = TOKEN_A) -> AsyncLanesClient:
        return AsyncLanesClient(self.base_url, token, timeout=120)


_shared: dict[str, object] = {}
_users = 0


@pytest.fixture(scope="session")
def api_settings(stack_settings: StackSettings, stack_dir: Path) -> Settings:
    if "settings" not in _shared:
        _shared["settings"] = stack_settings("api", openai_base_url=UNREACHABLE_MODEL_URL,
                                             replay_roots=[DEFAULT_TRAJECTORY_ROOT, stack_dir / "recordings"])
    return _shared["settings"]  # type: ignore[return-value]


@pytest.fixture(scope="session")
def api_stack(api_settings: Settings) -> Iterator[ApiStack]:
    """The running API (+ worker). Shared by every conftest that imports it; stopped after the last."""
    global _users
    if "stack" not in _shared:
        _shared["stack"] = ApiStack(server=LanesServer(api_settings, TOKENS).start(), settings=api_settings)
    _users += 1
    yield _shared["stack"]  # type: ignore[misc]
    _users -= 1
    if _users == 0:
        stack = _shared.pop("stack")
        stack.server.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
async def client_a(api_stack: ApiStack) -> AsyncIterator[AsyncLanesClient]:
    async with api_stack.client(TOKEN_A) as client:
        yield client


@pytest.fixture(scope="session")
async def client_b(api_stack: ApiStack) -> AsyncIterator[AsyncLanesClient]:
    async with api_stack.client(TOKEN_B) as client:
        yield client


@pytest.fixture(scope="module")
def scripted(api_settings: Settings, api_stack: ApiStack) -> Iterator[ScriptedModel]:
    """A scripted model the shared stack's worker calls while the module runs (the API keeps
    its configured endpoint, so hosted sessions are accepted); ``add`` gives a model name its script."""
    model = ScriptedModel([{"content": "default answer"}])
    api_stack.server.use_settings(api_settings.model_copy(update={"openai_base_url": model.base_url}))
    yield model
    api_stack.server.use_settings(api_settings)
    model.stop()


@pytest.fixture(scope="session")
def trajectory() -> Trajectory:
    return load_recording(TRAJECTORY)


@pytest.fixture(scope="session")
def replay(trajectory: Trajectory) -> Iterator[ReplayModelServer]:
    """The replay model server for ``trajectory`` (hosted sessions and external agents both call it)."""
    server = ReplayModelServer([trajectory]).start()
    yield server
    server.stop()


def replay_body(trajectory: Trajectory, replay: ReplayModelServer, **overrides) -> dict:
    """POST /v1/sessions body of a hosted session replaying ``trajectory``."""
    return {
        "mode": "hosted",
        "model": "replay",
        "system_prompt": trajectory.system or "You are a helpful assistant.",
        "replay": {"trajectory_path": str(TRAJECTORY), "trajectory_id": trajectory.id,
                   "model_base_url": replay.base_url},
        **overrides,
    }

