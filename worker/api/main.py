"""``lanes api``: serve the HTTP API with uvicorn (the app: :func:`worker.api.app.create_app`).

Serves ``/v1/...`` (bearer tokens), ``/healthz`` (the process is up: liveness and the
container healthcheck), ``/readyz`` (Temporal and PostgreSQL reachable: readiness),
``/ui`` (the inspector) and ``/openapi.json``, on ``LANES_API_HOST:LANES_API_PORT``.

Tokens come from ``LANES_API_TOKENS`` ("tenantA:token1,tenantB:token2"). When it is
unset, a token for tenant ``default`` is generated and written to
``<LANES_DATA_DIR>/api-token`` (mode 0600), where the ``lanes`` session commands find
it; the token itself is never printed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
from pathlib import Path

import uvicorn

from worker.api.auth import ENV_TOKENS, TokenConfigError, tokens_from_env
from worker.settings import Settings, get_settings

TOKEN_FILE = "api-token"


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown (the process then dies of the
    signal); here a signal means "stop cleanly", and ``lanes api`` exits 0."""

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


def token_file(settings: Settings) -> Path:
    return settings.data_dir / TOKEN_FILE


def local_token(settings: Settings) -> str:
    """The generated token of tenant ``default`` (created once per data directory)."""
    path = token_file(settings)
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def serve(host: str | None = None, port: int | None = None, log_level: str | None = None) -> int:
    """Serve until SIGTERM/SIGINT (``lanes api``); host and port default to the settings."""
    settings = get_settings()
    host = host or settings.api_host
    port = port or settings.api_port
    log_level = (log_level or os.environ.get("LANES_LOG_LEVEL", "info")).lower()
    logging.basicConfig(level=log_level.upper())

    from worker import tracing
    from worker.api.app import create_app

    try:
        tokens = tokens_from_env()
        # FastAPI's request spans and the Temporal client's go to this provider: one trace per call
        tracing.configure(settings, "context-lanes-api")
    except (TokenConfigError, tracing.TracingUnavailable) as exc:
        print(f"lanes api: {exc}", file=sys.stderr)
        return 2
    if not tokens:
        tokens = {local_token(settings): "default"}
        print(f"lanes api: {ENV_TOKENS} is not set; tenant 'default' uses the token in {token_file(settings)}",
              file=sys.stderr)
    app = create_app(settings, tokens=tokens)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=5, proxy_headers=False)
    server = _Server(config)
    print(f"lanes api: http://{host}:{port} (inspector /ui, OpenAPI /openapi.json)", file=sys.stderr, flush=True)
    try:
        asyncio.run(server.serve())
    finally:
        tracing.shutdown()
    return 0 if server.started else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.api.main ARGS``: the same as ``lanes api ARGS``."""
    from worker.cli import run

    return run(["api", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the Temporal SDK can abort at interpreter exit (DESIGN §4)
