"""The agent's upstream model, per protocol: where the bounded request goes (the deployment's
LANES_GATEWAY_* settings, never stored in history), with the agent's own parameters and
provider headers, and how its answer is read.

An upstream error reaches the agent as the upstream sent it (status and body), so the agent's
own retry and overflow handling see what they would have seen without Lanes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from fastapi import Request

from worker.api.gateway import anthropic_messages, openai_chat, openai_responses
from worker.api.gateway.answer import Answer
from worker.api.gateway.conversation import GatewayInputError
from worker.api.gateway.streaming import ChatAccumulator, MessagesAccumulator, sse_events
from worker.settings import Settings, TenantUpstreams
from workflows.context import anthropic_tools, responses_tools
from workflows.contract.tools import RECALL_TOOL, tool_specs


class UpstreamError(Exception):
    def __init__(self, status: int, body: bytes, media_type: str) -> None:
        super().__init__(f"upstream answered HTTP {status}")
        self.status = status
        self.body = body
        self.media_type = media_type


def upstream_http(request: Request) -> httpx.AsyncClient:
    """The API's one client for upstream calls (a pool; closed with the app)."""
    state = request.app.state
    client = getattr(state, "gateway_http", None)
    if client is None:
        settings: Settings = state.settings
        client = state.gateway_http = httpx.AsyncClient(timeout=httpx.Timeout(settings.model_timeout_seconds,
                                                                              connect=10.0))
    return client


