"""The gateway's endpoints: an unchanged agent sets its base URL to one of them and its API key
to a Lanes token.

- OpenAI Chat Completions and Responses: base URL ``<api>/gateway/openai/v1``
  (``POST /chat/completions``, ``POST /responses``, ``GET /models``);
- Anthropic Messages: base URL ``<api>/gateway/anthropic`` (``POST /v1/messages``,
  ``POST /v1/messages/count_tokens``, ``GET /v1/models``).

Each answer carries ``X-Lanes-Session``: the session that holds the conversation (send it back
as a request header to pin a conversation to it), and ``Server-Timing``: where the call's time
went (``timing.py``). Errors are in the protocol's own shape, so
the official SDKs raise their usual exceptions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from worker.api.backend import Backend
from worker.api.errors import ApiError
from worker.api.gateway import anthropic_messages, openai_chat, openai_responses
from worker.api.gateway.conversation import GatewayInputError
from worker.api.gateway.service import Gateway, Served
from worker.api.gateway.timing import HEADER as TIMING_HEADER
from worker.api.gateway.timing import CallTiming
from worker.api.gateway.upstreams import (
    AnthropicUpstream,
    OpenAIUpstream,
    ResponsesUpstream,
    UpstreamError,
    upstream_http,
)

log = logging.getLogger("lanes.gateway")

_ERROR = {"description": "an error in the protocol's own shape (OpenAI: {error: {message, type, code}}; "
                         "Anthropic: {type: error, error: {type, message}})"}
# What a gateway call can answer besides 200: the agent's request refused (400, 404 for a session
# it does not own, 409/422 for one the session cannot take), auth (401), body limits (408, 413),
# the upstream's own errors passed through (any 4xx/5xx it sends, 429 most often), the upstream
# unreachable (502), Lanes unavailable or no upstream configured (503), timeouts (504).
RESPONSES: dict[int | str, dict] = dict.fromkeys((400, 401, 404, 408, 409, 413, 422, 429, 502, 503, 504), _ERROR)
# Not in Lanes' own OpenAPI document: these endpoints speak OpenAI's and Anthropic's protocols,
# whose documents are the providers' (tests/gateway holds them to what the official SDKs parse).
router = APIRouter(prefix="/gateway", tags=["gateway"], responses=RESPONSES, include_in_schema=False)
SESSION_HEADER = "X-Lanes-Session"
BUDGET_HEADER = "X-Lanes-Budget-Tokens"
CONVERSATION_HEADER = "X-Lanes-Conversation"  # the agent's own id of the conversation, when it has one


def gateway_error(path: str, status: int, message: str, kind: str | None = None, code: str | None = None,
                  headers: dict[str, str] | None = None) -> JSONResponse:
    """An error in the shape of the protocol ``path`` speaks."""
    kind = kind or _KIND_OF_STATUS.get(status, "api_error")
    body = (anthropic_messages.error_body(status, kind, message) if path.startswith("/gateway/anthropic")
            else openai_chat.error_body(status, kind, message, code))
    return JSONResponse(body, status_code=status, headers=headers)


_KIND_OF_STATUS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 408: "timeout_error", 409: "invalid_request_error",
                   413: "request_too_large", 422: "invalid_request_error", 429: "rate_limit_error",
                   503: "overloaded_error", 504: "timeout_error"}


async def _body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise GatewayInputError(f"the request body is not JSON ({exc})") from None


def _budget(request: Request) -> int | None:
    value = request.headers.get(BUDGET_HEADER)
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 256:
        raise GatewayInputError(f"{BUDGET_HEADER}: an integer of at least 256 tokens")
    return int(value)


async def _serve(request: Request, call: Any, upstream: Any, timing: CallTiming) -> Served:
    if (conversation_id := request.headers.get(CONVERSATION_HEADER)) is not None:
        call.conversation.salt += f"|{conversation_id}"
    be: Backend = request.app.state.backend
    gateway = Gateway(request, be, request.state.tenant, timing)
    return await gateway.serve(call.conversation, call.model, call.tools, upstream,
                               request.headers.get(SESSION_HEADER), _budget(request), stream=call.stream)


def _failure(request: Request, error: Exception) -> Response:
    path = request.url.path
    if isinstance(error, GatewayInputError):
        return gateway_error(path, error.status, str(error), error.kind)
    if isinstance(error, UpstreamError):  # the upstream's own status and body, as it sent them
        return Response(error.body, status_code=error.status, media_type=error.media_type)
    if isinstance(error, ApiError):
        if error.code == "request_unfit":  # the provider's "too long", so agents' own handling works
            if path.startswith("/gateway/anthropic"):
                return gateway_error(path, 400, f"prompt is too long: {error.message}", "invalid_request_error")
            return gateway_error(path, 400, f"This model's maximum context length is exceeded: {error.message}",
                                 "invalid_request_error", openai_chat.CONTEXT_LENGTH_CODE)
        return gateway_error(path, error.status, error.message, headers=error.headers)
    log.exception("gateway call failed")
    return gateway_error(path, 500, f"the gateway failed: {type(error).__name__}")


def _sessioned(response: Response, served: Served, timing: CallTiming) -> Response:
    response.headers[SESSION_HEADER] = served.session_id
    response.headers[TIMING_HEADER] = timing.header()
    return response


async def _answer(request: Request, parse: Callable[[Any], Any], upstream: Callable[[Request, Any], Any],
                  whole: Callable[[dict[str, Any], str], dict[str, Any]],
                  events: Callable[[dict[str, Any], Any], Iterator[bytes]]) -> Response:
    """One call of a protocol: read it, serve it, answer in its shape (the upstream's own stream,
    or the answer's events, or the answer whole); any failure as the protocol's error."""
    timing = CallTiming()
    try:
        call = parse(await _body(request))
        timing.lap("read")
        served = await _serve(request, call, upstream(request, call), timing)
    except Exception as error:  # every failure in the protocol's shape
        failed = _failure(request, error)
        failed.headers[TIMING_HEADER] = timing.header()
        return failed
    if served.stream is not None:
        return _sessioned(StreamingResponse(served.stream, media_type="text/event-stream"), served, timing)
    if call.stream:  # answered whole (recall rounds, a retry, a Responses stream): its events
        return _sessioned(StreamingResponse(events(served.answer, call), media_type="text/event-stream"), served,
                          timing)
    return _sessioned(JSONResponse(whole(served.answer, call.model)), served, timing)


# --- OpenAI Chat Completions ------------------------------------------------------------------


@router.post("/openai/v1/chat/completions", summary="OpenAI Chat Completions, through Lanes")
async def chat_completions(request: Request) -> Response:
    return await _answer(request, openai_chat.parse, OpenAIUpstream, openai_chat.completion,
                         lambda answer, call: openai_chat.chunks(answer, call.model, call.include_usage))


@router.post("/openai/v1/responses", summary="OpenAI Responses, through Lanes")
async def responses(request: Request) -> Response:
    return await _answer(request, openai_responses.parse, ResponsesUpstream, openai_responses.response,
                         lambda answer, call: openai_responses.events(answer, call.model))


@router.get("/openai/v1/models", summary="The upstream's models")
async def openai_models(request: Request) -> Response:
    return await _models(request, OpenAIUpstream.endpoint(request.app.state.settings, request.state.tenant), "/models")


# --- Anthropic Messages ----------------------------------------------------------------------


@router.post("/anthropic/v1/messages", summary="Anthropic Messages, through Lanes")
async def messages(request: Request) -> Response:
    return await _answer(request, anthropic_messages.parse, AnthropicUpstream, anthropic_messages.message,
                         lambda answer, call: anthropic_messages.events(answer, call.model))


@router.post("/anthropic/v1/messages/count_tokens", summary="An estimate of a Messages request's input tokens")
async def count_tokens(request: Request) -> Response:
    """Our tokenizer's count of the request as sent (nothing is stored): an estimate, since the
    gateway sends a bounded request, which is at most this."""
    from activities.tokens import count_text_message_tokens

    try:
        body = await _body(request)
        call = anthropic_messages.parse({**body, "max_tokens": 1}) if isinstance(body, dict) else \
            anthropic_messages.parse(body)
    except Exception as error:
        return _failure(request, error)
    tokens = sum(count_text_message_tokens(t.text + "".join(c.arguments for c in t.tool_calls), call.model)
                 for t in call.conversation.turns)
    return JSONResponse({"input_tokens": tokens})


@router.get("/anthropic/v1/models", summary="The upstream's models")
async def anthropic_models(request: Request) -> Response:
    return await _models(request, AnthropicUpstream.endpoint(request.app.state.settings, request.state.tenant),
                         "/v1/models")


async def _models(request: Request, endpoint: tuple[str, dict[str, str]] | None, path: str) -> Response:
    if endpoint is None:
        return gateway_error(request.url.path, 503, "this gateway has no upstream configured for the protocol")
    base, headers = endpoint
    try:
        upstream = await upstream_http(request).get(base + path, headers=headers)
    except httpx.HTTPError as exc:
        return gateway_error(request.url.path, 502, f"the upstream is unreachable ({type(exc).__name__})")
    return Response(upstream.content, status_code=upstream.status_code,
                    media_type=upstream.headers.get("content-type", "application/json"))
