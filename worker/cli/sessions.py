"""Session commands of ``lanes``: they talk to the HTTP API (``lanes api``).

    lanes session new [--mode hosted|external] [--model M] [--budget T] ...   create; prints the id
    lanes session list | show SESSION | cancel SESSION [--terminate --reason R]
    lanes send SESSION TEXT [--wait]            a user message (hosted mode); TEXT '-' reads stdin
    lanes chat SESSION                          interactive: type messages, watch the agent work
    lanes context SESSION [--all]               the working set: items table and a budget bar
    lanes events SESSION [--after ID] [--follow [--timeout S]]
    lanes recall ADDRESS --session S [--offset N --limit N]   exact text to stdout

The API is ``--url`` / ``LANES_API_URL`` (default http://127.0.0.1:8000); the token is
``--token`` / ``LANES_API_TOKEN``, else the one ``lanes api`` generated in
``<LANES_DATA_DIR>/api-token``. ``--json`` prints machine-readable output.

Exit codes: 0 done, 1 the API refused or failed (message on stderr), 2 usage error,
3 the API could not be reached, 4 a task the command waited for failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lanes_client import DEFAULT_URL, AsyncLanesClient, LanesAPIError, LanesError

EXIT_API, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_TASK_FAILED = 1, 2, 3, 4
LIFECYCLE_STYLE = {"pinned": "magenta", "active": "green", "retained": "yellow", "archived": "bright_black"}
PROJECTION_STYLE = {"full": "", "compact": "cyan", "reference": "blue", "minimal-reference": "blue",
                    "omitted": "bright_black"}
BAR_WIDTH = 50


class Usage(Exception):
    pass


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _token(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if os.environ.get("LANES_API_TOKEN"):
        return os.environ["LANES_API_TOKEN"]
    try:
        from worker.api.main import token_file
        from worker.settings import get_settings

        path = token_file(get_settings())
        return path.read_text(encoding="utf-8").strip() or None if path.is_file() else None
    except Exception:  # settings unreadable: no fallback token
        return None


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help=f"API address (default: $LANES_API_URL or {DEFAULT_URL})")
    parser.add_argument("--token", default=None, help="bearer token (default: $LANES_API_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _client(args: argparse.Namespace) -> AsyncLanesClient:
    return AsyncLanesClient(args.url, _token(args.token))


def _print_json(value: Any) -> None:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _run(prog: str, parser: argparse.ArgumentParser, argv: list[str],
         command: Callable[[argparse.Namespace], Coroutine[Any, Any, int | None]]) -> int:
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the problem
        return EXIT_USAGE if exc.code else 0
    try:
        return asyncio.run(command(args)) or 0
    except Usage as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LanesAPIError as exc:
        print(f"{prog}: HTTP {exc.status} ({exc.code}): {exc.message}", file=sys.stderr)
        if exc.status == 401:
            print("  (set LANES_API_TOKEN or pass --token)", file=sys.stderr)
        return EXIT_API
    except LanesError as exc:  # no connection, or no answer in time (after the client's retries)
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return 130


# --- lanes session ---------------------------------------------------------------------------


def _session_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes session", description="create, list, show and cancel sessions")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{new,list,show,cancel}")
    new = sub.add_parser("new", help="create a session; prints its id")
    new.add_argument("--mode", choices=["hosted", "external"], default="hosted")
    new.add_argument("--model")
    new.add_argument("--budget", type=int, help="working-set budget in tokens")
    new.add_argument("--context-window", type=int)
    new.add_argument("--max-output", type=int)
    new.add_argument("--tools", choices=["workspace", "recall", "none"])
    new.add_argument("--system", help="system prompt")
    new.add_argument("--system-file", help="read the system prompt from this file")
    new.add_argument("--max-turns", type=int)
    new.add_argument("--llm-compaction", action="store_true",
                     help="try one bounded LLM condensation before the deterministic fallback")
    new.add_argument("--subagents", type=int, metavar="N", default=None,
                     help="offer the spawn_subagent tool, with at most N subagents running at once")
    new.add_argument("-q", "--quiet", action="store_true", help="print only the session id")
    _common(new)
    ls = sub.add_parser("list", help="the tenant's sessions, newest first")
    ls.add_argument("--limit", type=int, default=50)
    _common(ls)
    show = sub.add_parser("show", help="a session's configuration, state and tasks")
    show.add_argument("session")
    _common(show)
    cancel = sub.add_parser("cancel", help="close a session (after its queued tasks), or terminate it")
    cancel.add_argument("session")
    cancel.add_argument("--terminate", action="store_true", help="stop now instead of closing")
    cancel.add_argument("--reason", help="why (recorded by Temporal on terminate)")
    _common(cancel)
    return parser


async def _session(args: argparse.Namespace) -> int:
    out = _console()
    async with _client(args) as lanes:
        if args.action == "new":
            system = args.system
            if args.system_file:
                try:
                    with open(args.system_file, encoding="utf-8") as handle:
                        system = handle.read()
                except OSError as exc:
                    raise Usage(f"cannot read --system-file: {exc}") from None
            created = await lanes.create_session(
                mode=args.mode, model=args.model, budget_tokens=args.budget, context_window=args.context_window,
                max_output_tokens=args.max_output, tools=args.tools, system_prompt=system,
                max_turns_per_task=args.max_turns,
                compaction={"enabled": True} if args.llm_compaction else None,
                subagents={"enabled": True, "max_concurrent": args.subagents} if args.subagents else None)
            if args.json:
                _print_json(created)
            elif args.quiet:
                print(created.session_id)
            else:
                out.print(f"created {created.mode} session [bold]{created.session_id}[/bold]")
                print(created.session_id)
            return 0
        if args.action == "list":
            listing = await lanes.list_sessions(limit=args.limit)
            if args.json:
                _print_json(listing)
                return 0
            table = Table("session", "mode", "model", "budget", "created", box=None, pad_edge=False)
            for s in listing.sessions:
                table.add_row(s.session_id, s.mode, str(s.config.get("model", "")),
                              str(s.config.get("budget_tokens") or "window"),
                              s.created_at.strftime("%Y-%m-%d %H:%M:%S"))
            out.print(table if listing.sessions else "no sessions")
            return 0
        if args.action == "show":
            info = await lanes.get_session(args.session)
            if args.json:
                _print_json(info)
                return 0
            workflow = info.workflow.status if info.workflow else "?"
            out.print(f"[bold]{info.session_id}[/bold]  {info.mode} mode  workflow {workflow}  "
                      f"created {info.created_at:%Y-%m-%d %H:%M:%S}")
            config = ", ".join(f"{k}={v}" for k, v in info.config.items()
                               if k not in ("system_prompt_preview", "created_by") and v is not None)
            out.print(f"config: {config}", markup=False)
            if info.status is not None:
                out.print(f"turns {info.status.turns}, items {info.status.items}, closed {info.status.closed}")
                if info.status.tasks:
                    table = Table("task", "state", "turns", "error", box=None, pad_edge=False)
                    for task in info.status.tasks:
                        table.add_row(task.task_id, task.state, str(task.turns), task.error or "")
                    out.print(table)
            elif info.status_error:
                out.print(f"status unavailable: {info.status_error}", markup=False)
            return 0
        result = await lanes.cancel_session(args.session, terminate=args.terminate, reason=args.reason)
        if args.json:
            _print_json(result)
        elif result.action == "none":
            out.print(f"{result.session_id} had already ended ({result.workflow_status})")
        else:
            out.print(f"{result.session_id}: {'terminated' if result.action == 'terminate' else 'closing'} "
                      f"(workflow {result.workflow_status})")
        return 0


def session_main(argv: list[str]) -> int:
    return _run("lanes session", _session_parser(), argv, _session)


# --- lanes send / chat --------------------------------------------------------------------


def _send_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes send", description="send a user message to a hosted session")
    parser.add_argument("session")
    parser.add_argument("text", help="the message ('-' reads it from stdin)")
    parser.add_argument("--wait", action="store_true", help="wait for the task and print the final answer")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait with --wait")
    _common(parser)
    return parser


async def _final_answer(lanes: AsyncLanesClient, session: str) -> str | None:
    report = await lanes.context(session)
    answers = [i for i in report.items if i.kind == "assistant"]
    if not answers:
        return None
    last = max(answers, key=lambda i: i.seq)
    return (await lanes.item(session, last.id)).text


async def _send(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    async with _client(args) as lanes:
        accepted = await lanes.send_message(args.session, text)
        if not args.wait:
            if args.json:
                _print_json(accepted)
            else:
                print(accepted.task_id)
            return 0
        status = await lanes.wait_task(args.session, accepted.task_id, timeout=args.timeout)
        task = next(t for t in status.tasks if t.task_id == accepted.task_id)
        answer = await _final_answer(lanes, args.session) if task.state == "completed" else None
        if args.json:
            _print_json({"task": task.model_dump(), "answer": answer})
        else:
            _console().print(f"{task.task_id} {task.state} after {task.turns} turns"
                             + (f": {task.error}" if task.error else ""), markup=False)
            if answer:
                print(answer)
        return 0 if task.state == "completed" else EXIT_TASK_FAILED


def _chat_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes chat",
                                     description="talk to a hosted session; lines starting with / are commands "
                                                 "(/context, /quit)")
    parser.add_argument("session")
    parser.add_argument("--url", default=None)
    parser.add_argument("--token", default=None)
    return parser


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


async def _show_event(lanes: AsyncLanesClient, session: str, event, out: Console) -> None:
    payload = event.payload
    if event.kind == "item.added":
        kind = payload.get("kind")
        if kind in ("user", "system"):
            return
        try:
            item = await lanes.item(session, payload["item_id"], max_chars=4000)
        except LanesAPIError:
            return
        if kind == "assistant":
            if item.text.strip():
                out.print(Text("assistant: ", style="bold cyan") + Text(_clip(item.text, 2000)))
            for call in item.tool_calls:
                fn = call.get("function", call)
                out.print(Text(f"  → {fn.get('name', '?')} ", style="cyan") + Text(_clip(fn.get("arguments", ""), 200)))
        elif kind == "tool_result":
            exit_code = item.metadata.get("exit_code")
            mark = "" if exit_code in (None, 0) else f" (exit {exit_code})"
            first = item.text.strip().splitlines()[0] if item.text.strip() else ""
            out.print(Text(f"  ← {item.size_chars} chars{mark} ", style="dim") + Text(_clip(first, 150), style="dim"))
        else:
            out.print(Text(f"  + {kind} {item.item_id}", style="dim"))
    elif event.kind.startswith("context."):
        detail = ""
        if "tokens_before" in payload:
            detail = f" {payload.get('tokens_before')} → {payload.get('tokens_after')} tokens, " \
                     f"{payload.get('archived', 0)} archived"
        out.print(Text(f"  · {event.kind}{detail}", style="yellow"))


async def _chat(args: argparse.Namespace) -> int:
    out = _console()
    async with _client(args) as lanes:
        info = await lanes.get_session(args.session)
        if info.mode != "hosted":
            raise Usage(f"session {args.session} is in {info.mode} mode; chat needs a hosted session")
        out.print(f"chatting with [bold]{args.session}[/bold] (/context shows the working set, /quit or Ctrl-D ends)")
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
                await _print_context(lanes, args.session, out, show_all=False)
                continue
            after = await _last_event_id(lanes, args.session)
            accepted = await lanes.send_message(args.session, line)
            out.print(f"[dim]{accepted.task_id} queued[/dim]")
            await _follow_task(lanes, args.session, accepted.task_id, after, out)


async def _follow_task(lanes: AsyncLanesClient, session: str, task_id: str, after: int, out: Console) -> None:
    queue: asyncio.Queue = asyncio.Queue()

    async def pump() -> None:
        async for event in lanes.stream_events(session, after=after):
            await queue.put(event)

    streaming = asyncio.create_task(pump())
    try:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                event = await asyncio.wait_for(queue.get(), 0.5)
                await _show_event(lanes, session, event, out)
                while not queue.empty():
                    await _show_event(lanes, session, queue.get_nowait(), out)
                continue
            status = await lanes.status(session)
            task = next((t for t in status.tasks if t.task_id == task_id), None)
            if task is not None and task.finished:
                await asyncio.sleep(0.6)  # let the stream deliver the last events
                while not queue.empty():
                    await _show_event(lanes, session, queue.get_nowait(), out)
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


def send_main(argv: list[str]) -> int:
    return _run("lanes send", _send_parser(), argv, _send)


def chat_main(argv: list[str]) -> int:
    return _run("lanes chat", _chat_parser(), argv, _chat)


# --- lanes context ------------------------------------------------------------------------


def _context_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes context", description="the session's working set")
    parser.add_argument("session")
    parser.add_argument("--all", action="store_true", help="list omitted items too")
    _common(parser)
    return parser


def budget_bar(tokens_by_lifecycle: dict[str, int], budget: int, width: int = BAR_WIDTH) -> Text:
    """A bar of ``width`` cells: one colour per lifecycle, free budget as dots."""
    total = sum(tokens_by_lifecycle.values())
    scale = max(budget, total, 1)
    bar = Text()
    used = 0
    for lifecycle in ("pinned", "active", "retained"):
        tokens = tokens_by_lifecycle.get(lifecycle, 0)
        cells = round(tokens * width / scale)
        cells = min(cells, width - used)
        bar.append("█" * cells, style=LIFECYCLE_STYLE[lifecycle])
        used += cells
    bar.append("·" * (width - used), style="bright_black")
    return bar


async def _print_context(lanes: AsyncLanesClient, session: str, out: Console, *, show_all: bool) -> None:
    report = await lanes.context(session)
    table = Table("seq", "item", "kind", "state", "projection", "tokens", "reason", "episode", box=None,
                  pad_edge=False, header_style="bold")
    shown = 0
    for item in sorted(report.items, key=lambda i: (i.seq, i.id)):
        if item.projection == "omitted" and not show_all:
            continue
        shown += 1
        table.add_row(str(item.seq), item.id, item.kind,
                      Text(item.lifecycle, style=LIFECYCLE_STYLE.get(item.lifecycle, "")),
                      Text(item.projection, style=PROJECTION_STYLE.get(item.projection, "")),
                      str(item.tokens), item.reason, item.episode or "")
    out.print(table)
    hidden = len(report.items) - shown
    if hidden:
        out.print(f"[dim]{hidden} omitted items not listed (--all lists them)[/dim]")
    pct = 100.0 * report.pressure
    line = Text("budget ") + budget_bar(report.tokens_by_lifecycle, report.budget) + Text(
        f" {report.working_set_tokens:,} / {report.budget:,} tokens ({pct:.1f}%)")
    out.print(line)
    legend = "  ".join(f"{k} {v:,}" for k, v in report.tokens_by_lifecycle.items())
    out.print(Text(f"by state: {legend}"))
    kinds = "  ".join(f"{k} {v:,}" for k, v in sorted(report.tokens_by_kind.items(), key=lambda kv: -kv[1]))
    out.print(Text(f"by kind: {kinds}"))
    out.print(Text(f"compactions {report.compactions}, tool definitions {report.tool_definition_tokens:,} tokens, "
                   f"usable input {report.usable_input:,}"
                   + (f", active episodes {', '.join(report.active_episodes)}" if report.active_episodes else "")))


async def _context(args: argparse.Namespace) -> int:
    async with _client(args) as lanes:
        if args.json:
            _print_json(await lanes.context(args.session))
        else:
            await _print_context(lanes, args.session, _console(), show_all=args.all)
    return 0


def context_main(argv: list[str]) -> int:
    return _run("lanes context", _context_parser(), argv, _context)


# --- lanes events ---------------------------------------------------------------------------


def _events_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes events", description="the session's event log")
    parser.add_argument("session")
    parser.add_argument("--after", type=int, default=0, help="only events with a larger id")
    parser.add_argument("--limit", type=int, default=1000, help="at most this many (without --follow)")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new events (Ctrl-C stops)")
    parser.add_argument("--timeout", type=float, default=None, help="stop following after this many seconds")
    _common(parser)
    return parser


def _event_line(event) -> Text:
    payload = event.payload
    if event.kind == "item.added":
        summary = f"{payload.get('item_id')} {payload.get('kind')} {payload.get('tokens')} tokens"
    elif event.kind == "item.archived":
        summary = f"{payload.get('item_id')} ({payload.get('reason')})"
    else:
        summary = json.dumps({k: v for k, v in payload.items() if not isinstance(v, (dict, list))},
                             ensure_ascii=False)[:160]
    style = "yellow" if event.kind.startswith("context.") else "bright_black" if event.kind == "item.archived" else ""
    return Text(f"{event.id:>6} {event.created_at:%H:%M:%S} ") + Text(f"{event.kind:<28}", style=style) + \
        Text(" " + summary)


async def _events(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise Usage("--limit must be at least 1")
    out = _console()

    def emit(event) -> None:
        if args.json:
            sys.stdout.write(event.model_dump_json() + "\n")
            sys.stdout.flush()
        else:
            out.print(_event_line(event))

    async with _client(args) as lanes:
        if args.follow:
            try:
                async for event in lanes.stream_events(args.session, after=args.after, timeout=args.timeout):
                    emit(event)
            except (KeyboardInterrupt, asyncio.CancelledError):
                return 0
            return 0
        after, remaining = args.after, args.limit
        while remaining > 0:
            page = await lanes.events(args.session, after=after, limit=min(remaining, 1000))
            for event in page.events:
                emit(event)
            remaining -= len(page.events)
            after = page.next_after
            if not page.has_more:
                break
    return 0


def events_main(argv: list[str]) -> int:
    return _run("lanes events", _events_parser(), argv, _events)


# --- lanes recall ---------------------------------------------------------------------------


def _recall_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes recall",
                                     description="exact text of an observation (observation://obs-...?offset=&limit=)")
    parser.add_argument("address", help="observation://obs-... (or obs-...)")
    parser.add_argument("--session", "-s", required=True)
    parser.add_argument("--offset", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None)
    _common(parser)
    return parser


async def _recall(args: argparse.Namespace) -> int:
    from workflows.context.observations import SCHEME, parse_observation_uri

    address = args.address
    if not address.startswith(SCHEME):
        address = SCHEME + address
    try:
        ref = parse_observation_uri(address)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    offset = args.offset if args.offset is not None else ref.offset
    limit = args.limit if args.limit is not None else ref.limit
    async with _client(args) as lanes:
        piece = await lanes.read_observation(args.session, ref.obs_id, offset=offset, limit=limit)
    if args.json:
        _print_json(piece)
        return 0
    sys.stdout.write(piece.text)
    sys.stdout.flush()
    tail = "end of observation" if piece.eof else f"next offset {piece.next_offset}"
    print(f"\n[{piece.address}: characters {piece.offset}-{piece.offset + len(piece.text)} of {piece.total_chars}; "
          f"{tail}]", file=sys.stderr)
    return 0


def recall_main(argv: list[str]) -> int:
    return _run("lanes recall", _recall_parser(), argv, _recall)
