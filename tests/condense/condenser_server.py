"""A scripted OpenAI-compatible condenser for the condensation tests.

Each chat request takes the next scripted step (``script(...)``); with the script empty it
answers a valid memory. Steps: a mode name or ``{"mode": ..., <parameters>}``.

* ``valid``: a memory that validates; its references are the first allowed observation
  address found in the request plus a workspace-relative path.
* ``fenced``: the valid memory inside a Markdown ```json fence.
* ``invalid_json``: text that is not JSON.
* ``schema``: JSON that fails the schema (unknown field, a string instead of a list).
* ``bad_reference``: valid shape, but an absolute path and an unknown observation.
* ``oversized_memory``: valid shape, far over 2,000 tokens.
* ``large_memory``: valid, close to the 2,000-token cap.
* ``http_429`` (``retry_after``: Retry-After value), ``http_500``, ``http_400``,
  ``context_length`` (HTTP 400 with OpenAI's ``context_length_exceeded``).
* ``garbage``: HTTP 200 whose body is not JSON.
* ``slow`` (``delay``): wait, then answer a valid memory.
* ``timeout`` (``delay``): wait longer than the client's timeout, then answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import deque
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from tests.threaded_server import ThreadedServer

ADDRESS = re.compile(r"observation://obs-[A-Za-z0-9][A-Za-z0-9_.-]*")


def valid_memory(request_body: dict) -> dict:
    prompt = "\n".join(m.get("content") or "" for m in request_body.get("messages", []))
    allowed = prompt.split("## Allowed observation addresses", 1)[-1].split("##", 1)[0]
    addresses = ADDRESS.findall(allowed)
    return {
        "completed_work": ["Reproduced the pydicom bug with a minimal script and located the faulty branch."],
        "strategies_and_outcomes": ["grep for the reader function found the culprit; the first patch broke a test."],
        "environment_changes": ["Edited pydicom/dataset.py (guard for empty values)."],
        "constraints": ["Do not change the public API."],
        "open_questions": ["Run the full test suite before submitting."],
        "references": [*addresses[:1], "pydicom/dataset.py"],
    }


class CondenserServer:
    def __init__(self) -> None:
        self.steps: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request):
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                self.headers.append(dict(request.headers))
                step = self.steps.popleft() if self.steps else {"mode": "valid"}
            return await self._answer(step, body)

        self._http = ThreadedServer(app)

    @property
    def base_url(self) -> str:
        return self._http.base_url

    def script(self, *steps: str | dict[str, Any]) -> None:
        """Replace the script and forget earlier requests."""
        with self._lock:
            self.steps = deque({"mode": s} if isinstance(s, str) else dict(s) for s in steps)
            self.requests.clear()
            self.headers.clear()

    def stop(self) -> None:
        self._http.stop()

    async def _answer(self, step: dict[str, Any], body: dict):
        mode = step["mode"]
        if mode in ("slow", "timeout"):
            await asyncio.sleep(step.get("delay", 2.0))
            mode = "valid"
        if mode == "http_429":
            return _error(429, "Rate limit reached", "rate_limit_exceeded",
                          headers={"Retry-After": str(step.get("retry_after", 7))})
        if mode == "http_500":
            return _error(500, "The server had an error while processing your request.", "server_error")
        if mode == "http_400":
            return _error(400, "Invalid value for 'model'.", "invalid_request_error")
        if mode == "context_length":
            return _error(400, "This model's maximum context length is 8192 tokens.", "invalid_request_error",
                          code="context_length_exceeded")
        if mode == "garbage":
            return PlainTextResponse("<html>upstream hiccup", media_type="application/json")
        memory = valid_memory(body)
        content = {
            "valid": lambda: json.dumps(memory),
            "fenced": lambda: f"```json\n{json.dumps(memory, indent=2)}\n```",
            "invalid_json": lambda: "Here is the memory: completed_work = reproduced the bug",
            "schema": lambda: json.dumps({**memory, "completed_work": "one string", "mood": ["fine"]}),
            "bad_reference": lambda: json.dumps({**memory, "references": ["/etc/passwd", "observation://obs-nope"]}),
            "oversized_memory": lambda: json.dumps({**memory, "completed_work": [
                f"Step {n}: inspected module number {n} and its tests, found nothing relevant there at all "
                "after a careful look at every function and branch in the file." for n in range(90)]}),
            "large_memory": lambda: json.dumps({**memory, "completed_work": [
                f"Step {n}: inspected module number {n} and its tests; " + "the reader keeps every tag it saw. " * 11
                for n in range(14)]}),
        }[mode]()
        return {
            "id": f"cond-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "condenser"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


def _error(status: int, message: str, type_: str, code: str | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, headers=headers,
                        content={"error": {"message": message, "type": type_, "param": None, "code": code}})
