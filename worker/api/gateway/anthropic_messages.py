"""Anthropic Messages through the gateway: the agent's request read as a conversation, the
bounded request sent upstream (with prompt-cache breakpoints where the plan's stable segments
end, ``workflows.context.formats.anthropic_request``) and the agent's own parameters and beta
headers, the answer returned as the official ``anthropic`` SDK parses it (a message, or its
event stream).

An Anthropic user message that carries tool results is one turn per result, then one turn
for its text, as a chat conversation would have them. Thinking blocks the agent sends back
are not stored; those of a tool-using turn go upstream again with that turn (``thinking``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from worker.api.gateway.answer import Answer, Usage, count
from worker.api.gateway.conversation import (
    Call,
    Conversation,
    GatewayInputError,
    Turn,
    joined_text,
    stored_image,
    text_and_images,
)

PROTOCOL = "anthropic-messages"
OWN_FIELDS = {"messages", "system", "stream"}
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")


@dataclass
class MessagesCall:
    conversation: Conversation
    model: str
    stream: bool
    tools: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    # The thinking blocks the agent sent back, by the tool_use ids of their turn: Anthropic wants a
    # tool-using turn's thinking (signed) passed back with it, so the upstream request gets them
    # from the agent's own call (they are not stored: the agent always sends them).
    thinking: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def parse(body: Any) -> MessagesCall:
    if not isinstance(body, dict):
        raise GatewayInputError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayInputError("model: required (the upstream model's name)")
    if not isinstance(body.get("max_tokens"), int):
        raise GatewayInputError("max_tokens: required (an integer)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayInputError("messages: a non-empty list is required")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise GatewayInputError("tools: must be a list")
    turns = []
    if (system := _system_text(body.get("system"))) is not None:
        turns.append(Turn("system", system))
    thinking: dict[str, list[dict[str, Any]]] = {}
    turns += _turns(messages, thinking)
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    conversation = Conversation(turns, salt=f"{PROTOCOL}|{metadata.get('user_id') or ''}")
    conversation.check()
    return MessagesCall(conversation=conversation, model=model, stream=bool(body.get("stream")), tools=tools,
                        params={k: v for k, v in body.items() if k not in OWN_FIELDS}, thinking=thinking)


def _system_text(system: Any) -> str | None:
    if system is None or system == "" or system == []:
        return None
    return joined_text(system, "system")


def _turns(messages: list[Any], thinking: dict[str, list[dict[str, Any]]]) -> list[Turn]:
    turns: list[Turn] = []
    names: dict[str, str] = {}
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise GatewayInputError(f"{where}.role: must be user, assistant or system")
        content = message.get("content")
        if message["role"] == "system":  # a reminder mid-conversation: a system item where it came
            turns.append(Turn("system", joined_text(content, f"{where}.content")))
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise GatewayInputError(f"{where}.content: must be a string or a list of blocks")
        if message["role"] == "assistant":
            texts, calls, thoughts = [], [], []
            for i, block in enumerate(blocks):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind == "text":
                    texts.append(str(block.get("text", "")))
                elif kind == "tool_use":
                    call = Call(str(block.get("id")), str(block.get("name")),
                                json.dumps(block.get("input") or {}, sort_keys=True))
                    names[call.id] = call.name
                    calls.append(call)
                elif kind in ("thinking", "redacted_thinking"):
                    thoughts.append(block)
                else:
                    raise GatewayInputError(f"{where}.content[{i}]: a {kind!r} block cannot pass the gateway")
            if thoughts and calls:
                thinking.update({call.id: thoughts for call in calls})
            turns.append(Turn("assistant", "\n".join(texts), tool_calls=tuple(calls)))
            continue
        texts, images = [], []
        for i, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                call_id = block.get("tool_use_id")
                text, shown = text_and_images(block.get("content"), f"{where}.content[{i}].content")
                if block.get("is_error"):
                    text = f"[error] {text}"
                turns.append(Turn("tool_result", text, tool_call_id=call_id, tool_name=names.get(str(call_id)),
                                  extras={"images": shown} if shown else None))
            elif kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "image":
                images.append(stored_image(block, f"{where}.content[{i}]"))
            else:
                raise GatewayInputError(f"{where}.content[{i}]: a {kind!r} block cannot pass the gateway (text, "
                                        "image, tool_use and tool_result only)")
        if texts or images or not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            turns.append(Turn("user", "\n".join(texts), extras={"images": images} if images else None))
    return turns


def upstream_body(call: MessagesCall, system: list[dict[str, Any]] | None, messages: list[dict[str, Any]],
                  extra_tools: list[dict[str, Any]],
                  rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    body = dict(call.params)
    if system:
        body["system"] = system
    body["messages"] = [_with_thinking(m, call.thinking) for m in messages]
    for assistant, results in rounds:
        body["messages"] += [assistant, {"role": "user", "content": results}]
    tools = call.tools + extra_tools
    if tools:
        body["tools"] = tools
    body["stream"] = False
    return body


def _with_thinking(message: dict[str, Any], thinking: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """An assistant message with the thinking the agent sent back for its tool calls, first."""
    if message.get("role") != "assistant" or not thinking:
        return message
    content = message.get("content") or []
    uses = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    thoughts = next((thinking[u] for u in uses if u in thinking), None)
    if not thoughts or any(isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in content):
        return message
    return {**message, "content": [*thoughts, *content]}


def answer_of(raw: Any) -> Answer:
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
        raise ValueError("the upstream answered no message content")
    texts, calls = [], []
    for block in raw["content"]:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(Call(str(block["id"]), str(block["name"]), json.dumps(block.get("input") or {}, sort_keys=True)))
    usage = raw.get("usage") or {}
    read, written = count(usage.get("cache_read_input_tokens")), count(usage.get("cache_creation_input_tokens"))
    return Answer(turn=Turn("assistant", "\n".join(texts), tool_calls=tuple(calls)), stop=raw.get("stop_reason"),
                  raw=raw, usage=Usage(count(usage.get("input_tokens")) + read + written, read,
                                       count(usage.get("output_tokens"))))


def assistant_message(answer: Answer) -> dict[str, Any]:
    """The upstream's own message, as the next round sends it back (thinking blocks included)."""
    return {"role": "assistant", "content": answer.raw["content"]}


