"""A scripted upstream speaking both protocols the gateway forwards to, over real HTTP:
OpenAI Chat Completions (``POST /v1/chat/completions``) and Anthropic Messages
(``POST /v1/messages``). Each request is answered by the next scripted answer of its model
(an answer is text, tool calls, or an HTTP error), and recorded with its headers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.threaded_server import ThreadedServer


@dataclass
class Scripted:
    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (id, name, input)
    status: int = 200  # not 200: an error with this status
    usage: tuple[int, int, int] = (100, 0, 10)  # prompt (cached included), cached, completion
    # calls made from the request itself: the first observation:// address it shows, recalled
    recall_first_address: bool = False
    thinking: str = ""  # Anthropic: a signed thinking block before the text (non-streamed answers)
    hold: threading.Event | None = None  # answered once this is set (the request is recorded first)


class ScriptedUpstream:
    def __init__(self) -> None:
        self.scripts: dict[str, list[Scripted]] = {}
        self.requests: list[dict[str, Any]] = []  # {"protocol", "body", "headers"}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            answer = self._next("openai", body, request)
            if answer.hold is not None:
                await asyncio.to_thread(answer.hold.wait, 60)
            if answer.status != 200:
                return JSONResponse({"error": {"message": "scripted failure", "type": "rate_limit_error",
                                               "code": None}}, status_code=answer.status)
            if body.get("stream"):
                return StreamingResponse(self._chat_chunks(body, answer, f"chatcmpl-{next(self._ids)}"),
                                         media_type="text/event-stream")
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
        async def messages(request: Request) -> Response:
            body = await request.json()
            answer = self._next("anthropic", body, request)
            if answer.status != 200:
                return JSONResponse({"type": "error", "error": {"type": "rate_limit_error",
                                                                "message": "scripted failure"}},
                                    status_code=answer.status)
            if body.get("stream"):
                return StreamingResponse(self._message_events(body, answer, f"msg_{next(self._ids)}"),
                                         media_type="text/event-stream")
            content: list[dict[str, Any]] = [{"type": "thinking", "thinking": answer.thinking,
                                              "signature": f"sig-{len(answer.thinking)}"}] if answer.thinking else []
            content += [{"type": "text", "text": answer.text}] if answer.text else []
            content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in answer.calls]
            prompt, cached, completion = answer.usage
            return JSONResponse({
                "id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": "tool_use" if answer.calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt - cached, "output_tokens": completion,
                          "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}})

        @app.post("/v1/responses")
        async def responses(request: Request) -> Response:
            body = await request.json()
            answer = self._next("responses", body, request)
            if answer.status != 200:
                return JSONResponse({"error": {"message": "scripted failure", "type": "rate_limit_error",
                                               "code": None}}, status_code=answer.status)
            number = next(self._ids)
            output: list[dict[str, Any]] = [{"type": "reasoning", "id": f"rs_{number}", "summary": [],
                                             "encrypted_content": f"enc-{number}"}] if answer.thinking else []
            if answer.text:
                output.append({"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": answer.text, "annotations": []}]})
            output += [{"type": "function_call", "id": f"fc_{number}_{i}", "call_id": call_id, "name": name,
                        "arguments": json.dumps(arguments), "status": "completed"}
                       for i, (call_id, name, arguments) in enumerate(answer.calls)]
            prompt, cached, completion = answer.usage
            whole = {"id": f"resp_{number}", "object": "response", "created_at": 1, "status": "completed",
                     "model": body["model"], "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
                     "tools": body.get("tools", []),
                     "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                               "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": prompt + completion}}
            if body.get("stream"):
                return StreamingResponse(self._response_events(whole), media_type="text/event-stream")
            return JSONResponse(whole)

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

    @staticmethod
    def _chat_chunks(body: dict[str, Any], answer: Scripted, answer_id: str):
        base = {"id": answer_id, "object": "chat.completion.chunk", "created": 1, "model": body["model"]}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return b"data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta,
                                                                "finish_reason": finish}]}).encode() + b"\n\n"

        yield chunk({"role": "assistant", "content": ""})
        for piece in (answer.text[: len(answer.text) // 2], answer.text[len(answer.text) // 2:]):
            if piece:
                yield chunk({"content": piece})
        for index, (call_id, name, arguments) in enumerate(answer.calls):
            text = json.dumps(arguments)
            yield chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                         "function": {"name": name, "arguments": text[:5]}}]})
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": text[5:]}}]})
        yield chunk({}, "tool_calls" if answer.calls else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt, cached, completion = answer.usage
            yield b"data: " + json.dumps({**base, "choices": [], "usage": {
                "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}}).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    @staticmethod
    def _message_events(body: dict[str, Any], answer: Scripted, answer_id: str):
        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        prompt, cached, completion = answer.usage
        yield event("message_start", {"message": {
            "id": answer_id, "type": "message", "role": "assistant", "model": body["model"], "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": prompt - cached, "output_tokens": 0, "cache_read_input_tokens": cached,
                      "cache_creation_input_tokens": 0}}})
        index = 0
        if answer.text:
            yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            for piece in (answer.text[: len(answer.text) // 2], answer.text[len(answer.text) // 2:]):
                yield event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
            yield event("content_block_stop", {"index": 0})
            index = 1
        for n, (call_id, name, arguments) in enumerate(answer.calls, start=index):
            text = json.dumps(arguments)
            yield event("content_block_start", {"index": n, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}})
            for piece in (text[:5], text[5:]):
                yield event("content_block_delta", {"index": n, "delta": {"type": "input_json_delta",
                                                                          "partial_json": piece}})
            yield event("content_block_stop", {"index": n})
        yield event("message_delta", {"delta": {"stop_reason": "tool_use" if answer.calls else "end_turn",
                                                "stop_sequence": None}, "usage": {"output_tokens": completion}})
        yield event("message_stop", {})

    @staticmethod
    def _response_events(whole: dict[str, Any]):
        """A Responses stream: created, each output item added and done (text as one delta), completed."""
        numbers = itertools.count()

        def event(name: str, data: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': next(numbers), **data})}\n\n".encode()

        yield event("response.created", {"response": {**whole, "status": "in_progress", "output": []}})
        for index, item in enumerate(whole["output"]):
            yield event("response.output_item.added", {"output_index": index, "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                where = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield event("response.content_part.added", {**where, "part": {**item["content"][0], "text": ""}})
                yield event("response.output_text.delta", {**where, "delta": text, "logprobs": []})
                yield event("response.output_text.done", {**where, "text": text, "logprobs": []})
                yield event("response.content_part.done", {**where, "part": item["content"][0]})
            yield event("response.output_item.done", {"output_index": index, "item": item})
        yield event("response.completed", {"response": whole})

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
