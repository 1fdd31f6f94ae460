"""The HTTP API of Context Lanes: ``create_app(settings)`` builds the FastAPI application.

- ``/v1/...``: sessions, hosted and external-agent mode, inspection, events (routes.py);
  bearer token per tenant (``LANES_API_TOKENS``), checked before anything else.
- ``/healthz`` (the process is up), ``/readyz`` (Temporal and PostgreSQL reachable).
- ``/ui``: the inspector page (static files from ``worker/api/static``).
- ``/openapi.json``, ``/docs``.

Temporal and PostgreSQL are connected lazily, so the process starts (and reports
not-ready) while they are down. Every error body is ``{"error": {code, message}}``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client

from activities.store import Store
from activities.store_errors import StoreError
from lanes_client.schemas import MAX_ITEM_CHARS, Health, Readiness
from worker.api import context_routes, external_routes, ledger_routes, subagent_routes
from worker.api.auth import Authenticator, tokens_from_env
from worker.api.backend import Backend
from worker.api.errors import ApiError, store_unavailable
from worker.api.gateway import routes as gateway_routes
from worker.api.gateway.answer_store import sweep_forever
from worker.api.gateway.answer_writes import AnswerWrites
from worker.api.gateway.continuation import Continuations
from worker.api.gateway.routes import gateway_error
from worker.api.routes import router
from worker.settings import Settings, get_settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("lanes.api")

MAX_BODY_BYTES = 2 * 1024 * 1024
# A gateway call carries the agent's whole conversation: a long one is larger than any other call.
GATEWAY_MAX_BODY_BYTES = 64 * 1024 * 1024
BODY_SECONDS = 10.0  # a request body must arrive whole within this
ANSWER_DRAIN_SECONDS = 10.0  # a stopping API lets the gateway's answer writes finish this long
DRAIN_LIMIT = 16 * 1024 * 1024  # an over-limit body is read and dropped up to this, then the connection closes
ENV_ALLOW_REPLAY = "LANES_API_ALLOW_REPLAY"
STATIC_DIR = Path(str(files("worker.api").joinpath("static")))


def _error_response(status: int, code: str, message: str, details: list[dict] | None = None,
                    headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = ApiError(status, code, message, details=details).body()
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class Guard:
    """Outermost middleware: a request body larger than ``max_body`` is 413 (from its
    Content-Length, or while it is read), a body that has not arrived whole within
    ``body_seconds`` is 408 (a client that declares a body and sends less holds no
    connection longer), and every ``/v1`` and ``/gateway`` request needs a valid token (401)
    before routing, validation or any lookup happens."""

    def __init__(self, app: ASGIApp, *, auth: Authenticator, max_body: int,
                 body_seconds: float = BODY_SECONDS) -> None:
        self.app = app
        self.auth = auth
        self.max_body = max_body
        self.body_seconds = body_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path: str = scope.get("path", "")
        gateway = path.startswith("/gateway/")
        if path == "/v1" or path.startswith("/v1/") or gateway:
            # the gateway's clients send the token as their provider's key: a bearer token
            # (OpenAI SDKs) or x-api-key (Anthropic SDKs)
            authorization = headers.get("authorization")
            if gateway and not authorization and headers.get("x-api-key"):
                authorization = f"Bearer {headers['x-api-key']}"
            tenant = self._tenant(authorization)
            if isinstance(tenant, ApiError):
                response = gateway_error(path, tenant.status, tenant.message, headers=tenant.headers) if gateway \
                    else _error_response(tenant.status, tenant.code, tenant.message, headers=tenant.headers)
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})["tenant"] = tenant
        max_body = max(self.max_body, GATEWAY_MAX_BODY_BYTES) if gateway else self.max_body
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                await _error_response(400, "bad_request", "Content-Length is not a number")(scope, receive, send)
                return
            if int(length) > max_body:
                await self._too_large(scope, receive, send, max_body)
                return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE") and length is None \
                and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)
            return
        # Read the body here (bounded), then hand it to the app in one piece.
        chunks: list[bytes] = []
        size = 0
        deadline = asyncio.get_running_loop().time() + self.body_seconds
        while True:
            try:
                message = await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
            except TimeoutError:
                await _error_response(408, "body_timeout", f"the request body did not arrive within "
                                      f"{self.body_seconds:g} s ({size:,} bytes came); send it whole",
                                      headers={"Connection": "close"})(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_body:
                await self._too_large(scope, receive, send, max_body)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _tenant(self, authorization: str | None) -> str | ApiError:
        from fastapi.security import HTTPAuthorizationCredentials

        credentials = None
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token.strip())
        try:
            return self.auth(credentials)
        except ApiError as exc:
            return exc

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, max_body: int) -> None:
        # Read (and drop) what the client is still sending, up to a bound, so that it gets to
        # read the answer instead of a reset connection; then close the connection.
        drained = 0
        while drained < DRAIN_LIMIT:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                break
        response = _error_response(413, "too_large", f"request body is larger than {max_body:,} bytes; send "
                                                     "fewer items per call, or cut a tool output before sending it "
                                                     f"(an item's text: at most {MAX_ITEM_CHARS:,} characters)",
                                   headers={"Connection": "close"})
        await response(scope, receive, send)


def _validation_details(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    details, parts = [], []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        where = ".".join(loc[1:]) if len(loc) > 1 else ".".join(loc)
        where = f"{loc[0]} {where}" if loc and loc[0] in ("query", "path", "header", "body") and len(loc) > 1 \
            else (where or "request")
        msg = str(error.get("msg", "invalid"))
        details.append({"loc": loc, "msg": msg, "type": str(error.get("type", ""))})
        parts.append(f"{where}: {msg}")
    message = "; ".join(parts[:5]) + (f" (and {len(parts) - 5} more)" if len(parts) > 5 else "")
    return message or "invalid request", details


def create_app(settings: Settings | None = None, *, client: Client | None = None, store: Store | None = None,
               tokens: Mapping[str, str] | None = None, allow_replay: bool | None = None,
               max_body_bytes: int = MAX_BODY_BYTES, tracer_provider: TracerProvider | None = None,
               body_seconds: float = BODY_SECONDS) -> FastAPI:
    """The API application.

    ``tokens`` maps token -> tenant (default: ``LANES_API_TOKENS``); ``client`` and
    ``store`` are used when given (else connected on first use from ``settings``);
    ``allow_replay`` lets POST /v1/sessions start replay sessions (development and tests;
    default: ``LANES_API_ALLOW_REPLAY=1``). ``tracer_provider``: where FastAPI's request spans
    go (tests; default: the process's global one, see worker/tracing.py). ``body_seconds``:
    how long a request body may take to arrive.
    """
    settings = settings or get_settings()
    auth = Authenticator(tokens if tokens is not None else tokens_from_env())
    if allow_replay is None:
        allow_replay = os.environ.get(ENV_ALLOW_REPLAY, "").strip().lower() in ("1", "true", "yes")
    backend = Backend(settings, client=client, store=store)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        sweeping = asyncio.create_task(sweep_forever(backend, app.state.answer_writes, settings.gateway_sweep_seconds),
                                       name="gateway answer sweep")
        yield
        sweeping.cancel()
        await app.state.answer_writes.drain(ANSWER_DRAIN_SECONDS)  # before the store and client close
        await backend.close()
        if (http := getattr(app.state, "gateway_http", None)) is not None:
            await http.aclose()

    app = FastAPI(
        title="Context Lanes API",
        version="1.0.0",
        description="Durable context for long-running LLM agents: sessions, external-agent mode, "
                    "context inspection, exact recall and the event log.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        telemetry={"tracer_provider": tracer_provider} if tracer_provider is not None else None,
    )
    app.state.settings = settings
    app.state.auth = auth
    app.state.backend = backend
    app.state.allow_replay = allow_replay
    app.state.answer_writes = AnswerWrites()  # gateway answers stored after the agent has them
    app.state.continuations = Continuations()  # the plan made after each gateway answer, for the next call

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, details = _validation_details(exc)
        return _error_response(422, "invalid", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        return _error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)

    @app.exception_handler(StoreError)
    async def store_down(request: Request, exc: StoreError) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        error = store_unavailable()
        return _error_response(error.status, error.code, error.message, headers=error.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error_response(500, "internal", f"internal error ({type(exc).__name__}); see the API log")

    @app.get("/healthz", response_model=Health, tags=["health"], summary="The process is up")
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get("/readyz", response_model=Readiness, tags=["health"], summary="Temporal and PostgreSQL are reachable",
             responses={503: {"model": Readiness, "description": "a dependency is unreachable"}})
    async def readyz() -> JSONResponse:
        # unauthenticated: ready or not, nothing more (which dependency failed and why is logged)
        (t_ok, t_detail), (p_ok, p_detail) = await asyncio.gather(backend.check_temporal(), backend.check_postgres())
        for name, ok, detail in (("Temporal", t_ok, t_detail), ("PostgreSQL", p_ok, p_detail)):
            if not ok:
                log.warning("not ready: %s: %s", name, detail)
        ready = Readiness(status="ok" if t_ok and p_ok else "unavailable")
        return JSONResponse(ready.model_dump(), status_code=200 if t_ok and p_ok else 503)

    app.include_router(router)
    app.include_router(subagent_routes.router)
    app.include_router(external_routes.router)
    app.include_router(ledger_routes.router)
    app.include_router(context_routes.router)
    app.include_router(gateway_routes.router)

    if STATIC_DIR.is_dir():
        @app.get("/ui", include_in_schema=False)
        async def ui() -> FileResponse:
            return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

        app.mount("/ui/static", StaticFiles(directory=STATIC_DIR), name="ui-static")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui")

    app.add_middleware(Guard, auth=auth, max_body=max_body_bytes, body_seconds=body_seconds)
    return app