async def _post(request: Request, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    try:
        response = await upstream_http(request).post(url, json=body, headers=headers)
    except httpx.TimeoutException:
        raise GatewayInputError("the upstream model did not answer in time", 504, "timeout_error") from None
    except httpx.HTTPError as exc:
        raise GatewayInputError(f"the upstream model is unreachable ({type(exc).__name__})", 502,
                                "api_error") from None
    if response.status_code >= 400:
        raise UpstreamError(response.status_code, response.content,
                            response.headers.get("content-type", "application/json"))
    try:
        return response.json()
    except ValueError:
        raise GatewayInputError("the upstream model answered a body that is not JSON", 502, "api_error") from None


async def _open_stream(request: Request, url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """The upstream's streamed answer, its status checked before anything is forwarded."""
    http = upstream_http(request)
    try:
        response = await http.send(http.build_request("POST", url, json=body, headers=headers), stream=True)
    except httpx.TimeoutException:
        raise GatewayInputError("the upstream model did not answer in time", 504, "timeout_error") from None
    except httpx.HTTPError as exc:
        raise GatewayInputError(f"the upstream model is unreachable ({type(exc).__name__})", 502,
                                "api_error") from None
    if response.status_code >= 400:
        content = await response.aread()
        await response.aclose()
        raise UpstreamError(response.status_code, content, response.headers.get("content-type", "application/json"))
    return response


class _Upstream:
    """What both protocols share: the endpoint from the settings, the call, garbage refused."""

    format = ""
    streams = True  # forwards the upstream's own stream
    setting = ""  # the variable that configures this upstream, for the 503 when it is unset
    path = ""  # the call's path under the base URL

    def __init__(self, request: Request, call: Any) -> None:
        self.request = request
        self.call = call

    @staticmethod
    def endpoint(settings: Settings, tenant: str | None = None) -> tuple[str, dict[str, str]] | None:
        raise NotImplementedError

    def _where(self) -> tuple[str, dict[str, str]]:
        """(the call's URL, its headers): the tenant's or the deployment's key, and the agent's
        passed headers."""
        endpoint = self.endpoint(self.request.app.state.settings, getattr(self.request.state, "tenant", None))
        if endpoint is None:
            raise GatewayInputError(f"this gateway has no {self.format} upstream ({self.setting})", 503, "api_error")
        base, headers = endpoint
        return base + self.path, {**headers, **self._passed()}

    def _passed(self) -> dict[str, str]:
        return {}

    def _answer(self, raw: Any) -> Answer:
        raise NotImplementedError

    async def complete(self, prepared: Any, extra_tools: list[dict[str, Any]],
                       rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> Answer:
        url, headers = self._where()
        raw = await _post(self.request, url, self._body(prepared, extra_tools, rounds), headers)
        try:
            return self._answer(raw)
        except ValueError as exc:
            raise GatewayInputError(f"the upstream model answered garbage: {exc}", 502, "api_error") from None

    def _body(self, prepared: Any, extra_tools: list[dict[str, Any]],
              rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
        raise NotImplementedError

    def _stream_body(self, prepared: Any) -> dict[str, Any]:
        return {**self._body(prepared, [], []), "stream": True}

    def _forwards_usage(self) -> bool:
        return True

    async def open_stream(self, prepared: Any) -> StreamedAnswer:
        """The upstream's stream of the answer (no recall offered: nothing to answer in between)."""
        url, headers = self._where()
        response = await _open_stream(self.request, url, self._stream_body(prepared), headers)
        return StreamedAnswer(response, self.format, forward_usage=self._forwards_usage())


class OpenAIUpstream(_Upstream):
    format = "chat"
    setting = "LANES_GATEWAY_OPENAI_BASE_URL"
    path = "/chat/completions"

    @staticmethod
    def endpoint(settings: Settings, tenant: str | None = None) -> tuple[str, dict[str, str]] | None:
        own = settings.gateway_tenant_upstreams.get(tenant or "") or TenantUpstreams()
        base = own.openai_base_url or settings.gateway_openai_base_url or settings.openai_base_url
        if not base:
            return None
        key = own.openai_api_key or settings.gateway_openai_api_key or settings.openai_api_key
        return base.rstrip("/"), ({"Authorization": f"Bearer {key.get_secret_value()}"} if key else {})

    def _body(self, prepared: Any, extra_tools: list[dict[str, Any]],
              rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
        return openai_chat.upstream_body(self.call, prepared.messages, extra_tools, rounds)

    def _answer(self, raw: Any) -> Answer:
        return openai_chat.answer_of(raw)

    def _stream_body(self, prepared: Any) -> dict[str, Any]:
        # usage in the last chunk, for the session's usage; forwarded only if the agent asked for it
        return {**super()._stream_body(prepared), "stream_options": {"include_usage": True}}

    def _forwards_usage(self) -> bool:
        return bool(self.call.include_usage)

    def round_messages(self, answer: Answer, results: list[tuple[str, str]]) -> tuple[dict[str, Any],
                                                                                     list[dict[str, Any]]]:
        return openai_chat.assistant_message(answer.turn), [openai_chat.tool_message(i, t) for i, t in results]

    def recall_tool(self) -> dict[str, Any]:
        return tool_specs([RECALL_TOOL])[0]


class AnthropicUpstream(_Upstream):
    format = "anthropic"
    setting = "LANES_GATEWAY_ANTHROPIC_BASE_URL"
    path = "/v1/messages"

    @staticmethod
    def endpoint(settings: Settings, tenant: str | None = None) -> tuple[str, dict[str, str]] | None:
        own = settings.gateway_tenant_upstreams.get(tenant or "") or TenantUpstreams()
        base = own.anthropic_base_url or settings.gateway_anthropic_base_url
        if not base:
            return None
        key = own.anthropic_api_key or settings.gateway_anthropic_api_key
        return base.rstrip("/"), ({"x-api-key": key.get_secret_value()} if key else {})

    def _passed(self) -> dict[str, str]:
        """The agent's version and beta headers (the features it asked for), as it sent them."""
        passed = {h: v for h in anthropic_messages.PASSED_HEADERS if (v := self.request.headers.get(h))}
        passed.setdefault("anthropic-version", "2023-06-01")
        return passed

    def _body(self, prepared: Any, extra_tools: list[dict[str, Any]],
              rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
        return anthropic_messages.upstream_body(self.call, prepared.system, prepared.messages, extra_tools, rounds)

    def _answer(self, raw: Any) -> Answer:
        return anthropic_messages.answer_of(raw)

    def round_messages(self, answer: Answer, results: list[tuple[str, str]]) -> tuple[dict[str, Any],
                                                                                     list[dict[str, Any]]]:
        return (anthropic_messages.assistant_message(answer),
                [anthropic_messages.tool_result_block(i, t) for i, t in results])

    def recall_tool(self) -> dict[str, Any]:
        return anthropic_tools(tool_specs([RECALL_TOOL]))[0]


class ResponsesUpstream(OpenAIUpstream):
    """The Responses API at the OpenAI upstream's base URL."""

    format = "responses"
    path = "/responses"

    def _body(self, prepared: Any, extra_tools: list[dict[str, Any]],
              rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
        return openai_responses.upstream_body(self.call, prepared.instructions, prepared.input, extra_tools, rounds)

    def _answer(self, raw: Any) -> Answer:
        return openai_responses.answer_of(raw)

    def _stream_body(self, prepared: Any) -> dict[str, Any]:
        return _Upstream._stream_body(self, prepared)  # its usage comes in response.completed

    def _forwards_usage(self) -> bool:
        return True

    def round_messages(self, answer: Answer, results: list[tuple[str, str]]) -> tuple[dict[str, Any],
                                                                                     list[dict[str, Any]]]:
        return openai_responses.round_messages(answer, results)

    def recall_tool(self) -> dict[str, Any]:
        return responses_tools(tool_specs([RECALL_TOOL]))[0]


class StreamedAnswer:
    """An upstream stream: ``events()`` forwards it; the answer it made is ``answer()`` once the
    last content event went by. The end of the stream (``[DONE]``, ``message_stop``,
    ``response.completed``) is held back
    by ``events(until_stored=...)`` until the answer is stored, so the agent's next call never
    arrives before it."""

    def __init__(self, response: httpx.Response, protocol: str, forward_usage: bool = True) -> None:
        self.response = response
        self.protocol = protocol
        self.forward_usage = forward_usage
        self.chat = ChatAccumulator()
        self.messages = MessagesAccumulator()
        self.completed: dict[str, Any] = {}

    def answer(self) -> Answer:
        if self.protocol == "chat":
            return openai_chat.answer_of(self.chat.completion())
        if self.protocol == "responses":  # response.completed carries the whole response
            return openai_responses.answer_of(self.completed)
        return anthropic_messages.answer_of(self.messages.raw())

    async def events(self, until_stored: Callable[[Answer], Awaitable[None]]) -> AsyncIterator[bytes]:
        ended = False
        try:
            async for raw, name, data in sse_events(self.response):
                kind = data.get("type") if isinstance(data, dict) else name
                if kind == "response.completed" and isinstance(data, dict):
                    self.completed = data.get("response") or {}
                final = raw.startswith(b"data: [DONE]") or kind in ("message_stop", "response.completed")
                if final and not ended:
                    ended = True
                    await until_stored(self.answer())
                if self.protocol == "chat":
                    self.chat.feed(data)
                    if isinstance(data, dict) and not data.get("choices") and data.get("usage") \
                            and not self.forward_usage:
                        continue  # the usage chunk the agent did not ask for
                else:
                    self.messages.feed(name, data)
                yield raw
            if not ended:  # a stream that ended without its end marker: what came is the answer
                await until_stored(self.answer())
        finally:
            await self.response.aclose()
