"""A scripted OpenAI-compatible Chat Completions server for agent-framework tests.

It answers the n-th call with the n-th scripted message whatever the request holds (a
compacted request no longer shows how many turns came before), over real HTTP, and keeps
every request body it received so a test can check what the model was really sent. Its
``usage`` counts are made up from the request's size (about 4 characters a token, a quarter
of it cached) and kept too, so a test can check what reached the session.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import FastAPI, HTTPException, Request

from tests.threaded_server import ThreadedServer


def bash_call(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


class ScriptedChat:
    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict[str, Any]:
            body = await request.json()
            with self._lock:
                n = len(self.requests)
                self.requests.append(body)
            if n >= len(self.script):
                raise HTTPException(400, f"the script has {len(self.script)} answers; this is call {n + 1}")
            message = self.script[n]
            if callable(message):  # an answer made from the request (e.g. an address it shows)
                message = message(body)
            prompt = len(json.dumps(body.get("messages", []))) // 4 + 1
            usage = {"prompt_tokens": prompt, "completion_tokens": len(json.dumps(message)) // 4 + 1,
                     "prompt_tokens_details": {"cached_tokens": prompt // 4}}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            with self._lock:
                self.usages.append(usage)
            return {
                "id": f"scripted-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, **message},
                             "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": usage,
            }

        self._http = ThreadedServer(app)

    @property
    def base_url(self) -> str:
        return self._http.base_url

    def stop(self) -> None:
        self._http.stop()
