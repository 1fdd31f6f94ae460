"""``lanes context``, ``lanes events`` and ``lanes recall``: what a session holds and did."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from worker.cli.common import JsonOption, TokenOption, UrlOption, Usage, api, console, print_json, run_api

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from lanes_client import AsyncLanesClient
    from lanes_client.schemas import ContextOut
    from lanes_client.shapes import ContextReport

LIFECYCLE_STYLE = {"pinned": "magenta", "active": "green", "retained": "yellow", "archived": "bright_black"}
PROJECTION_STYLE = {"full": "", "compact": "cyan", "reference": "blue", "minimal-reference": "blue",
                    "omitted": "bright_black"}
BAR_WIDTH = 50
LEDGER_PAGE = 500  # stored items per request of --all (the API allows 1000)
# lanes_client.schemas.LedgerState, not imported: --help stays quick (tests/cli checks they match)
LedgerState = Literal["pinned", "active", "retained", "archived"]
# The inverse of workflows/context/ids.py observation_id (obs-<session>-<seq>, obs-<session>-<lane>-<seq>,
# lanes being sub-NNNN) and external_observation_id (obs-<session>-ext-<digest>).
_OBSERVATION = re.compile(r"obs-(?P<session>[A-Za-z0-9][A-Za-z0-9_.-]*?)(?:(?:-sub-\d{4})?-\d{6}|-ext-[0-9A-Za-z]+)")


# --- lanes context ------------------------------------------------------------------------------


def budget_bar(tokens_by_lifecycle: dict[str, int], budget: int, width: int = BAR_WIDTH) -> Text:
    """A bar of ``width`` cells: one colour per lifecycle, free budget as dots."""
    from rich.text import Text

    total = sum(tokens_by_lifecycle.values())
    scale = max(budget, total, 1)
    bar = Text()
    used = 0
    for lifecycle in ("pinned", "active", "retained"):
        cells = min(round(tokens_by_lifecycle.get(lifecycle, 0) * width / scale), width - used)
        bar.append("█" * cells, style=LIFECYCLE_STYLE[lifecycle])
        used += cells
    bar.append("·" * (width - used), style="bright_black")
    return bar


async def print_context(lanes: AsyncLanesClient, session: str, out: Console, *, show_all: bool) -> None:
    """The working set as a table (omitted items only with ``show_all``), then its totals."""
    from rich.table import Table
    from rich.text import Text

    from workflows.context import observation_address

    report = await lanes.context(session)
    table = Table("seq", "item", "kind", "state", "projection", "tokens", "reason", "episode", "recall", box=None,
                  pad_edge=False, header_style="bold")
    table.columns[-1].no_wrap = True  # an address to copy (lanes recall ADDRESS), never cut
    shown = 0
    for item in sorted(report.items, key=lambda i: (i.seq, i.id)):
        if item.projection == "omitted" and not show_all:
            continue
        shown += 1
        table.add_row(str(item.seq), item.id, item.kind,
                      Text(item.lifecycle, style=LIFECYCLE_STYLE.get(item.lifecycle, "")),
                      Text(item.projection, style=PROJECTION_STYLE.get(item.projection, "")),
                      str(item.tokens), item.reason, item.episode or "",
                      observation_address(item.observation_id) if item.observation_id else "")
    out.print(table)
    hidden = len(report.items) - shown
    if hidden:
        out.print(f"[dim]{hidden} omitted items not listed (--all lists every stored item)[/dim]")
    print_totals(report, out)


def print_totals(report: ContextReport, out: Console) -> None:
    """The budget bar and the working set's totals under a table."""
    from rich.text import Text

    pct = 100.0 * report.pressure
    figures = f" {report.working_set_tokens:,} / {report.budget:,} tokens ({pct:.1f}%)"
    width = max(10, min(BAR_WIDTH, out.width - len("budget ") - len(figures)))  # one line on a narrow terminal
    out.print(Text("budget ") + budget_bar(report.tokens_by_lifecycle, report.budget, width) + Text(figures))
    fixed = report.tool_definition_tokens + report.capability_tokens
    if fixed:  # the budget the session was given is not the one shown: say where the rest went
        parts = [f"tool definitions {report.tool_definition_tokens:,}"]
        if report.capability_tokens:
            parts.append(f"capabilities {report.capability_tokens:,}")
        out.print(Text(f"the working set gets {report.budget:,} of {report.budget + fixed:,} tokens: "
                       f"{' and '.join(parts)} are sent with every request"))
    legend = "  ".join(f"{k} {v:,}" for k, v in report.tokens_by_lifecycle.items())
    out.print(Text(f"by state: {legend}"))
    kinds = "  ".join(f"{k} {v:,}" for k, v in sorted(report.tokens_by_kind.items(), key=lambda kv: -kv[1]))
    out.print(Text(f"by kind: {kinds}"))
    out.print(Text(f"compactions {report.compactions}, tool definitions {report.tool_definition_tokens:,} tokens, "
                   f"usable input {report.usable_input:,}"
                   + (f", active episodes {', '.join(report.active_episodes)}" if report.active_episodes else "")))


