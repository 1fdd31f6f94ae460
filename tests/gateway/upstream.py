"""A scripted upstream speaking both protocols the gateway forwards to, over real HTTP:
OpenAI Chat Completions (``POST /v1/chat/completions``) and Anthropic Messages
(``POST /v1/messages``). Each request is answered by the next scripted answer of its model
(an answer is text, tool calls, or an HTTP error), and recorded with its headers.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.threaded_server import ThreadedServer


@dataclass
class Scripted:
    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (id, name, input)
    status: int = 200  # not 200: an error with this status
    usage: tuple[int, int, int] = (100, 0, 10)  # prompt (cached included), cached, completion
    # calls made from the request itself: the first observation:// address it shows, recalled
    recall_first_address: bool = False


class ScriptedUpstream:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Scripted]] = {}
        self.requests: list[dict[str, Any]] = []  # {"protocol", "body", "headers"}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            answer = self._next("openai", body, request)
            if answer.status != 200:
                return JSONResponse({"error": {"message": "scripted failure", "type": "rate_limit_error",
                                               "code": None}}, status_code=answer.status)
            message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
            if answer.calls:
                message["tool_calls"] = [{"id": i, "type": "function",
                                          "function": {"name": n, "arguments": json.dumps(a)}}
                                         for i, n, a in answer.calls]
            prompt, cached, completion = answer.usage
            return JSONResponse({
                "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": 1,
                "model": body["model"],
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if answer.calls else "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": cached}}})

        @app.post("/v1/messages")
        async def messages(request: Request) -> JSONResponse:
            body = await request.json()
            answer = self._next("anthropic", body, request)
            if answer.status != 200:
                return JSONResponse({"type": "error", "error": {"type": "rate_limit_error",
                                                                "message": "scripted failure"}},
                                    status_code=answer.status)
            content: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
            content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in answer.calls]
            prompt, cached, completion = answer.usage
            return JSONResponse({
                "id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": "tool_use" if answer.calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt - cached, "output_tokens": completion,
                          "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}})

        self.server = ThreadedServer(app)

    def _next(self, protocol: str, body: dict[str, Any], request: Request) -> Scripted:
        with self._lock:
            self.requests.append({"protocol": protocol, "body": body, "headers": dict(request.headers)})
            script = self.scripts.get(body.get("model", ""), [])
            answer = script.pop(0) if script else Scripted(text=f"default answer {len(self.requests)}")
        if answer.recall_first_address:
            found = re.search(r"observation://obs-[A-Za-z0-9][A-Za-z0-9_-]*", json.dumps(body))
            assert found, "the request shows no observation:// address"
            answer = Scripted(calls=[("call_recall", "recall_observation", {"address": found.group(0)})])
        return answer

    def script(self, model: str, *answers: Scripted) -> None:
        with self._lock:
            self.scripts.setdefault(model, []).extend(answers)

    def of(self, model: str) -> list[dict[str, Any]]:
        """The bodies the gateway sent for ``model``, in order."""
        with self._lock:
            return [r["body"] for r in self.requests if r["body"].get("model") == model]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.stop()
