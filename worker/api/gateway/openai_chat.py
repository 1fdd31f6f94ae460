"""OpenAI Chat Completions through the gateway: the agent's request read as a conversation,
the bounded request sent upstream with the agent's own parameters, the answer returned in
the shape the official ``openai`` SDK parses (a completion, or its chunks when streamed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from worker.api.gateway.answer import Answer, Usage, count
from worker.api.gateway.conversation import Call, Conversation, GatewayInputError, Turn, text_and_images

PROTOCOL = "openai-chat"
# Fields the gateway sets itself; every other field of the agent's request goes upstream as sent.
OWN_FIELDS = {"messages", "stream", "stream_options"}


@dataclass
class ChatCall:
    conversation: Conversation
    model: str
    stream: bool
    tools: list[dict[str, Any]]  # as the agent sent them
    params: dict[str, Any] = field(default_factory=dict)  # the rest of the request, passed through
    include_usage: bool = False  # the agent asked for usage in the last chunk


def parse(body: Any) -> ChatCall:
    if not isinstance(body, dict):
        raise GatewayInputError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayInputError("model: required (the upstream model's name)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayInputError("messages: a non-empty list is required")
    if body.get("n") not in (None, 1):
        raise GatewayInputError("n: the gateway answers one choice per call (n=1)")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise GatewayInputError("tools: must be a list")
    user = body.get("user") or body.get("safety_identifier") or ""
    conversation = Conversation(_turns(messages), salt=f"{PROTOCOL}|{user}")
    conversation.check()
    options = body.get("stream_options") or {}
    return ChatCall(conversation=conversation, model=model, stream=bool(body.get("stream")), tools=tools,
                    params={k: v for k, v in body.items() if k not in OWN_FIELDS},
                    include_usage=bool(isinstance(options, dict) and options.get("include_usage")))


def _turns(messages: list[Any]) -> list[Turn]:
    turns: list[Turn] = []
    names: dict[str, str] = {}  # tool call id -> tool name
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            raise GatewayInputError(f"messages[{n}]: must be an object")
        role = message.get("role")
        content = message.get("content")
        images: list[dict[str, Any]] = []
        if type(content) is str:  # most messages: read without building the names an error would give
            text = content
        else:
            text, images = text_and_images(content, f"messages[{n}].content", images=role == "user")
        if role == "user":
            turns.append(Turn("user", text, extras={"images": images} if images else None))
        elif role == "assistant":
            listed = message.get("tool_calls")
            calls = tuple(_call(c, f"messages[{n}].tool_calls[{i}]") for i, c in enumerate(listed)) if listed else ()
            names.update({c.id: c.name for c in calls})
            turns.append(Turn("assistant", text, tool_calls=calls))
        elif role in ("system", "developer"):
            if turns and turns[-1].kind == "system" and len(turns) == 1:  # several at the start: one prompt
                turns[-1] = Turn("system", turns[-1].text + "\n\n" + text)
            else:
                turns.append(Turn("system", text))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise GatewayInputError(f"messages[{n}].tool_call_id: required for a tool message")
            turns.append(Turn("tool_result", text, tool_call_id=call_id, tool_name=names.get(call_id)))
        else:
            raise GatewayInputError(f"messages[{n}].role: {role!r} is not one of system, developer, user, assistant, "
                                    "tool")
    return turns


def _call(call: Any, where: str) -> Call:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(call.get("id"), str):
        raise GatewayInputError(f"{where}: a tool call needs an id and a function with a name")
    arguments = fn.get("arguments")
    return Call(call["id"], fn["name"], arguments if isinstance(arguments, str) else json.dumps(arguments or {}))


def upstream_body(call: ChatCall, messages: list[dict[str, Any]], extra_tools: list[dict[str, Any]],
                  rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    """The bounded request: the planned ``messages``, then any recall rounds of this call."""
    body = dict(call.params)
    body["messages"] = messages + [m for assistant, results in rounds for m in (assistant, *results)]
    tools = call.tools + extra_tools
    if tools:
        body["tools"] = tools
    body["stream"] = False
    return body


def answer_of(raw: Any) -> Answer:
    """The upstream completion, or ``ValueError`` naming what is missing."""
    try:
        choice = raw["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("the upstream answered no choice with a message") from None
    calls = tuple(_call(c, f"choices[0].message.tool_calls[{i}]")
                  for i, c in enumerate(message.get("tool_calls") or ()))
    usage = raw.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return Answer(turn=Turn("assistant", message.get("content") or "", tool_calls=calls),
                  stop=choice.get("finish_reason"), raw=raw,
                  usage=Usage(count(usage.get("prompt_tokens")), count(details.get("cached_tokens")),
                              count(usage.get("completion_tokens"))))


def assistant_message(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in turn.tool_calls]
    return message


def tool_message(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def completion(stored: dict[str, Any], model: str) -> dict[str, Any]:
    """The completion the agent gets: the upstream's own (with the gateway's recall calls taken
    out when it made any), its usage the sum of every upstream call the answer took."""
    raw = json.loads(json.dumps(stored["raw"]))  # a copy
    turn = _stored_turn(stored)
    choice = raw.setdefault("choices", [{}])[0]
    if stored["stripped"] or "message" not in choice:
        choice["message"] = assistant_message(turn)
        choice["finish_reason"] = "tool_calls" if turn.tool_calls else "stop"
    prompt, cached, completion_tokens = stored["usage"]
    raw["usage"] = {**(raw.get("usage") or {}), "prompt_tokens": prompt, "completion_tokens": completion_tokens,
                    "total_tokens": prompt + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached}}
    raw.setdefault("id", "chatcmpl-lanes")
    raw.setdefault("object", "chat.completion")
    raw.setdefault("created", int(time.time()))
    raw.setdefault("model", model)
    return raw


def _stored_turn(stored: dict[str, Any]) -> Turn:
    return Turn("assistant", stored["text"], tool_calls=tuple(Call(*c) for c in stored["tool_calls"]))


def chunks(stored: dict[str, Any], model: str, include_usage: bool) -> Iterator[bytes]:
    """The completion as the SSE stream the SDK reads: a role chunk, the text, each tool call
    (its arguments as one delta), the finish reason, the usage chunk when asked, ``[DONE]``."""
    whole = completion(stored, model)
    turn = _stored_turn(stored)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": whole["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    if turn.text:
        yield chunk({"content": turn.text})
    for index, call in enumerate(turn.tool_calls):
        yield chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                     "function": {"name": call.name, "arguments": call.arguments}}]})
    yield chunk({}, whole["choices"][0].get("finish_reason") or "stop")
    if include_usage:
        yield b"data: " + json.dumps({**base, "choices": [], "usage": whole["usage"]}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def error_body(status: int, kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    """An error as OpenAI writes them (the SDK raises the status's exception with this body)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


CONTEXT_LENGTH_CODE = "context_length_exceeded"
