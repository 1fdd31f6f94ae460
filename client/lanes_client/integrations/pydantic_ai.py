"""pydantic-ai (2.62.x) on a Context Lanes session: a capability, so the agent keeps its model,
tools and message history, and every model request it makes is the session's bounded request::

    from pydantic_ai import Agent

    lanes = LanesCapability(AsyncLanesClient(), budget_tokens=16_000)
    agent = Agent("openai:gpt-4.1", instructions="You fix bugs.", tools=[read_file], capabilities=[lanes])
    result = await agent.run("Fix the failing test")

Before each model request (``before_model_request``) the messages of the run that the
session has not stored yet go to it in one ``step`` (system prompt, user prompts, each model
response with its tool calls, each tool return with its call id), and the request's messages
are replaced by the session's bounded request mapped back to pydantic-ai's messages. The
first request opens an external session with the agent's model, its instructions as the
session's system prompt (sent once, inside the bounded request: pydantic-ai's own copy is
left out of the request so it is neither sent twice nor outside the budget) and its tools'
definitions as the session's ``tool_definitions``. Items are stored under their position in
the run's history and steps under a digest of what they carry, so a retried request stores
nothing twice. The provider's counts of each response go with the next step (``usage``).

Archived output stays reachable: the capability gives the agent a ``recall_observation``
tool (``recall=False`` leaves it out), which reads the exact text behind an
``observation://`` address a compacted request shows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.toolsets import FunctionToolset

from lanes_client.client import AsyncLanesClient
from lanes_client.integrations import RECALL_TOOL, read_recall
from lanes_client.schemas import ItemIn, PreparedRequestOut, ToolCallIn, UsageIn

__all__ = ["ITEM_ID_PREFIX", "LanesCapability", "request_messages", "response_item"]

ITEM_ID_PREFIX = "pai-"


def _text(content: Any) -> str:
    """A prompt's content as text (a sequence of parts: its strings)."""
    if isinstance(content, str):
        return content
    return "\n".join(part for part in content if isinstance(part, str))


def request_items(message: ModelRequest, position: int) -> list[ItemIn]:
    """The items of one request message of the history (its parts in order)."""
    items = []
    for n, part in enumerate(message.parts):
        item_id = f"{ITEM_ID_PREFIX}{position}-{n}"
        if isinstance(part, SystemPromptPart):
            items.append(ItemIn(kind="system", role="system", text=part.content, item_id=item_id))
        elif isinstance(part, UserPromptPart):
            items.append(ItemIn(kind="user", role="user", text=_text(part.content), item_id=item_id))
        elif isinstance(part, ToolReturnPart):
            items.append(ItemIn(kind="tool_result", role="tool", text=part.model_response_str(),
                                tool_call_id=part.tool_call_id, tool_name=part.tool_name, item_id=item_id))
        elif isinstance(part, RetryFeedbackPart):  # a retry that answers no call: the model reads it as user text
            items.append(ItemIn(kind="user", role="user", text=part.model_response(), item_id=item_id))
        # other parts (instruction or settings deltas, tool search) carry nothing a chat model reads
    return items


def response_item(message: ModelResponse, position: int) -> ItemIn:
    """One model response as one assistant item: its text and its tool calls (thinking is not stored)."""
    text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
    calls = [ToolCallIn(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
             for part in message.parts if isinstance(part, ToolCallPart)]
    return ItemIn(kind="assistant", role="assistant", text=text, tool_calls=calls, item_id=f"{ITEM_ID_PREFIX}{position}")


def request_messages(request: PreparedRequestOut) -> list[ModelMessage]:
    """The session's bounded request (Chat Completions messages) as pydantic-ai's history:
    consecutive system, user and tool messages make one request, each assistant message one response."""
    names = {call["id"]: call["function"]["name"] for m in request.messages if m.get("role") == "assistant"
             for call in m.get("tool_calls") or ()}
    out: list[ModelMessage] = []
    pending: list[Any] = []

    def flush() -> None:
        if pending:
            out.append(ModelRequest(parts=list(pending)))
            pending.clear()

    for message in request.messages:
        role, content = message.get("role"), message.get("content") or ""
        text = content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)
        if role == "system":
            pending.append(SystemPromptPart(content=text))
        elif role == "user":
            pending.append(UserPromptPart(content=text))
        elif role == "tool":
            call_id = message["tool_call_id"]
            pending.append(ToolReturnPart(tool_name=names.get(call_id, ""), content=text, tool_call_id=call_id))
        else:
            flush()
            parts: list[Any] = [TextPart(content=text)] if text else []
            parts += [ToolCallPart(tool_name=call["function"]["name"], args=call["function"]["arguments"] or "{}",
                                   tool_call_id=call["id"]) for call in message.get("tool_calls") or ()]
            out.append(ModelResponse(parts=parts))
    flush()
    return out


