"""OpenAI Responses through the gateway: the agent's ``instructions`` and ``input`` items read
as a conversation (``workflows.context.from_responses_items``: a run of reasoning, assistant
messages and function calls is one assistant turn, kept verbatim so it goes back upstream as it
came), the bounded request sent upstream as Responses input, the answer returned as the
response the official ``openai`` SDK parses (or, streamed, the upstream's own events; an
answer that needs recall rounds, or a retry, as the events of the whole answer).

``previous_response_id`` is refused: the gateway keeps the conversation itself, so the agent
sends its whole input (the Agents SDK's default).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from worker.api.gateway.answer import Answer, Usage, count
from worker.api.gateway.conversation import Call, Conversation, GatewayInputError, Turn, stored_image
from workflows.context import FormatError, from_responses_items

PROTOCOL = "openai-responses"
OWN_FIELDS = {"input", "instructions", "stream", "stream_options"}


@dataclass
class ResponsesCall:
    conversation: Conversation
    model: str
    stream: bool
    tools: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)


def parse(body: Any) -> ResponsesCall:
    if not isinstance(body, dict):
        raise GatewayInputError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayInputError("model: required (the upstream model's name)")
    if body.get("previous_response_id"):
        raise GatewayInputError("previous_response_id: the gateway keeps the conversation itself; send the whole "
                                "input instead")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise GatewayInputError("tools: must be a list")
    turns: list[Turn] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        turns.append(Turn("system", instructions))
    given = body.get("input")
    if isinstance(given, str):
        turns.append(Turn("user", given))
    elif isinstance(given, list):
        turns += _turns(given)
    else:
        raise GatewayInputError("input: a string or a list of items is required")
    user = body.get("user") or body.get("safety_identifier") or ""
    conversation = Conversation(turns, salt=f"{PROTOCOL}|{user}")
    conversation.check()
    return ResponsesCall(conversation=conversation, model=model, stream=bool(body.get("stream")), tools=tools,
                         params={k: v for k, v in body.items() if k not in OWN_FIELDS})


def _turns(items: list[Any]) -> list[Turn]:
    if not all(isinstance(i, dict) for i in items):
        raise GatewayInputError("input: every item must be an object")
    items, images = _without_images(items)
    try:
        converted = from_responses_items(items)
    except FormatError as exc:
        raise GatewayInputError(str(exc).replace("responses_items", "input")) from None
    return [Turn(c.kind, c.text, tool_calls=tuple(Call(t.id, t.name, t.arguments) for t in c.tool_calls),
                 tool_call_id=c.tool_call_id, tool_name=c.tool_name,
                 extras={"responses_items": c.source} if c.kind == "assistant" else (
                     {"images": images[c.first]} if c.first in images else None))
            for c in converted]


def _without_images(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The items with the ``input_image`` parts of user messages and function call outputs taken
    out, and those images (stored parts) by the index of their item."""
    out, images = [], {}
    for index, item in enumerate(items):
        kind = item.get("type") or "message"
        field = "content" if kind == "message" and item.get("role") == "user" else (
            "output" if kind == "function_call_output" else None)
        parts = item.get(field) if field is not None else None
        if field is not None and isinstance(parts, list) and any(_is_image(p) for p in parts):
            images[index] = [stored_image({"type": "image_url", "image_url": {"url": p.get("image_url"),
                                                                               "detail": p.get("detail")}},
                                          f"input[{index}].{field}[{n}]")
                             for n, p in enumerate(parts) if _is_image(p)]
            item = {**item, field: [p for p in parts if not _is_image(p)]}
        out.append(item)
    return out, images


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_image"


