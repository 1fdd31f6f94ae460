"""``lanes send`` and ``lanes chat``: user messages to a hosted session."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.cli.common import (
    EXIT_TASK_FAILED,
    JsonOption,
    QuietOption,
    TokenOption,
    UrlOption,
    Usage,
    api,
    console,
    print_json,
    run_api,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from lanes_client import AsyncLanesClient


def send(
    session: str,
    text: Annotated[str, typer.Argument(help="the message ('-' reads it from stdin)")],
    wait: Annotated[bool, typer.Option("--wait", help="wait for the task and print its final answer")] = False,
    timeout: Annotated[float, typer.Option(help="seconds to wait with --wait")] = 600.0,
    exhaustive: Annotated[bool, typer.Option("--exhaustive", help="the task may not end before its oversized input "
                                             "was read in full (its final answer is refused until then)")] = False,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Send a user message to a hosted session; prints the task id (--wait: its answer)."""
    settings = api(url, token, as_json)

    async def run() -> int:
        message = sys.stdin.read() if text == "-" else text
        async with settings.client() as lanes:
            accepted = await lanes.send_message(session, message, exhaustive=exhaustive)
            if not wait:
                print_json(accepted) if as_json else print(accepted.task_id)
                return 0
            status = await lanes.wait_task(session, accepted.task_id, timeout=timeout)
            task = next(t for t in status.tasks if t.task_id == accepted.task_id)
            answer = await task_answer(lanes, session, task) if task.state == "completed" else None
        if as_json:
            print_json({"task": task.model_dump(mode="json"), "answer": answer})
        else:
            if not quiet:
                console().print(f"{task.task_id} {task.state} after {task.turns} turns"
                                + (f": {task.error}" if task.error else ""), markup=False)
            if answer:
                print(answer)
        return 0 if task.state == "completed" else EXIT_TASK_FAILED

    run_api("lanes send", settings, run)


async def task_answer(lanes: AsyncLanesClient, session: str, task: Any) -> str | None:
    """The task's final answer, as the API keeps it (also once the answer left the working set)."""
    return (await lanes.get_task(session, task.task_id)).answer_text


# --- lanes chat -------------------------------------------------------------------------------


def chat(session: str, url: UrlOption = None, token: TokenOption = None) -> None:
    """Talk to a hosted session, watching its events; /context shows the working set, /quit ends."""
    from worker.cli.inspection import print_context

    settings = api(url, token)

    async def run() -> int:
        out = console()
        async with settings.client() as lanes:
            info = await lanes.get_session(session)
            if info.mode != "hosted":
                raise Usage(f"session {session} is in {info.mode} mode; chat needs a hosted session")
            out.print(f"chatting with [bold]{session}[/bold] (/context shows the working set, /quit or Ctrl-D ends)")
            while True:
                try:
                    line = await asyncio.to_thread(input, "you> ")
                except EOFError:
                    out.print()
                    return 0
                line = line.strip()
                if not line:
                    continue
                if line in ("/quit", "/exit"):
                    return 0
                if line == "/context":
                    await print_context(lanes, session, out, show_all=False)
                    continue
                after = await _last_event_id(lanes, session)
                accepted = await lanes.send_message(session, line)
                out.print(f"[dim]{accepted.task_id} queued[/dim]")
                await _follow_task(lanes, session, accepted.task_id, after, out)

    run_api("lanes chat", settings, run)


def _clip(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


async def _last_event_id(lanes: AsyncLanesClient, session: str) -> int:
    after = 0
    while True:
        page = await lanes.events(session, after=after, limit=1000)
        after = page.next_after
        if not page.has_more:
            return after


async def _event_text(lanes: AsyncLanesClient, session: str, event: Any) -> list[Text]:
    """What chat shows of an event: the agent's answers and tool calls, results, compactions."""
    from rich.text import Text

    from lanes_client import LanesAPIError

    payload = event.payload
    if event.kind.startswith("context."):
        detail = ""
        if "tokens_before" in payload:
            detail = f" {payload.get('tokens_before')} → {payload.get('tokens_after')} tokens, " \
                     f"{payload.get('archived', 0)} archived"
        return [Text(f"  · {event.kind}{detail}", style="yellow")]
    kind = payload.get("kind")
    if event.kind != "item.added" or kind in ("user", "system"):
        return []
    try:
        item = await lanes.item(session, payload["item_id"], max_chars=4000)
    except LanesAPIError:
        return []
    if kind == "assistant":
        lines = [Text("assistant: ", style="bold cyan") + Text(_clip(item.text, 2000))] if item.text.strip() else []
        for call in item.tool_calls:
            fn = call.get("function", call)
            lines.append(Text(f"  → {fn.get('name', '?')} ", style="cyan") + Text(_clip(fn.get("arguments", ""), 200)))
        return lines
    if kind == "tool_result":
        exit_code = item.metadata.get("exit_code")
        mark = "" if exit_code in (None, 0) else f" (exit {exit_code})"
        first = item.text.strip().splitlines()[0] if item.text.strip() else ""
        return [Text(f"  ← {item.size_chars} chars{mark} ", style="dim") + Text(_clip(first, 150), style="dim")]
    return [Text(f"  + {kind} {item.item_id}", style="dim")]


async def _follow_task(lanes: AsyncLanesClient, session: str, task_id: str, after: int, out: Console) -> None:
    from rich.text import Text

    from lanes_client import LanesError

    queue: asyncio.Queue = asyncio.Queue()

    async def pump() -> None:
        async for event in lanes.stream_events(session, after=after):
            await queue.put(event)

    async def drain() -> None:
        while not queue.empty():
            for line in await _event_text(lanes, session, queue.get_nowait()):
                out.print(line)

    streaming = asyncio.create_task(pump())
    try:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                first = await asyncio.wait_for(queue.get(), 0.5)
                for line in await _event_text(lanes, session, first):
                    out.print(line)
                await drain()
                continue
            status = await lanes.status(session)
            task = next((t for t in status.tasks if t.task_id == task_id), None)
            if task is not None and task.finished:
                await asyncio.sleep(0.6)  # let the stream deliver the last events
                await drain()
                style = "green" if task.state == "completed" else "red"
                out.print(Text(f"{task_id} {task.state} after {task.turns} turns"
                               + (f": {task.error}" if task.error else ""), style=style))
                return
            if streaming.done() and streaming.exception() is not None:
                raise streaming.exception()  # type: ignore[misc]
    finally:
        streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError, LanesError):
            await streaming