class LanesCapability(AbstractCapability[Any]):
    """``client``: an ``AsyncLanesClient``. ``session_id``: an existing external session;
    without it one is opened at the first model request with ``session`` as its settings
    (``budget_tokens``, ``context_window``, ``compaction``...)."""

    def __init__(self, client: AsyncLanesClient, *, session_id: str | None = None, recall: bool = True,
                 **session: Any) -> None:
        self.client = client
        self.session_id = session_id
        self.recall = recall
        self.session_settings = session
        self.stored = 0  # messages of the history stored in the session
        self.last_request: PreparedRequestOut | None = None
        self._usage: UsageIn | None = None

    def get_toolset(self) -> FunctionToolset[Any] | None:
        if not self.recall:
            return None
        toolset: FunctionToolset[Any] = FunctionToolset()

        @toolset.tool_plain(name=RECALL_TOOL)
        async def recall_observation(address: str, offset: int | None = None, limit: int | None = None) -> str:
            """Read archived output back exactly: the text stored at an observation:// address,
            from offset (at most one read's worth)."""
            assert self.session_id is not None
            cap = self.last_request.recall_chars if self.last_request is not None else None
            return await read_recall(self.client, self.session_id, address, offset, limit, cap)

        return toolset

    async def before_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext
                                   ) -> ModelRequestContext:
        params = request_context.model_request_parameters
        instructions = "\n\n".join(part.content for part in params.instruction_parts or [])
        if self.session_id is None:
            tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                       "parameters": t.parameters_json_schema}}
                     for t in params.function_tools]
            created = await self.client.create_session(
                mode="external", model=request_context.model.model_name, system_prompt=instructions or None,
                tool_definitions=tools or None, recall="tool" if self.recall else None, **self.session_settings)
            self.session_id = created.session_id
        request = await self._store(request_context.messages)
        self.last_request = request
        # the instructions are the session's system prompt, inside the bounded request
        return replace(request_context, messages=request_messages(request),
                       model_request_parameters=replace(params, instruction_parts=None))

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        """The run's last messages (its final answer), which no model request carried."""
        history = result.all_messages()
        if self.session_id is not None and len(history) > self.stored:
            await self._store(history)
        return result

    async def _store(self, history: list[ModelMessage]) -> PreparedRequestOut:
        """Store the messages of ``history`` not stored yet (with the last response's usage) in
        one step keyed by what it carries; the session's next request."""
        assert self.session_id is not None
        items: list[ItemIn] = []
        for position in range(self.stored, len(history)):
            message = history[position]
            items += (request_items(message, position) if isinstance(message, ModelRequest)
                      else [response_item(message, position)])
        key = f"{ITEM_ID_PREFIX}step-{len(history)}-" + hashlib.sha256(
            json.dumps([i.model_dump(mode="json") for i in items], sort_keys=True).encode()).hexdigest()[:32]
        step = await self.client.step(self.session_id, items, step_id=key, usage=self._usage)
        self.stored, self._usage = len(history), None
        return step.request

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: ModelRequestContext,
                                  response: ModelResponse) -> ModelResponse:
        usage = response.usage
        self._usage = UsageIn(prompt_tokens=usage.input_tokens, cached_tokens=min(usage.cache_read_tokens,
                                                                                  usage.input_tokens),
                              completion_tokens=usage.output_tokens, model=response.model_name or None)
        return response
