"""The two clients of the Context Lanes HTTP API: :class:`LanesClient` (sync) and
:class:`AsyncLanesClient`, with the same methods::

    with LanesClient("http://127.0.0.1:8000", token) as lanes:
        session = lanes.create_session(mode="external", budget_tokens=32_000)
        lanes.append_items(session.session_id, [user_item("Fix the failing test")])
        request = lanes.next_request(session.session_id)   # messages + tools to send
        ...                                                # call your model, run tools

    async with AsyncLanesClient(...) as lanes:
        request = await lanes.next_request(session_id)
        async for event in lanes.stream_events(session_id): ...

Each call is declared once in :mod:`lanes_client.endpoints`; the descriptors below make it
a method of both clients (awaitable on the async one). Failures are the typed errors of
:mod:`lanes_client.errors`; retries follow :mod:`lanes_client.retry`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx
from httpx_sse import SSEError, aconnect_sse, connect_sse

from lanes_client import endpoints as api
from lanes_client.endpoints import Call, Pages
from lanes_client.errors import LanesAPIError, LanesError, TaskStillRunning, error_from_response
from lanes_client.items import assistant_item, note_item, tool_result_item, user_item
from lanes_client.retry import RetryPolicy
from lanes_client.schemas import EventOut
from lanes_client.shapes import SessionStatus
from lanes_client.stream import EventStream, public_error
from lanes_client.tokens import resolve_token, token_hint

# Importable from here too, as from the earlier one-module client (``from lanes_client.client import ...``).
__all__ = ["DEFAULT_URL", "AsyncLanesClient", "LanesAPIError", "LanesClient", "assistant_item", "note_item",
           "tool_result_item", "user_item"]

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 90.0  # a call waits on the session's workflow (an update can take a while)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class _Endpoint(Generic[P, R]):
    """A call declared in ``endpoints``, as a method: a coroutine on the async client."""

    def __init__(self, build: Callable[P, Call[R]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> _Endpoint[P, R]: ...

    @overload
    def __get__(self, client: AsyncLanesClient, owner: type | None = None) -> Callable[P, Awaitable[R]]: ...

    @overload
    def __get__(self, client: LanesClient, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self

        @functools.wraps(self.build)
        def method(*args: Any, **kwargs: Any) -> Any:
            return client._run(self.build(*args, **kwargs))
        return method


class _Paged(Generic[P, R, T]):
    """An auto-paging listing, as a method: an async iterator on the async client."""

    def __init__(self, build: Callable[P, Pages[R, T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> _Paged[P, R, T]: ...

    @overload
    def __get__(self, client: AsyncLanesClient, owner: type | None = None) -> Callable[P, AsyncIterator[T]]: ...

    @overload
    def __get__(self, client: LanesClient, owner: type | None = None) -> Callable[P, Iterator[T]]: ...

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self

        @functools.wraps(self.build)
        def method(*args: Any, **kwargs: Any) -> Any:
            return client._iterate(self.build(*args, **kwargs))
        return method


class _Calls:
    """The API's calls, one line each; both clients inherit them."""

    create_session = _Endpoint(api.create_session)
    list_sessions = _Endpoint(api.list_sessions)
    iter_sessions = _Paged(api.iter_sessions)
    get_session = _Endpoint(api.get_session)
    status = _Endpoint(api.status)
    cancel_session = _Endpoint(api.cancel_session)
    send_message = _Endpoint(api.send_message)
    get_task = _Endpoint(api.get_task)
    add_capability = _Endpoint(api.add_capability)
    pin_note = _Endpoint(api.pin_note)
    append_items = _Endpoint(api.append_items)
    next_request = _Endpoint(api.next_request)
    step = _Endpoint(api.step)
    list_items = _Endpoint(api.list_items)
    iter_items = _Paged(api.iter_items)
    begin_episode = _Endpoint(api.begin_episode)
    end_episode = _Endpoint(api.end_episode)
    condense = _Endpoint(api.condense)
    spawn_subagent = _Endpoint(api.spawn_subagent)
    subagents = _Endpoint(api.subagents)
    subagent_context = _Endpoint(api.subagent_context)
    context = _Endpoint(api.context)
    ledger = _Endpoint(api.ledger)
    iter_ledger = _Paged(api.iter_ledger)
    episodes = _Endpoint(api.episodes)
    item = _Endpoint(api.item)
    read_observation = _Endpoint(api.read_observation)
    events = _Endpoint(api.events)
    iter_events = _Paged(api.iter_events)
    health = _Endpoint(api.health)
    ready = _Endpoint(api.ready)


class _Config:
    def __init__(self, base_url: str | None, token: str | None, timeout: float, max_retries: int,
                 retry: RetryPolicy | None) -> None:
        self.base_url = (base_url or os.environ.get("LANES_API_URL") or DEFAULT_URL).rstrip("/")
        token, self.token_source = resolve_token(token)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy(max_retries=max_retries)

    def hint(self, response: httpx.Response) -> str | None:
        """What an error's message adds: for a 401, where the token sent came from."""
        return token_hint(self.token_source) if response.status_code == 401 else None

    def answer(self, call: Call[R], response: httpx.Response) -> R:
        """The parsed answer, or the typed error of an error status."""
        if response.status_code >= 400 and response.status_code not in call.accept:
            raise error_from_response(response, self.hint(response))
        try:
            return call.parse(response.json())
        except ValueError as exc:  # not JSON, or not the shape expected (pydantic's error is a ValueError)
            raise LanesError(f"unexpected answer to {call.method} {call.path} (HTTP {response.status_code}): "
                             f"{exc}") from exc

    def give_up(self, retry: int, failure: BaseException, call: Call[Any], started: float) -> float:
        """The wait before the next attempt, or raise the typed error when there is none."""
        wait = self.retry.delay(retry, failure, safe=call.safe, elapsed=time.monotonic() - started)
        if wait is None:
            raise public_error(failure, self.base_url) from None
        return wait


