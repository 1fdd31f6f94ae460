"""A scripted OpenAI-compatible model for live-mode tests.

It answers the k-th model call of a task (k = assistant messages already in the
request) with the k-th scripted message, over real HTTP, so the hosted loop runs
exactly as it would against a provider.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import uvicorn
from fastapi import FastAPI, Request


def tool_call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class ScriptedModel:
    def __init__(self, script: list[dict]) -> None:
        self.script = script
        self.requests: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict:
            body = await request.json()
            self.requests.append(body)
            turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
            message = self.script[min(turn, len(self.script) - 1)]
            return {
                "id": f"scripted-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", **message},
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