async def whole_ledger(lanes: AsyncLanesClient, session: str, state: LedgerState | None,
                       page_size: int = LEDGER_PAGE) -> ContextOut:
    """``GET /context?all=true`` with every page of the ledger in one answer (``next_cursor`` None).
    The pages after the first come from ``/ledger``: the same pages and cursors, without the report."""
    first = await lanes.context(session, all=True, state=state, limit=page_size)
    assert first.ledger is not None  # all=True answers it
    entries, cursor = list(first.ledger.items), first.ledger.next_cursor
    if cursor is not None:
        entries += [e async for e in lanes.iter_ledger(session, state=state, cursor=cursor, page_size=page_size)]
    return first.model_copy(update={"ledger": first.ledger.model_copy(update={"items": entries, "next_cursor": None})})


WIDE_LEDGER = 130  # columns the ledger needs to list each item's observation address too


def print_ledger(answer: ContextOut, out: Console, state: LedgerState | None) -> None:
    """Every stored item (one table: the reason wraps, the recall address never), its counts,
    then the working set's totals."""
    from rich.table import Table
    from rich.text import Text

    assert answer.ledger is not None
    from workflows.context import observation_address

    wide = out.width >= WIDE_LEDGER  # room for the addresses (piped output always has it)
    table = Table("item", "kind", "state", "projection", "tokens", "reason", *(["recall"] if wide else []), box=None,
                  pad_edge=False, header_style="bold")
    table.columns[0].no_wrap = True
    table.columns[5].overflow = "fold"  # a long reason wraps rather than losing its end to an ellipsis
    if wide:
        table.columns[-1].no_wrap = True  # an address to copy (lanes recall ADDRESS), never cut
    for entry in answer.ledger.items:
        table.add_row(Text(entry.item_id), Text(entry.kind),  # Text: stored strings are not rich markup
                      Text(entry.state, style=LIFECYCLE_STYLE.get(entry.state, "")),
                      Text(entry.projection, style=PROJECTION_STYLE.get(entry.projection, "")),
                      str(entry.tokens), Text(entry.reason),
                      *([observation_address(entry.observation_id) if entry.observation_id else ""] if wide else []))
    out.print(table)
    if not wide:
        out.print(Text(f"(the items' recall addresses: a terminal of {WIDE_LEDGER} columns, or --json)"))
    counts = answer.ledger.counts
    listed = f"{len(answer.ledger.items)} {state} items listed; " if state else ""
    out.print(Text(f"{listed}stored {counts.history:,} (working set {counts.working_set:,}, archived "
                   f"{counts.archived:,}), observations {counts.observations:,}"))
    out.print(Text("items by state: " + "  ".join(f"{k} {v:,}" for k, v in counts.by_state.items())))
    print_totals(answer, out)


