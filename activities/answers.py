"""A model's answer: read from the provider's completion, stored once with its usage, and
reported to the workflow as the item it became.

The answer row keeps the provider's usage, so a retried call that finds its answer stored
(an earlier attempt stored it, then its result was lost) reports that usage once, not twice
and not never.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.items import archive_if_oversized, store_items_kept, stored_answer
from activities.store import Store
from workflows.context import (
    MAX_WORKFLOW_TOOL_ARGUMENTS,
    CallUsage,
    Item,
    ItemContent,
    Kind,
    ModelPrice,
    ToolCall,
    cost_units,
    sanitized,
)
from workflows.contract.failures import MODEL_ANSWER_INVALID
from workflows.contract.items import StoredItem, ToolCallRef
from workflows.contract.model import ModelCallInput, ModelCallResult
from workflows.contract.tools import WORKFLOW_TOOLS


async def answered_before(store: Store, inp: ModelCallInput, request_tokens: int) -> ModelCallResult | None:
    """The answer an earlier attempt of this call stored, with the usage it kept; None: never stored."""
    done = await stored_answer(store, inp.session_id, inp.lane, inp.response_item_id)
    if done is None:
        return None
    item, content, usage = done
    result = _result(item, content, "tool_calls" if content.tool_calls else "stop", request_tokens)
    if usage is not None:
        result.usage = CallUsage.model_validate(usage)
        result.prompt_tokens, result.cached_tokens = result.usage.prompt, result.usage.cached
        metrics.observe_usage("agent", inp.model, result.usage)  # this process has not counted it
    return result


async def store_answer(store: Store, inp: ModelCallInput, response: Any, request_tokens: int,
                       price: ModelPrice | None) -> ModelCallResult:
    """Store the completion's message as the lane's next assistant item (archived at its
    observation id when it is too large to enter whole), with the call's costed usage."""
    content = _answer_content(response, inp.response_seq)
    item = Item(id=inp.response_item_id, seq=inp.response_seq, kind=Kind.ASSISTANT, role="assistant",
                group=inp.response_seq, task=inp.task_id, tool_call_ids=[c.id for c in content.tool_calls])
    reported = getattr(response, "usage", None)
    usage = call_usage(reported, request_tokens, price)
    item = await archive_if_oversized(store, inp.session_id, item, content, inp.preview_chars, inp.model,
                                      inp.bound_above_tokens, inp.observation_id, content_addressed=True)
    [(item, content)] = await store_items_kept(store, inp.session_id, inp.lane, [(item, content)],
                                               usage=usage.model_dump(mode="json"))
    details = getattr(reported, "prompt_tokens_details", None)
    result = _result(item, content, response.choices[0].finish_reason, request_tokens,
                     getattr(reported, "prompt_tokens", None), getattr(details, "cached_tokens", None))
    result.usage = usage
    metrics.observe_usage("agent", inp.model, usage)
    return result


def _answer_content(response, response_seq: int) -> ItemContent:
    """The assistant message of a completion; garbage is a retryable error."""
    choices = getattr(response, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise ApplicationError("model answered without a message", type=MODEL_ANSWER_INVALID)
    message = choices[0].message
    calls = []
    for index, call in enumerate(message.tool_calls or ()):
        fn = getattr(call, "function", None)
        if fn is None or not fn.name:
            raise ApplicationError("model answered a tool call without a function name", type=MODEL_ANSWER_INVALID)
        calls.append(ToolCall(id=call.id or f"call-{response_seq}-{index}", name=fn.name, arguments=fn.arguments or "{}"))
    return ItemContent(text=message.content or "", tool_calls=calls)


def _call_ref(call: ToolCall) -> ToolCallRef:
    """A tool call for the workflow: the arguments only when the workflow runs the tool."""
    arguments = None
    if call.name in WORKFLOW_TOOLS:
        arguments = call.arguments[:MAX_WORKFLOW_TOOL_ARGUMENTS]
    return ToolCallRef(id=call.id, name=call.name, arguments=arguments)


def _result(item: Item, content: ItemContent, finish_reason: str | None, request_tokens: int,
            prompt_tokens: int | None = None, cached_tokens: int | None = None) -> ModelCallResult:
    return ModelCallResult(
        stored=StoredItem(item=item, tool_calls=[_call_ref(c) for c in content.tool_calls]),
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens,
        cached_tokens=cached_tokens,
        request_tokens=request_tokens,
    )


def call_usage(reported: Any, estimate: int, price: ModelPrice | None) -> CallUsage:
    """A completion's ``usage`` (OpenAI's shape: prompt_tokens, completion_tokens,
    prompt_tokens_details.cached_tokens) as the workflow records it, costed with ``price``.
    Counts that are missing, negative or not integers count as 0."""
    details = getattr(reported, "prompt_tokens_details", None)
    prompt, cached, completion, ok = sanitized(getattr(reported, "prompt_tokens", None),
                                               getattr(details, "cached_tokens", None),
                                               getattr(reported, "completion_tokens", None))
    return CallUsage(prompt=prompt, cached=cached, completion=completion, estimate=max(0, estimate), reported=ok,
                     cost=cost_units(price, prompt, cached, completion))
