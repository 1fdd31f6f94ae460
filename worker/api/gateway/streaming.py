"""Streaming through the gateway: the upstream's SSE events forwarded to the agent as they
arrive (its own bytes, so what the SDK parses is what the provider sent), while the answer is
put together from them to be stored when the stream ends.

Chat Completions: the gateway asks the upstream for usage in the last chunk
(``stream_options.include_usage``) and, when the agent did not ask for it, leaves that chunk
out of what it forwards. Messages: every event is forwarded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[bytes, str | None, Any]]:
    """(the event's raw bytes, its ``event:`` name, its ``data:`` parsed as JSON or None)."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if line:
            lines.append(line)
            continue
        if lines:
            yield _event(lines)
            lines = []
    if lines:
        yield _event(lines)


def _event(lines: list[str]) -> tuple[bytes, str | None, Any]:
    name = next((line[6:].strip() for line in lines if line.startswith("event:")), None)
    data = "\n".join(line[5:].lstrip() for line in lines if line.startswith("data:"))
    try:
        parsed = json.loads(data) if data and data != "[DONE]" else None
    except ValueError:
        parsed = None
    return ("\n".join(lines) + "\n\n").encode(), name, parsed


class ChatAccumulator:
    """A Chat Completions stream's chunks put together as the completion they make."""

    def __init__(self) -> None:
        self.base: dict[str, Any] = {}
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        self.base = self.base or {k: chunk.get(k) for k in ("id", "created", "model")}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                entry = self.calls.setdefault(call.get("index", 0), {"id": None, "name": "", "arguments": ""})
                fn = call.get("function") or {}
                entry["id"] = call.get("id") or entry["id"]
                entry["name"] += fn.get("name") or ""
                entry["arguments"] += fn.get("arguments") or ""
            self.finish = choice.get("finish_reason") or self.finish

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for _, c in sorted(self.calls.items())]
        return {**self.base, "object": "chat.completion", "usage": self.usage or {},
                "choices": [{"index": 0, "message": message, "finish_reason": self.finish}]}


class MessagesAccumulator:
    """A Messages stream's events put together as the message they make."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}

    def feed(self, name: str | None, data: Any) -> None:
        if not isinstance(data, dict):
            return
        kind = data.get("type") or name
        if kind == "message_start":
            self.message = dict(data.get("message") or {})
        elif kind == "content_block_start":
            self.blocks[data.get("index", 0)] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(data.get("index", 0), {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                self.json_parts.setdefault(data.get("index", 0), []).append(delta.get("partial_json", ""))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "message_delta":
            self.message.update(data.get("delta") or {})
            self.message["usage"] = {**(self.message.get("usage") or {}), **(data.get("usage") or {})}

    def raw(self) -> dict[str, Any]:
        content = []
        for index, block in sorted(self.blocks.items()):
            if block.get("type") == "tool_use" and index in self.json_parts:
                text = "".join(self.json_parts[index])
                try:
                    block = {**block, "input": json.loads(text) if text else {}}
                except ValueError:
                    block = {**block, "input": {"arguments": text}}
            content.append(block)
        return {**self.message, "content": content}
