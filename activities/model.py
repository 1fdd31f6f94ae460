"""The model activity: materialise the planned request, call the model, store the answer.

Any OpenAI-compatible chat-completions endpoint works. Provider SDK retries are off:
Temporal's retry policy is the only one, and errors are mapped so that it retries
what can succeed later (timeouts, 408/409/429, 5xx, garbage) and nothing else.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import openai
from openai.types.chat import ChatCompletion
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.heartbeat import heartbeating
from activities.items import archive_if_oversized, store_items_kept, stored_answer
from activities.provider import RETRYABLE_STATUS, client_for, is_context_overflow, retry_after_seconds
from activities.replay import follow_ups
from activities.requests import materialise, plan_entries, store_plan
from activities.runtime import get_runtime
from activities.store_rows import EventRow
from workflows.context.content import ItemContent, ToolCall
from workflows.context.ids import MAX_WORKFLOW_TOOL_ARGUMENTS
from workflows.context.items import Item, Kind
from workflows.context.usage import CallUsage, ModelPrice, cost_units, price_for, sanitized
from workflows.contract.failures import CONTEXT_LENGTH_EXCEEDED, MODEL_ANSWER_INVALID, MODEL_REQUEST_REJECTED
from workflows.contract.items import StoredItem, ToolCallRef
from workflows.contract.model import ModelCallInput, ModelCallResult
from workflows.contract.tools import WORKFLOW_TOOLS


async def complete(client: openai.AsyncOpenAI, body: dict[str, Any], headers: dict[str, str]) -> ChatCompletion:
    """``client.chat.completions.create(**body)`` without the SDK's request transform: it walks
    every message field by field against its TypedDicts (for plain chat dicts, an identity) and
    was most of the worker's CPU per turn. The same endpoint, body, errors and parsed answer."""
    if not body.get("tools"):
        body = {k: v for k, v in body.items() if k != "tools"}
    return await client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                             options={"headers": headers})


def map_provider_error(error: openai.APIError) -> ApplicationError:
    """Translate a provider error into what Temporal should do about it."""
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if is_context_overflow(error):
            return ApplicationError(
                f"provider rejected the request as too long: {error.message}",
                type=CONTEXT_LENGTH_EXCEEDED,
                non_retryable=True,
            )
        if 400 <= status < 500 and status not in RETRYABLE_STATUS:
            return ApplicationError(
                f"provider rejected the request (HTTP {status}): {error.message}",
                type=MODEL_REQUEST_REJECTED,
                non_retryable=True,
            )
        retry_after = retry_after_seconds(error)
        return ApplicationError(
            f"provider error HTTP {status}: {error.message}",
            type=f"ModelHTTP{status}",
            next_retry_delay=None if retry_after is None else timedelta(seconds=retry_after),
        )
    return ApplicationError(f"model call failed: {type(error).__name__}: {error}", type="ModelUnavailable")


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


@activity.defn
async def call_model(inp: ModelCallInput) -> ModelCallResult:
    # The first beat after one interval: most calls are over before it (a beat is a server
    # round trip and a history write); the heartbeat timeout runs from the start regardless.
    async with heartbeating(at_start=False):
        result = await _call_model(inp)
    if inp.replay is not None:
        result.follow_ups = follow_ups(inp.replay.trajectory_path, inp.replay_turn)
    return result


async def _call_model(inp: ModelCallInput) -> ModelCallResult:
    runtime = await get_runtime()
    store = runtime.store
    # Independent reads and writes go side by side (one round trip for all, not one each).
    # The request event is idempotent by (lane, seq): a retried call writes it once. The plan
    # usually builds on the one this worker stored last (no round trip).
    events = [EventRow(**inp.request_event.model_dump())] if inp.request_event is not None else []
    entries = await plan_entries(store, inp.session_id, inp.lane, inp.plan)
    writes = asyncio.gather(store.append_events(inp.session_id, events),
                            store_plan(store, inp.session_id, inp.lane, inp.plan.version, entries))
    materialising = materialise(store, inp.session_id, entries, preview_chars=inp.preview_chars, tools=inp.tools,
                                model=inp.model)
    if activity.info().attempt > 1:
        # Only a retry can find the answer stored: an earlier attempt stored it, then its result
        # was lost. (A first attempt that finds the row stored anyway, e.g. after a reset of the
        # workflow, keeps the stored answer below: the first write wins.)
        done, request, _ = await asyncio.gather(
            stored_answer(store, inp.session_id, inp.lane, inp.response_item_id), materialising, writes)
        if done is not None:  # the call was made once: its usage, kept with the answer, is reported once
            item, content, usage = done
            result = _result(item, content, "tool_calls" if content.tool_calls else "stop", request.total_tokens)
            if usage is not None:
                result.usage = CallUsage.model_validate(usage)
                result.prompt_tokens, result.cached_tokens = result.usage.prompt, result.usage.cached
                metrics.observe_usage("agent", inp.model, result.usage)  # this process has not counted it
            return result
    else:
        request, _ = await asyncio.gather(materialising, writes)

    if inp.replay is not None:
        client = client_for(inp.replay.model_base_url, "replay", runtime.settings.model_timeout_seconds)
        headers = {"X-Lanes-Trajectory": inp.replay.trajectory_id, "X-Lanes-Turn": str(inp.replay_turn)}
    else:
        key = runtime.settings.openai_api_key
        client = client_for(
            runtime.settings.openai_base_url,
            key.get_secret_value() if key else "missing",
            runtime.settings.model_timeout_seconds,
        )
        headers = {}
    try:
        with metrics.model_call_timer("agent"):
            response = await complete(client, {"model": inp.model, "messages": request.messages,
                                               "tools": request.tools, "max_tokens": inp.max_output_tokens}, headers)
    except openai.APIError as error:
        raise map_provider_error(error) from None
    except ValueError as error:  # a body that is not JSON at all
        raise ApplicationError(f"model answered garbage: {error}", type=MODEL_ANSWER_INVALID) from None

    content = _answer_content(response, inp.response_seq)
    item = Item(
        id=inp.response_item_id,
        seq=inp.response_seq,
        kind=Kind.ASSISTANT,
        role="assistant",
        group=inp.response_seq,
        task=inp.task_id,
        tool_call_ids=[c.id for c in content.tool_calls],
    )
    reported = getattr(response, "usage", None)
    price = inp.price or price_for(runtime.settings.prices, inp.model)
    usage = call_usage(reported, request.total_tokens, price)
    item = await archive_if_oversized(store, inp.session_id, item, content, inp.preview_chars, inp.model,
                                      inp.bound_above_tokens, inp.observation_id, content_addressed=True)
    [(item, content)] = await store_items_kept(store, inp.session_id, inp.lane, [(item, content)],
                                               usage=usage.model_dump(mode="json"))
    details = getattr(reported, "prompt_tokens_details", None)
    result = _result(
        item,
        content,
        response.choices[0].finish_reason,
        request.total_tokens,
        getattr(reported, "prompt_tokens", None),
        getattr(details, "cached_tokens", None),
    )
    result.usage = usage
    metrics.observe_usage("agent", inp.model, usage)
    return result


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