def tool_result_block(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def message(stored: dict[str, Any], model: str) -> dict[str, Any]:
    """The message the agent gets: the upstream's own, without the gateway's recall calls, its
    usage the sum of every upstream call the answer took."""
    raw = json.loads(json.dumps(stored["raw"]))
    if stored["stripped"]:
        kept = {c[0] for c in stored["tool_calls"]}
        raw["content"] = [b for b in raw.get("content", []) if b.get("type") != "tool_use" or b.get("id") in kept]
        if not kept:
            raw["stop_reason"] = "end_turn"
    prompt, cached, completion_tokens = stored["usage"]
    raw["usage"] = {**(raw.get("usage") or {}), "input_tokens": max(0, prompt - cached),
                    "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0,
                    "output_tokens": completion_tokens}
    raw.setdefault("id", "msg_lanes")
    raw.setdefault("type", "message")
    raw.setdefault("role", "assistant")
    raw.setdefault("model", model)
    raw.setdefault("stop_sequence", None)
    return raw


def events(stored: dict[str, Any], model: str) -> Iterator[bytes]:
    """The message as the SSE events the SDK reads: message_start, each block (start, one
    delta, stop), message_delta with the stop reason and usage, message_stop."""
    whole = message(stored, model)

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {**whole, "content": [], "stop_reason": None,
             "usage": {**whole["usage"], "output_tokens": 0}}
    yield event("message_start", {"message": start})
    for index, block in enumerate(whole.get("content", [])):
        kind = block.get("type")
        if kind == "text":
            yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
            yield event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": block["text"]}})
        elif kind == "tool_use":
            yield event("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            yield event("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}})
        elif kind == "thinking":
            yield event("content_block_start", {"index": index, "content_block": {
                "type": "thinking", "thinking": "", "signature": ""}})
            yield event("content_block_delta", {"index": index, "delta": {
                "type": "thinking_delta", "thinking": block.get("thinking", "")}})
            yield event("content_block_delta", {"index": index, "delta": {
                "type": "signature_delta", "signature": block.get("signature", "")}})
        else:
            yield event("content_block_start", {"index": index, "content_block": block})
        yield event("content_block_stop", {"index": index})
    yield event("message_delta", {"delta": {"stop_reason": whole.get("stop_reason"), "stop_sequence": None},
                                  "usage": {"output_tokens": whole["usage"]["output_tokens"]}})
    yield event("message_stop", {})


def error_body(status: int, kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    """An error as Anthropic writes them."""
    return {"type": "error", "error": {"type": _KINDS.get(kind, kind), "message": message}}


_KINDS = {"invalid_request_error": "invalid_request_error", "authentication_error": "authentication_error",
          "not_found_error": "not_found_error", "rate_limit_error": "rate_limit_error", "api_error": "api_error",
          "overloaded_error": "overloaded_error"}
