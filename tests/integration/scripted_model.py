"""A scripted OpenAI-compatible model for live-mode tests.

It answers the k-th model call of a task (k = assistant messages already in the
request) with the k-th scripted message, over real HTTP, so the hosted loop runs
exactly as it would against a provider. A session whose model is the name of a script
added with ``add`` gets that script; every other session the default one. ``add(...,
usage=fn)`` makes the server report ``fn(body)`` as the answer's ``usage`` (None: omitted);
``add(..., sequential=True)`` answers the n-th request of that model with the n-th message,
whatever the request holds (a session that compacts its old answers away).

A condensation call (the LLM condenser's system prompt, activities/condense.py) is answered
with a valid memory and consumes no script: ``condensations`` lists their bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request

from activities.condense import SYSTEM_PROMPT
from tests.threaded_server import ThreadedServer

CONDENSER_PROMPT_START = SYSTEM_PROMPT.split("{", 1)[0]


def tool_call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _is_condensation(body: dict) -> bool:
    messages = body.get("messages") or []
    first = messages[0].get("content") if messages else None
    return isinstance(first, str) and first.startswith(CONDENSER_PROMPT_START)


def _memory_answer(body: dict) -> dict:
    memory = {"completed_work": ["scripted condensation of the earlier history"], "strategies_and_outcomes": [],
              "environment_changes": [], "constraints": [], "open_questions": [], "references": []}
    return {"id": "scripted-condensation", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(memory)},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class ScriptedModel:
    def __init__(self, script: list[dict]) -> None:
        self.script = script
        self.scripts: dict[str, list[dict]] = {}
        self.usages: dict[str, Callable[[dict], dict | None]] = {}
        self.sequential: dict[str, int] = {}  # model -> requests answered so far
        self.reported: list[tuple[str, dict | None]] = []  # (model, usage) of each answer, in order
        self.requests: list[dict] = []
        self.condensations: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict:
            body = await request.json()
            if _is_condensation(body):
                self.condensations.append(body)
                return _memory_answer(body)
            self.requests.append(body)
            turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if body.get("model", "") in self.sequential:
                turn = self.sequential[body["model"]]
                self.sequential[body["model"]] += 1
            script = self.scripts.get(body.get("model", ""), self.script)
            message = script[min(turn, len(script) - 1)]
            usage_of = self.usages.get(body.get("model", ""))
            usage = usage_of(body) if usage_of else {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            self.reported.append((body.get("model", ""), usage))
            answer: dict[str, Any] = {
                "id": f"scripted-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", **message},
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }],
            }
            if usage is not None:
                answer["usage"] = usage
            return answer

        self._http = ThreadedServer(app)

    def add(self, model: str, script: list[dict], usage: Callable[[dict], dict | None] | None = None,
            sequential: bool = False) -> str:
        """Sessions whose model is ``model`` follow ``script`` (and report ``usage(body)``);
        returns the model name."""
        self.scripts[model] = script
        if usage is not None:
            self.usages[model] = usage
        if sequential:
            self.sequential[model] = 0
        return model

    @property
    def base_url(self) -> str:
        return self._http.base_url

    def stop(self) -> None:
        self._http.stop()
