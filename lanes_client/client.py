"""A small typed async client for the Context Lanes HTTP API.

    async with LanesClient("http://127.0.0.1:8000", token) as lanes:
        session = await lanes.create_session(mode="external", budget_tokens=32_000)
        await lanes.append_items(session.session_id, [user_item("Fix the failing test")])
        request = await lanes.next_request(session.session_id)   # messages + tools to send
        ...                                                      # call your model, run tools
        await lanes.append_items(session.session_id, [assistant_item(message), *tool_results])

Every failure is a :class:`LanesAPIError` carrying the HTTP status, the API's error
code and its message. Responses are the pydantic models of :mod:`lanes_client.schemas`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from lanes_client.schemas import (
    AppendItemsOut,
    CancelResult,
    CondenseOut,
    EpisodeAck,
    EpisodeList,
    EventOut,
    EventPage,
    ItemContentOut,
    ItemIn,
    MessageAccepted,
    ObservationOut,
    PreparedRequestOut,
    Readiness,
    SessionCreated,
    SessionInfo,
    SessionList,
    StepOut,
    StoredItemPage,
    ToolCallIn,
)
from workflows.context.formats.request_formats import RequestFormat
from workflows.context.report import ContextReport
from workflows.contract import ChildLane, SessionStatus, SpawnResult

DEFAULT_URL = "http://127.0.0.1:8000"
M = TypeVar("M", bound=BaseModel)


class LanesAPIError(Exception):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


# --- item builders (the shapes an OpenAI-style agent loop produces) -----------------------


def user_item(text: str) -> ItemIn:
    return ItemIn(kind="user", text=text)


def note_item(text: str, kind: str = "note") -> ItemIn:
    return ItemIn(kind=kind, text=text)


def assistant_item(message: Any) -> ItemIn:
    """An assistant answer: an OpenAI ``ChatCompletionMessage`` or a plain dict."""
    data = message.model_dump() if hasattr(message, "model_dump") else dict(message)
    calls = []
    for call in data.get("tool_calls") or ():
        fn = call.get("function") or {}
        calls.append(ToolCallIn(id=call["id"], name=fn.get("name", ""), arguments=fn.get("arguments") or "{}"))
    return ItemIn(kind="assistant", text=data.get("content") or "", tool_calls=calls)


def tool_result_item(call_id: str, name: str, output: str, exit_code: int | None = None,
                     role: str | None = None) -> ItemIn:
    return ItemIn(kind="tool_result", role=role, text=output, tool_call_id=call_id, tool_name=name,
                  exit_code=exit_code)


class LanesClient:
    def __init__(self, base_url: str | None = None, token: str | None = None, *, timeout: float = 90.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = (base_url or os.environ.get("LANES_API_URL") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("LANES_API_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout,
                                       transport=transport)

    async def __aenter__(self) -> LanesClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- plumbing -----------------------------------------------------------------------

    async def _call(self, method: str, path: str, model: type[M] | None, *, json_body: Any = None,
                    params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> Any:
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await self._http.request(method, path, json=json_body, params=clean, headers=headers)
        except httpx.HTTPError as exc:
            raise LanesAPIError(0, "unreachable", f"cannot reach {self.base_url}: {type(exc).__name__}: {exc}") \
                from None
        if response.status_code >= 400:
            raise _error(response)
        data = response.json()
        return model.model_validate(data) if model is not None else data

    # --- sessions -----------------------------------------------------------------------

    async def create_session(self, *, mode: str = "hosted", **config: Any) -> SessionCreated:
        """``config``: model, context_window, max_output_tokens, budget_tokens, tools, system_prompt,
        max_turns_per_task (and replay on development servers)."""
        body = {"mode": mode, **{k: v for k, v in config.items() if v is not None}}
        return await self._call("POST", "/v1/sessions", SessionCreated, json_body=body)

    async def list_sessions(self, *, limit: int = 50, cursor: str | None = None) -> SessionList:
        return await self._call("GET", "/v1/sessions", SessionList, params={"limit": limit, "cursor": cursor})

    async def get_session(self, session_id: str) -> SessionInfo:
        return await self._call("GET", f"/v1/sessions/{session_id}", SessionInfo)

    async def status(self, session_id: str) -> SessionStatus:
        return await self._call("GET", f"/v1/sessions/{session_id}/status", SessionStatus)

    async def cancel_session(self, session_id: str, *, terminate: bool = False,
                             reason: str | None = None) -> CancelResult:
        body = {"action": "terminate" if terminate else "close", "reason": reason}
        return await self._call("POST", f"/v1/sessions/{session_id}/cancel", CancelResult,
                                json_body={k: v for k, v in body.items() if v is not None})

    # --- hosted mode --------------------------------------------------------------------

    async def send_message(self, session_id: str, text: str) -> MessageAccepted:
        return await self._call("POST", f"/v1/sessions/{session_id}/messages", MessageAccepted,
                                json_body={"text": text})

    async def wait_task(self, session_id: str, task_id: str, *, poll: float = 0.3,
                        timeout: float = 600.0) -> SessionStatus:
        """Poll until the task completed or failed."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            current = await self.status(session_id)
            task = next((t for t in current.tasks if t.task_id == task_id), None)
            if task is not None and task.finished:
                return current
            if loop.time() > deadline:
                raise LanesAPIError(0, "timeout", f"task {task_id} did not end within {timeout:.0f}s")
            await asyncio.sleep(poll)

    # --- external-agent mode ------------------------------------------------------------

    async def append_items(self, session_id: str, items: Iterable[ItemIn | Mapping[str, Any]] = (), *,
                           idempotency_key: str | None = None,
                           responses_items: Iterable[Mapping[str, Any]] = ()) -> AppendItemsOut:
        """Append ``items``, or ``responses_items`` (OpenAI Responses API input items, stored verbatim)."""
        body: dict[str, Any] = {"items": [i.model_dump(exclude_none=True) if isinstance(i, ItemIn) else dict(i)
                                          for i in items]}
        if responses_items:
            body["responses_items"] = [dict(i) for i in responses_items]
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return await self._call("POST", f"/v1/sessions/{session_id}/items", AppendItemsOut, json_body=body,
                                headers=headers)

    async def next_request(self, session_id: str, *, format: RequestFormat = "chat") -> PreparedRequestOut:
        """The next request, as ``format`` (chat, responses or anthropic) lays it out."""
        return await self._call("GET", f"/v1/sessions/{session_id}/request", PreparedRequestOut,
                                params={"format": format})

    async def step(self, session_id: str, items: Iterable[ItemIn | Mapping[str, Any]] = (), *,
                   step_id: str | None = None, responses_items: Iterable[Mapping[str, Any]] = (),
                   format: RequestFormat = "chat") -> StepOut:
        """One round trip per agent step: append ``items`` (or ``responses_items``), get the next request."""
        body: dict[str, Any] = {"items": [i.model_dump(exclude_none=True) if isinstance(i, ItemIn) else dict(i)
                                          for i in items], "format": format}
        if responses_items:
            body["responses_items"] = [dict(i) for i in responses_items]
        if step_id is not None:
            body["step_id"] = step_id
        return await self._call("POST", f"/v1/sessions/{session_id}/steps", StepOut, json_body=body)

    async def list_items(self, session_id: str, *, lane: str = "main", after_seq: int = -1,
                         limit: int = 100) -> StoredItemPage:
        """One page of the raw stored history (``next_after_seq`` continues it)."""
        return await self._call("GET", f"/v1/sessions/{session_id}/items", StoredItemPage,
                                params={"lane": lane, "after_seq": after_seq, "limit": limit})

    async def begin_episode(self, session_id: str, episode_id: str, kind: str, goal: str,
                            depends_on: list[str] | None = None) -> EpisodeAck:
        body = {"episode_id": episode_id, "kind": kind, "goal": goal, "depends_on": depends_on or []}
        return await self._call("POST", f"/v1/sessions/{session_id}/episodes", EpisodeAck, json_body=body)

    async def end_episode(self, session_id: str, episode_id: str, conclusion: str | None = None) -> EpisodeAck:
        body = {"conclusion": conclusion} if conclusion is not None else {}
        return await self._call("POST", f"/v1/sessions/{session_id}/episodes/{episode_id}/end", EpisodeAck,
                                json_body=body)

    async def condense(self, session_id: str, memory: Mapping[str, list[str]]) -> CondenseOut:
        return await self._call("POST", f"/v1/sessions/{session_id}/condense", CondenseOut,
                                json_body={"memory": dict(memory)})

    # --- subagent lanes ------------------------------------------------------------------

    async def spawn_subagent(self, session_id: str, brief: str, tools: list[str] | None = None) -> SpawnResult:
        body: dict[str, Any] = {"brief": brief} if tools is None else {"brief": brief, "tools": tools}
        return await self._call("POST", f"/v1/sessions/{session_id}/subagents", SpawnResult, json_body=body)

    async def subagents(self, session_id: str) -> list[ChildLane]:
        data = await self._call("GET", f"/v1/sessions/{session_id}/subagents", None)
        return [ChildLane.model_validate(c) for c in data]

    async def subagent_context(self, session_id: str, lane: str) -> ContextReport:
        return await self._call("GET", f"/v1/sessions/{session_id}/subagents/{lane}/context", ContextReport)

    # --- inspection ---------------------------------------------------------------------

    async def context(self, session_id: str) -> ContextReport:
        return await self._call("GET", f"/v1/sessions/{session_id}/context", ContextReport)

    async def episodes(self, session_id: str) -> EpisodeList:
        return await self._call("GET", f"/v1/sessions/{session_id}/episodes", EpisodeList)

    async def item(self, session_id: str, item_id: str, *, max_chars: int | None = None) -> ItemContentOut:
        return await self._call("GET", f"/v1/sessions/{session_id}/items/{item_id}", ItemContentOut,
                                params={"max_chars": max_chars})

    async def read_observation(self, session_id: str, obs_id: str, *, offset: int | None = None,
                               limit: int | None = None) -> ObservationOut:
        """``obs_id``: ``obs-...`` or a full ``observation://obs-...?offset=&limit=`` address."""
        from workflows.context.observations import SCHEME, parse_observation_uri

        if obs_id.startswith(SCHEME):
            ref = parse_observation_uri(obs_id)
            obs_id = ref.obs_id
            offset = ref.offset if offset is None else offset
            limit = ref.limit if limit is None else limit
        return await self._call("GET", f"/v1/sessions/{session_id}/observations/{obs_id}", ObservationOut,
                                params={"offset": offset, "limit": limit})

    async def events(self, session_id: str, *, after: int = 0, limit: int = 200) -> EventPage:
        return await self._call("GET", f"/v1/sessions/{session_id}/events", EventPage,
                                params={"after": after, "limit": limit})

    async def stream_events(self, session_id: str, *, after: int = 0,
                            timeout: float | None = None) -> AsyncIterator[EventOut]:
        """Events as they are logged (server-sent events); ends when ``timeout`` seconds pass."""
        params = {"after": after, **({"timeout": timeout} if timeout else {})}
        try:
            async with self._http.stream("GET", f"/v1/sessions/{session_id}/events/stream", params=params,
                                         timeout=httpx.Timeout(None, connect=10.0)) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _error(response)
                data: list[str] = []
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif line == "" and data:
                        payload = json.loads("\n".join(data))
                        data = []
                        if isinstance(payload, dict) and "event_id" in payload:
                            yield EventOut.model_validate(payload)
        except httpx.HTTPError as exc:
            raise LanesAPIError(0, "unreachable", f"event stream from {self.base_url} failed: {exc}") from None

    async def health(self) -> dict[str, Any]:
        return await self._call("GET", "/healthz", None)

    async def ready(self) -> Readiness:
        try:
            response = await self._http.get("/readyz")
        except httpx.HTTPError as exc:
            raise LanesAPIError(0, "unreachable", f"cannot reach {self.base_url}: {exc}") from None
        return Readiness.model_validate(response.json())


def _error(response: httpx.Response) -> LanesAPIError:
    try:
        body = response.json()
        error = body.get("error") or {}
        return LanesAPIError(response.status_code, str(error.get("code", "error")),
                             str(error.get("message", response.text[:500])), error.get("details"))
    except (ValueError, AttributeError):
        return LanesAPIError(response.status_code, "error", response.text[:500] or response.reason_phrase)