def _task_finished(current: SessionStatus, task_id: str) -> bool:
    return any(t.task_id == task_id and t.finished for t in current.tasks)


class AsyncLanesClient(_Calls, _Config):
    """``max_retries``: retries of a failed call (429/503, connection failures, timeouts);
    ``retry`` sets the whole policy instead. ``transport``: an httpx transport (tests)."""

    def __init__(self, base_url: str | None = None, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 3, retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        _Config.__init__(self, base_url, token, timeout, max_retries, retry)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=timeout,
                                       transport=transport)

    async def __aenter__(self) -> AsyncLanesClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, call: Call[R]) -> R:
        started, retry = time.monotonic(), 0
        while True:
            try:
                response = await self._http.request(call.method, call.path, params=call.query, json=call.json,
                                                    headers=dict(call.headers))
                return self.answer(call, response)
            except (httpx.TransportError, LanesAPIError) as exc:
                wait = self.give_up(retry, exc, call, started)
            except httpx.HTTPError as exc:  # not a transport failure (decoding, redirects): no retry
                raise public_error(exc, self.base_url) from None
            retry += 1
            await asyncio.sleep(wait)

    async def _iterate(self, pages: Pages[Any, T]) -> AsyncIterator[T]:
        call: Call[Any] | None = pages.first
        while call is not None:
            page = await self._run(call)
            for entry in pages.entries(page):
                yield entry
            call = pages.next(page)

    async def wait_task(self, session_id: str, task_id: str, *, poll: float = 0.3,
                        timeout: float = 600.0) -> SessionStatus:
        """Poll until the task completed or failed (:class:`TaskStillRunning` after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not _task_finished(current := await self.status(session_id), task_id):
            if time.monotonic() > deadline:
                raise TaskStillRunning(session_id, task_id, timeout)
            await asyncio.sleep(poll)
        return current

    async def stream_events(self, session_id: str, *, after: int = 0,
                            timeout: float | None = None) -> AsyncIterator[EventOut]:
        """Events as they are logged (server-sent events), reconnecting with ``Last-Event-ID``
        when the connection drops; ends when ``timeout`` seconds pass (never when None)."""
        stream = EventStream(session_id, after, timeout, self.retry)
        while True:
            failure: BaseException | None = None
            try:
                async with aconnect_sse(self._http, "GET", stream.path, **stream.request()) as source:
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        raise error_from_response(source.response, self.hint(source.response))
                    async for sse in source.aiter_sse():
                        if (event := stream.accept(sse)) is not None:
                            yield event
            except (httpx.TransportError, LanesAPIError) as exc:
                failure = exc
            except SSEError as exc:
                raise LanesError(f"{stream.path} is not an event stream: {exc}") from None
            wait = stream.reconnect_after(failure)
            if wait is None:
                return
            await asyncio.sleep(wait)


class LanesClient(_Calls, _Config):
    """The synchronous client: the same methods as :class:`AsyncLanesClient`, blocking."""

    def __init__(self, base_url: str | None = None, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 3, retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        _Config.__init__(self, base_url, token, timeout, max_retries, retry)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout, transport=transport)

    def __enter__(self) -> LanesClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: Call[R]) -> R:
        started, retry = time.monotonic(), 0
        while True:
            try:
                response = self._http.request(call.method, call.path, params=call.query, json=call.json,
                                              headers=dict(call.headers))
                return self.answer(call, response)
            except (httpx.TransportError, LanesAPIError) as exc:
                wait = self.give_up(retry, exc, call, started)
            except httpx.HTTPError as exc:
                raise public_error(exc, self.base_url) from None
            retry += 1
            time.sleep(wait)

    def _iterate(self, pages: Pages[Any, T]) -> Iterator[T]:
        call: Call[Any] | None = pages.first
        while call is not None:
            page = self._run(call)
            yield from pages.entries(page)
            call = pages.next(page)

    def wait_task(self, session_id: str, task_id: str, *, poll: float = 0.3, timeout: float = 600.0) -> SessionStatus:
        """Poll until the task completed or failed (:class:`TaskStillRunning` after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not _task_finished(current := self.status(session_id), task_id):
            if time.monotonic() > deadline:
                raise TaskStillRunning(session_id, task_id, timeout)
            time.sleep(poll)
        return current

    def stream_events(self, session_id: str, *, after: int = 0, timeout: float | None = None) -> Iterator[EventOut]:
        """Events as they are logged (server-sent events), reconnecting with ``Last-Event-ID``
        when the connection drops; ends when ``timeout`` seconds pass (never when None)."""
        stream = EventStream(session_id, after, timeout, self.retry)
        while True:
            failure: BaseException | None = None
            try:
                with connect_sse(self._http, "GET", stream.path, **stream.request()) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        raise error_from_response(source.response, self.hint(source.response))
                    for sse in source.iter_sse():
                        if (event := stream.accept(sse)) is not None:
                            yield event
            except (httpx.TransportError, LanesAPIError) as exc:
                failure = exc
            except SSEError as exc:
                raise LanesError(f"{stream.path} is not an event stream: {exc}") from None
            wait = stream.reconnect_after(failure)
            if wait is None:
                return
            time.sleep(wait)
