"""An OpenAI-compatible chat completions server that replays recorded trajectories.

Used by tests and the offline demo through the real ``openai`` client::

    async with replay_model_server(["/path/to/trajectories"]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        reply = await client.chat.completions.create(
            model="replay", messages=[...],
            extra_headers={"X-Lanes-Trajectory": traj_id, "X-Lanes-Turn": "0"})

Which recorded answer is returned is chosen by two request headers: ``X-Lanes-Trajectory``
(trajectory id, see :mod:`recordings`; a unique ``/``-suffix of an id is accepted
too) and ``X-Lanes-Turn`` (0-based turn index). Past the last recorded turn the server answers a
plain final message (:data:`REPLAY_FINISHED_TEXT`) without tool calls, so an agent loop ends.
Every answer also carries a non-standard top-level ``x_lanes`` object (``trajectory``, ``turn``,
``turns``, ``finished``, ``user_after``) that a replay driver can read through
``completion.model_extra``; standard clients ignore it.

Admin endpoints (tests): ``POST /admin/faults`` (see :class:`FaultConfig`), ``GET /admin/faults``,
``GET /admin/requests`` (last :data:`REQUEST_LOG_SIZE` chat requests), ``DELETE /admin/requests``.

Run standalone: ``python -m worker.replay.model_server --port 8099 --trajectory PATH [--trajectory ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ValidationError

from recordings import Trajectory, Turn, iter_trajectories

__all__ = [
    "HEADER_TRAJECTORY",
    "HEADER_TURN",
    "REPLAY_FINISHED_TEXT",
    "REPLAY_MODEL_ID",
    "REQUEST_LOG_SIZE",
    "FaultConfig",
    "ReplayModelServer",
    "ReplayState",
    "create_app",
    "estimate_tokens",
    "main",
    "replay_model_server",
    "run_replay_model_server",
    "start_replay_model_server",
]

HEADER_TRAJECTORY = "X-Lanes-Trajectory"
HEADER_TURN = "X-Lanes-Turn"
REPLAY_MODEL_ID = "replay"
REPLAY_FINISHED_TEXT = "Replay finished."
REQUEST_LOG_SIZE = 200

FaultMode = Literal["none", "http_500", "http_429", "timeout", "garbage", "context_length"]


class FaultConfig(BaseModel):
    """Fault to serve for the next ``count`` chat requests (``count < 0``: until reset).

    * ``http_500``: HTTP 500 with an OpenAI error body.
    * ``http_429``: HTTP 429 with ``Retry-After: <retry_after>`` (seconds).
    * ``timeout``: hold the request ``delay_seconds`` before answering normally (use a shorter
      client timeout to see ``APITimeoutError``).
    * ``garbage``: HTTP 200 whose body is not JSON although it says it is.
    * ``context_length``: each of the next ``count`` requests is checked; one whose estimated
      prompt tokens exceed ``max_prompt_tokens`` gets HTTP 400 with OpenAI's
      ``context_length_exceeded`` error, a smaller one is answered normally.
    * ``none``: clear any fault.
    """

    mode: FaultMode = "none"
    count: int = 1
    retry_after: float = 1
    max_prompt_tokens: int | None = None
    delay_seconds: float = 30.0


def estimate_tokens(obj: Any) -> int:
    """Rough token count (characters / 4 of the compact JSON text), at least 1."""
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False,
                                                       separators=(",", ":"))
    return max(1, len(text) // 4)


def _error(status: int, message: str, type_: str, code: str | None = None,
           param: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": type_, "param": param, "code": code}},
        headers=headers,
    )


class ReplayState:
    """Trajectories, fault knobs and the request log of one server (thread-safe)."""

    def __init__(self, trajectories: Iterable[Trajectory]) -> None:
        self.trajectories: dict[str, Trajectory] = {}
        for t in trajectories:
            self.trajectories.setdefault(t.id, t)
        self._lock = threading.Lock()
        self._fault = FaultConfig()
        self._remaining = 0
        self.faults_served: dict[str, int] = {}  # fault mode -> requests it answered
        self._requests: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_SIZE)
        self._served: dict[str, set[int]] = {}  # trajectory id -> recorded turns answered
        self._seq = 0
        self.stopping = threading.Event()

    # -- faults
    def set_faults(self, config: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        cfg = config if isinstance(config, FaultConfig) else FaultConfig.model_validate(config)
        with self._lock:
            self._fault = cfg
            self._remaining = 0 if cfg.mode == "none" else cfg.count
        return cfg

    def faults(self) -> dict[str, Any]:
        with self._lock:
            return {**self._fault.model_dump(), "remaining": self._remaining}

    def _take_fault(self) -> FaultConfig | None:
        with self._lock:
            if self._fault.mode == "none" or self._remaining == 0:
                return None
            if self._remaining > 0:
                self._remaining -= 1
            self.faults_served[self._fault.mode] = self.faults_served.get(self._fault.mode, 0) + 1
            return self._fault

    # -- request log
    def record(self, headers: Mapping[str, str], body: Any) -> int:
        with self._lock:
            self._seq += 1
            self._requests.append({
                "seq": self._seq,
                "trajectory": headers.get(HEADER_TRAJECTORY.lower()),
                "turn": headers.get(HEADER_TURN.lower()),
                "at": time.time(),  # when it arrived (a benchmark's per-turn wall time)
                "body": body,
            })
            return self._seq

    def serve(self, traj: Trajectory, turn: int) -> None:
        if turn < len(traj.turns):
            with self._lock:
                self._served.setdefault(traj.id, set()).add(turn)

    def served_turns(self, traj_id: str) -> set[int]:
        """The recorded turns of a trajectory this server answered (whatever the log kept)."""
        with self._lock:
            return set(self._served.get(traj_id, ()))

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- lookup
    def find(self, traj_id: str) -> Trajectory | None:
        t = self.trajectories.get(traj_id)
        if t is not None:
            return t
        matches = [t for k, t in self.trajectories.items() if k.endswith("/" + traj_id)]
        return matches[0] if len(matches) == 1 else None


def _tool_calls_payload(turn: Turn) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}} for c in turn.tool_calls]


def _completion(seq: int, model: str, traj: Trajectory, turn_index: int,
                prompt_tokens: int) -> dict[str, Any]:
    finished = turn_index >= len(traj.turns)
    message: dict[str, Any] = {"role": "assistant"}
    user_after: list[str] = []
    if finished:
        message["content"] = REPLAY_FINISHED_TEXT
        finish_reason = "stop"
        completion_tokens = estimate_tokens(REPLAY_FINISHED_TEXT)
    else:
        turn = traj.turns[turn_index]
        user_after = list(turn.user_after)
        calls = _tool_calls_payload(turn)
        message["content"] = turn.assistant_text if (turn.assistant_text or not calls) else None
        if calls:
            message["tool_calls"] = calls
        finish_reason = "tool_calls" if calls else "stop"
        completion_tokens = estimate_tokens(turn.assistant_text + "".join(
            c.name + c.arguments for c in turn.tool_calls))
    return {
        "id": f"chatcmpl-replay-{seq}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "replay",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        "x_lanes": {"trajectory": traj.id, "turn": turn_index, "turns": len(traj.turns),
                    "finished": finished, "user_after": user_after},
    }


def create_app(trajectories: Iterable[Trajectory] | ReplayState) -> FastAPI:
    """The FastAPI app; ``app.state.replay`` is its :class:`ReplayState`."""
    state = trajectories if isinstance(trajectories, ReplayState) else ReplayState(trajectories)
    app = FastAPI(title="Context Lanes replay model", docs_url=None, redoc_url=None)
    app.state.replay = state

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [
            {"id": REPLAY_MODEL_ID, "object": "model", "created": 0, "owned_by": "context-lanes"},
        ]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            state.record(request.headers, raw.decode("utf-8", "replace"))
            return _error(400, "Request body is not valid JSON.", "invalid_request_error")
        seq = state.record(request.headers, body)
        if not isinstance(body, dict):
            return _error(400, "Request body must be a JSON object.", "invalid_request_error")
        prompt_tokens = estimate_tokens({"messages": body.get("messages"),
                                         "tools": body.get("tools")})

        fault = state._take_fault()
        if fault is not None:
            if fault.mode == "http_500":
                return _error(500, "Injected fault: the server had an error while processing "
                                   "your request.", "server_error")
            if fault.mode == "http_429":
                return _error(429, "Injected fault: rate limit reached, retry after "
                                   f"{fault.retry_after:g} s.", "requests", "rate_limit_exceeded",
                              headers={"Retry-After": f"{fault.retry_after:g}"})
            if fault.mode == "garbage":
                return PlainTextResponse("<html>502 Bad Gateway (injected garbage)",
                                         media_type="application/json")
            if fault.mode == "timeout":
                deadline = time.monotonic() + fault.delay_seconds
                while time.monotonic() < deadline and not state.stopping.is_set():
                    if await request.is_disconnected():
                        return Response(status_code=499)
                    await asyncio.sleep(0.05)
            if fault.mode == "context_length" and fault.max_prompt_tokens is not None \
                    and prompt_tokens > fault.max_prompt_tokens:
                return _error(
                    400,
                    f"This model's maximum context length is {fault.max_prompt_tokens} tokens. "
                    f"However, your messages resulted in {prompt_tokens} tokens. "
                    "Please reduce the length of the messages.",
                    "invalid_request_error", "context_length_exceeded", "messages")

        if body.get("stream"):
            return _error(400, "The replay model does not support streaming; send "
                               "stream=false.", "invalid_request_error", param="stream")
        traj_id = request.headers.get(HEADER_TRAJECTORY)
        turn_raw = request.headers.get(HEADER_TURN)
        if not traj_id or turn_raw is None:
            missing = [h for h, v in ((HEADER_TRAJECTORY, traj_id), (HEADER_TURN, turn_raw))
                       if not v]
            return _error(400, f"Missing header(s) {', '.join(missing)}: the replay model needs "
                               f"{HEADER_TRAJECTORY} (trajectory id) and {HEADER_TURN} (0-based "
                               "turn index).", "invalid_request_error", "missing_replay_header")
        traj = state.find(traj_id)
        if traj is None:
            known = sorted(state.trajectories)
            sample = ", ".join(known[:5]) + (" …" if len(known) > 5 else "")
            return _error(400, f"Unknown trajectory {traj_id!r} in {HEADER_TRAJECTORY}; "
                               f"{len(known)} loaded (e.g. {sample or 'none'}).",
                          "invalid_request_error", "unknown_trajectory")
        try:
            turn_index = int(turn_raw)
        except ValueError:
            turn_index = -1
        if turn_index < 0:
            return _error(400, f"Invalid {HEADER_TURN} {turn_raw!r}: expected a 0-based "
                               "integer.", "invalid_request_error", "invalid_replay_turn")
        model = body["model"] if isinstance(body.get("model"), str) else REPLAY_MODEL_ID
        state.serve(traj, turn_index)
        return JSONResponse(_completion(seq, model, traj, turn_index, prompt_tokens))

    @app.post("/admin/faults")
    async def set_faults(request: Request) -> Response:
        try:
            cfg = FaultConfig.model_validate_json(await request.body())
        except ValidationError as exc:
            return _error(400, f"Invalid fault config: {exc.errors(include_url=False)}",
                          "invalid_request_error")
        state.set_faults(cfg)
        return JSONResponse(state.faults())

    @app.get("/admin/faults")
    async def get_faults() -> dict[str, Any]:
        return state.faults()

    @app.get("/admin/requests")
    async def get_requests(bodies: bool = True) -> dict[str, Any]:
        requests = state.requests()
        return {"requests": requests if bodies else [{k: v for k, v in r.items() if k != "body"} for r in requests]}

    @app.delete("/admin/requests")
    async def clear_requests() -> dict[str, Any]:
        state.clear_requests()
        return {"requests": []}

    return app


def _load(source: Iterable[Trajectory | str | Path] | str | Path) -> list[Trajectory]:
    if isinstance(source, (str, Path)):
        source = [source]
    trajs: list[Trajectory] = []
    paths: list[str] = []
    for item in source:
        if isinstance(item, Trajectory):
            trajs.append(item)
        else:
            paths.append(str(item))
    if paths:
        trajs.extend(iter_trajectories(paths))
    return trajs


# --------------------------------------------------------------------------- running


class ReplayModelServer:
    """The replay server on a background thread (uvicorn ``Server`` with ``should_exit``)."""

    def __init__(self, source: Iterable[Trajectory | str | Path] | str | Path,
                 host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self.state = ReplayState(_load(source))
        self.app = create_app(self.state)
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def root_url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI ``base_url``: ``http://HOST:PORT/v1``."""
        return f"{self.root_url}/v1"

    def start(self, timeout: float = 10.0) -> ReplayModelServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._requested_port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level=self._log_level, lifespan="off",
                                timeout_graceful_shutdown=2, access_log=False)
        self._server = uvicorn.Server(config)

        def run() -> None:
            try:
                self._server.run(sockets=[sock])  # type: ignore[union-attr]
            except BaseException as exc:  # pragma: no cover - surfaced by start()
                self._error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name=f"replay-model-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"replay model server did not start: {self._error!r}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.state.stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # conveniences for tests
    def set_faults(self, mode: FaultMode = "none", count: int = 1, **kw: Any) -> FaultConfig:
        return self.state.set_faults(FaultConfig(mode=mode, count=count, **kw))

    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests()

    def __enter__(self) -> ReplayModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_replay_model_server(source: Iterable[Trajectory | str | Path] | str | Path,
                              host: str = "127.0.0.1", port: int = 0) -> ReplayModelServer:
    """Start a server on a background thread (``port=0``: a free port); call ``.stop()``."""
    return ReplayModelServer(source, host=host, port=port).start()


@contextlib.asynccontextmanager
async def replay_model_server(source: Iterable[Trajectory | str | Path] | str | Path,
                              host: str = "127.0.0.1", port: int = 0
                              ) -> AsyncIterator[ReplayModelServer]:
    """``async with replay_model_server(paths) as s:`` – ``s.base_url`` is the OpenAI base URL."""
    server = ReplayModelServer(source, host=host, port=port)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def run_replay_model_server(host: str, port: int,
                            paths: Iterable[Trajectory | str | Path] | str | Path) -> None:
    """Serve in the foreground until interrupted."""
    trajs = _load(paths)
    print(f"replay model: {len(trajs)} trajectories, http://{host}:{port}/v1", flush=True)
    uvicorn.Server(uvicorn.Config(create_app(trajs), host=host, port=port,
                                  log_level="info")).run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m worker.replay.model_server",
                                     description="OpenAI-compatible server replaying recorded "
                                                 "agent trajectories.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--trajectory", action="append", required=True, metavar="PATH",
                        help="trajectory file or folder (repeatable)")
    args = parser.parse_args(argv)
    run_replay_model_server(args.host, args.port, args.trajectory)


if __name__ == "__main__":
    main()