def upstream_body(call: ResponsesCall, instructions: str | None, items: list[dict[str, Any]],
                  extra_tools: list[dict[str, Any]],
                  rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    body = dict(call.params)
    if instructions:
        body["instructions"] = instructions
    body["input"] = list(items) + [i for output, results in rounds for i in (*output["items"], *results)]
    tools = call.tools + extra_tools
    if tools:
        body["tools"] = tools
    body["stream"] = False
    return body


def answer_of(raw: Any) -> Answer:
    if not isinstance(raw, dict) or not isinstance(raw.get("output"), list):
        raise ValueError("the upstream answered no output")
    texts, calls = [], []
    for item in raw["output"]:
        if item.get("type") == "message":
            texts.append("".join(str(p.get("text", "")) for p in item.get("content") or ()
                                 if p.get("type") == "output_text"))
        elif item.get("type") == "function_call":
            calls.append(Call(str(item["call_id"]), str(item["name"]), str(item.get("arguments") or "{}")))
    usage = raw.get("usage") or {}
    details = usage.get("input_tokens_details") or {}
    turn = Turn("assistant", "\n\n".join(t for t in texts if t), tool_calls=tuple(calls),
                extras={"responses_items": raw["output"]})
    return Answer(turn=turn, stop=raw.get("status"), raw=raw,
                  usage=Usage(count(usage.get("input_tokens")), count(details.get("cached_tokens")),
                              count(usage.get("output_tokens"))))


def round_messages(answer: Answer, results: list[tuple[str, str]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return ({"items": answer.raw["output"]},
            [{"type": "function_call_output", "call_id": call_id, "output": text} for call_id, text in results])


def response(stored: dict[str, Any], model: str) -> dict[str, Any]:
    """The response the agent gets: the upstream's own, without the gateway's recall calls, its
    usage the sum of every upstream call the answer took."""
    raw = json.loads(json.dumps(stored["raw"]))
    if stored["stripped"]:
        kept = {c[0] for c in stored["tool_calls"]}
        raw["output"] = [i for i in raw.get("output", []) if i.get("type") != "function_call" or i.get("call_id") in kept]
    prompt, cached, completion = stored["usage"]
    raw["usage"] = {**(raw.get("usage") or {}), "input_tokens": prompt, "output_tokens": completion,
                    "total_tokens": prompt + completion, "input_tokens_details": {"cached_tokens": cached},
                    "output_tokens_details": (raw.get("usage") or {}).get("output_tokens_details")
                    or {"reasoning_tokens": 0}}
    raw.setdefault("id", "resp_lanes")
    raw.setdefault("object", "response")
    raw.setdefault("created_at", int(time.time()))
    raw.setdefault("model", model)
    raw.setdefault("status", "completed")
    return raw


def events(stored: dict[str, Any], model: str) -> Iterator[bytes]:
    """The response as the events the SDK's stream reads: created, each output item (added, its
    content or arguments, done), completed."""
    whole = response(stored, model)
    sequence = iter(range(1_000_000))

    def event(name: str, data: dict[str, Any]) -> bytes:
        body = {"type": name, "sequence_number": next(sequence), **data}
        return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()

    yield event("response.created", {"response": {**whole, "status": "in_progress", "output": []}})
    yield event("response.in_progress", {"response": {**whole, "status": "in_progress", "output": []}})
    for index, item in enumerate(whole.get("output", [])):
        kind = item.get("type")
        if kind == "message":
            yield event("response.output_item.added", {"output_index": index,
                                                       "item": {**item, "status": "in_progress", "content": []}})
            for part_index, part in enumerate(item.get("content") or ()):
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                yield event("response.content_part.added", {"item_id": item.get("id"), "output_index": index,
                                                            "content_index": part_index, "part": empty})
                if part.get("type") == "output_text":
                    where = {"item_id": item.get("id"), "output_index": index, "content_index": part_index}
                    yield event("response.output_text.delta", {**where, "delta": part.get("text", ""), "logprobs": []})
                    yield event("response.output_text.done", {**where, "text": part.get("text", ""), "logprobs": []})
                yield event("response.content_part.done", {"item_id": item.get("id"), "output_index": index,
                                                           "content_index": part_index, "part": part})
        elif kind == "function_call":
            yield event("response.output_item.added", {"output_index": index,
                                                       "item": {**item, "status": "in_progress", "arguments": ""}})
            where = {"item_id": item.get("id"), "output_index": index}
            yield event("response.function_call_arguments.delta", {**where, "delta": item.get("arguments", "")})
            yield event("response.function_call_arguments.done", {**where, "arguments": item.get("arguments", ""),
                                                                  "name": item.get("name")})
        else:
            yield event("response.output_item.added", {"output_index": index, "item": item})
        yield event("response.output_item.done", {"output_index": index, "item": item})
    yield event("response.completed", {"response": whole})
