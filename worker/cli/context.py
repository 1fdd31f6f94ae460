"""``lanes capability add`` and ``lanes pin``: capability context and pinned notes through
the API (admission and the budget check are the session's; refusals exit 1 with the reason)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from lanes_client.schemas import CapabilityOut, NoteOut
from worker.cli.common import EXIT_API, JsonOption, QuietOption, TokenOption, UrlOption, Usage, api, print_json, run_api

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _read(content: str | None, file: Path | None) -> str:
    if (content is None) == (file is None):
        raise Usage("give the content as --content TEXT or --file PATH (one of them; '-' reads stdin)")
    if file is None:
        assert content is not None
        return sys.stdin.read() if content == "-" else content
    try:
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise Usage(f"cannot read --file: {exc}") from None


@app.command("add")
def add(
    session: str,
    name: Annotated[str, typer.Argument(help="the tool's or skill's name")],
    content: Annotated[str | None, typer.Option(help="the tool schema or skill body ('-': stdin)")] = None,
    file: Annotated[Path | None, typer.Option(help="read the content from this file")] = None,
    kind: Annotated[Literal["tool_schema", "skill", "manual_skill"], typer.Option(
        help="manual_skill: a slash-skill the user asked for (skipped, with a status message, when it does not fit)")]
        = "skill",
    scope: Annotated[Literal["step", "task"], typer.Option(help="step: one model step; task: until the task ends")]
        = "task",
    quiet: QuietOption = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Admit a tool schema or skill body into a session's capability context; prints the
    admission (refused or skipped: exit 1, with need, margin and ceiling)."""
    settings = api(url, token, as_json)

    async def run() -> int:
        text = _read(content, file)
        async with settings.client() as lanes:
            result = await lanes.add_capability(session, name, text, kind=kind, scope=scope)
        return _outcome(result, "admitted", f"{result.status}: {result.message}", quiet, as_json)

    run_api("lanes capability add", settings, run)


def pin(
    session: str,
    text: Annotated[str, typer.Argument(help="the note ('-' reads it from stdin)")],
    quiet: QuietOption = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Pin a note in a session for the rest of it; prints its item id (refused when pinned
    content would exceed its share of the budget: exit 1 with the figures)."""
    settings = api(url, token, as_json)

    async def run() -> int:
        note = sys.stdin.read() if text == "-" else text
        async with settings.client() as lanes:
            result = await lanes.pin_note(session, note)
        return _outcome(result, "pinned", result.message, quiet, as_json)

    run_api("lanes pin", settings, run)


def _outcome(result: CapabilityOut | NoteOut, success: str, refusal: str, quiet: bool, as_json: bool) -> int:
    """Print what the API answered: the item id on stdout when it was taken (its message on
    stderr unless quiet), else the refusal on stderr (exit 1)."""
    if as_json:
        print_json(result)
    elif result.status == success:
        print(result.item_id)
        if not quiet:
            print(result.message, file=sys.stderr)
    else:
        print(refusal, file=sys.stderr)
    return 0 if result.status == success else EXIT_API
