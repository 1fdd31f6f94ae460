"""One rendered request in the format a client asks for: ``chat`` (OpenAI Chat Completions),
``responses`` (OpenAI Responses API) or ``anthropic`` (Anthropic Messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..content import ItemContent
from ..render import Rendered
from .anthropic_request import anthropic_request, anthropic_tools
from .images import chat_message
from .responses_request import responses_input, responses_tools

RequestFormat = Literal["chat", "responses", "anthropic"]
REQUEST_FORMATS: tuple[RequestFormat, ...] = ("chat", "responses", "anthropic")


@dataclass
class FormattedRequest:
    format: RequestFormat
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)  # chat and anthropic
    input: list[dict[str, Any]] = field(default_factory=list)  # responses
    instructions: str | None = None  # responses
    system: list[dict[str, Any]] | None = None  # anthropic
    cache_breakpoints: list[int] = field(default_factory=list)  # anthropic: chat message indices


def format_request(fmt: RequestFormat, turns: list[Rendered], contents: dict[str, ItemContent],
                   tools: list[dict[str, Any]], stable_prefix_messages: int) -> FormattedRequest:
    """``turns`` (the chat rendering, with the entry of each message) in format ``fmt``."""
    if fmt == "chat":
        return FormattedRequest(format=fmt, tools=tools, messages=[chat_message(t.message) for t in turns])
    if fmt == "responses":
        instructions, items = responses_input(turns, contents)
        return FormattedRequest(format=fmt, tools=responses_tools(tools), input=items, instructions=instructions)
    request = anthropic_request([t.message for t in turns], stable_prefix_messages)
    return FormattedRequest(format=fmt, tools=anthropic_tools(tools), messages=request.messages,
                            system=request.system, cache_breakpoints=request.breakpoints)