def context(session: str,
            all_: Annotated[bool, typer.Option("--all", help="every stored item, archived ones too, with counts")] = False,
            state: Annotated[LedgerState | None, typer.Option(
                help="with --all: only items in this state (pinned, active, retained, archived)",
                show_default=False)] = None,
            page_size: Annotated[int, typer.Option(min=1, max=1000, help="with --all: items per request")] = LEDGER_PAGE,
            as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """A session's working set: items, their state and cost, and a budget bar (--all: every stored item)."""
    settings = api(url, token, as_json)

    async def run() -> int:
        if state is not None and not all_:
            raise Usage("--state filters the stored items: pass --all with it")
        async with settings.client() as lanes:
            if all_:
                answer = await whole_ledger(lanes, session, state, page_size)
                if as_json:
                    print_json(answer)
                else:
                    print_ledger(answer, console(), state)
            elif as_json:
                print_json(await lanes.context(session))
            else:
                await print_context(lanes, session, console(), show_all=False)
        return 0

    run_api("lanes context", settings, run)


# --- lanes events -------------------------------------------------------------------------------


def _event_line(event: Any) -> Text:
    from rich.text import Text

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


def events(session: str,
           after: Annotated[int, typer.Option(help="only events with a larger id")] = 0,
           limit: Annotated[int, typer.Option(help="at most this many (without --follow)")] = 1000,
           follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing new events (Ctrl-C stops)")] = False,
           timeout: Annotated[float | None, typer.Option(help="stop following after this many seconds")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
           kind: Annotated[list[str] | None, typer.Option(
               "--kind", help="only events of this kind, or under it ('context.' or 'context.compaction'); "
                              "repeatable")] = None,
           url: UrlOption = None, token: TokenOption = None) -> None:
    """A session's event log: compactions, items added and archived (--follow streams it)."""
    settings = api(url, token, as_json)
    kinds = [k.strip() for k in kind or [] if k.strip()]

    async def run() -> int:
        if limit < 1:
            raise Usage("--limit must be at least 1")
        if kind and not kinds:
            raise Usage("--kind needs an event kind, e.g. --kind context.compaction")
        out = console()

        def emit(event: Any) -> bool:
            if kinds and not any(event.kind == k or event.kind.startswith(k.rstrip(".") + ".") for k in kinds):
                return False
            if as_json:
                sys.stdout.write(event.model_dump_json() + "\n")
                sys.stdout.flush()
            else:
                out.print(_event_line(event))
            return True

        async with settings.client() as lanes:
            if follow:
                try:
                    async for event in lanes.stream_events(session, after=after, timeout=timeout):
                        emit(event)
                except (KeyboardInterrupt, asyncio.CancelledError):
                    return 0
                return 0
            position, remaining = after, limit
            while remaining > 0:
                page = await lanes.events(session, after=position, limit=1000 if kinds else min(remaining, 1000))
                for event in page.events:
                    if remaining > 0 and emit(event):
                        remaining -= 1
                position = page.next_after
                if not page.has_more:
                    break
        return 0

    run_api("lanes events", settings, run)


# --- lanes recall -------------------------------------------------------------------------------


def session_of_observation(obs_id: str) -> str | None:
    """The session an observation id names (it is built from it), or None for other ids."""
    match = _OBSERVATION.fullmatch(obs_id)
    return match.group("session") if match else None


def recall(address: Annotated[str, typer.Argument(help="observation://obs-...[?offset=N&limit=N] (or obs-...)")],
           session: Annotated[str | None, typer.Option(
               "--session", "-s", help="[default: the session the address names]", show_default=False)] = None,
           offset: Annotated[int | None, typer.Option(help="first character [default: the address's, else 0]")] = None,
           limit: Annotated[int | None, typer.Option(help="characters [default: the address's, else the API's]")] = None,
           quiet: Annotated[bool, typer.Option("-q", "--quiet", help="no range note on stderr")] = False,
           as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """The exact text of an archived observation, on stdout."""
    from workflows.context import SCHEME, parse_observation_uri

    settings = api(url, token, as_json)

    async def run() -> int:
        full = address if address.startswith(SCHEME) else SCHEME + address
        try:
            ref = parse_observation_uri(full)
        except ValueError as exc:
            raise Usage(str(exc)) from None
        owner = session or session_of_observation(ref.obs_id)
        if owner is None:
            raise Usage(f"{ref.obs_id} does not name its session: pass --session")
        async with settings.client() as lanes:
            piece = await lanes.read_observation(owner, ref.obs_id, offset=offset if offset is not None else ref.offset,
                                                 limit=limit if limit is not None else ref.limit)
        if as_json:
            print_json(piece)
            return 0
        sys.stdout.write(piece.text)
        sys.stdout.flush()
        if not quiet:
            tail = "end of observation" if piece.eof else f"next offset {piece.next_offset}"
            print(f"\n[{piece.address}: characters {piece.offset}-{piece.offset + len(piece.text)} of "
                  f"{piece.total_chars}; {tail}]", file=sys.stderr)
        return 0

    run_api("lanes recall", settings, run)

