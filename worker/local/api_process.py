"""The HTTP API as a child of a local stack: its port checked first, started, waited for.

``lanes dev`` and ``lanes demo --ui`` use it; both print :meth:`LocalApi.ui_url`, the
inspector's address with its token (local stacks only: the token is the data dir's own).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from worker.local.stack import Stack, _tail, port_is_free

DEFAULT_API_PORT = 8000


class LocalStackError(Exception):
    """Why the local stack cannot start, in one message for the user."""


def check_port(port: int, host: str, what: str, option: str) -> None:
    """Refuse a taken port before anything starts, naming it and how to choose another."""
    if not port_is_free(port, host):
        raise LocalStackError(f"port {port} on {host} is already in use ({what}); choose another with {option}")


@dataclass(frozen=True)
class LocalApi:
    url: str
    token: str
    token_source: str  # the file (or variable) the token comes from

    def ui_url(self, session_id: str | None = None) -> str:
        return f"{self.url}/ui?token={self.token}" + (f"#session={session_id}" if session_id else "")


def api_token(data_dir: Path) -> tuple[str, str]:
    """The token a local API accepts: the first of ``LANES_API_TOKENS``, else the data dir's."""
    from worker.api.auth import ENV_TOKENS, tokens_from_env
    from worker.api.main import local_token, token_file
    from worker.settings import get_settings

    configured = tokens_from_env()
    if configured:
        return next(iter(configured)), f"${ENV_TOKENS}"
    settings = get_settings().model_copy(update={"data_dir": data_dir})
    return local_token(settings), str(token_file(settings))


def start_api(stack: Stack, host: str, port: int, *, allow_replay: bool = False,
              replay_roots: list[Path] | None = None, timeout: float = 60.0) -> LocalApi:
    """Spawn ``lanes api`` on ``host:port`` and wait until it answers /readyz."""
    token, source = api_token(stack.data_dir)
    env = {"LANES_API_HOST": host, "LANES_API_PORT": str(port)}
    if allow_replay:
        env["LANES_API_ALLOW_REPLAY"] = "1"
    if replay_roots:
        env["LANES_REPLAY_ROOTS"] = os.pathsep.join(str(root) for root in replay_roots)
    proc = stack.spawn("api", [sys.executable, "-m", "worker.api.main", "--log-level", "warning"], env)
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            log = stack.data_dir / "logs" / "api.log"
            raise LocalStackError(f"the API exited with code {code} while starting; {log}:\n{_tail(log, 15)}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return LocalApi(url, token, source)
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise LocalStackError(f"the API at {url} did not become ready in {timeout:.0f} s "
                                  f"(see {stack.data_dir / 'logs' / 'api.log'})")
        time.sleep(0.2)
