"""``lanes session new | list | show | cancel``: sessions through the HTTP API (``lanes api``).

The API is ``--url`` / ``LANES_API_URL`` (default http://127.0.0.1:8000); the token is
``--token`` / ``LANES_API_TOKEN``, else the one the API wrote to ``<LANES_DATA_DIR>/api-token``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from lanes_client.schemas import session_budget
from worker.cli.common import (
    EXIT_API,
    EXIT_TASK_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    JsonOption,
    QuietOption,
    TokenOption,
    UrlOption,
    Usage,
    api,
    console,
    data_dir,
    print_json,
    run_api,
)
from worker.cli.local import DEFAULT_BUDGET

__all__ = ["EXIT_API", "EXIT_TASK_FAILED", "EXIT_UNREACHABLE", "EXIT_USAGE", "app"]

app = typer.Typer(name="session", help="Create, list, show and cancel sessions.", no_args_is_help=True)


def _replay_body(trajectory: str | None, model_url: str | None) -> tuple[dict[str, Any], str]:
    """The replay fields of a new session, and the recorded task to send it."""
    from worker.local import replay_session as rs

    try:
        path = rs.resolve_trajectory(trajectory)
        recording = rs.load(path)
        url = model_url or rs.read_model_url(data_dir())
    except rs.ReplayUnavailable as exc:
        raise Usage(str(exc)) from None
    return rs.session_body(path, recording, url), recording.task


CONTEXT_TOOLS = ("begin_episode", "end_episode", "condense_context", "pin_note")


def budget_line(config: dict[str, Any]) -> str:
    """What the session's budget is, and when no budget was chosen, what that means for cost."""
    if config.get("budget_tokens"):
        return f"budget: {config['budget_tokens']:,} tokens (the working set compacts near it)"
    return (f"budget: the model's usable window, {session_budget(config):,} tokens: it compacts only near that, "
            "so it saves little; pass --budget (e.g. 16000, about half the cost of the full history on recorded "
            "sessions) to compact for cost")


def _context_tools(names: list[str] | None) -> list[str] | None:
    if not names:
        return None
    chosen: list[str] = []
    for name in names:
        for tool in CONTEXT_TOOLS[:3] if name == "episodes" else (name,):
            if tool not in CONTEXT_TOOLS:
                raise Usage(f"--context-tool {name!r}: one of {', '.join(CONTEXT_TOOLS)} or episodes")
            if tool not in chosen:
                chosen.append(tool)
    return chosen


@app.command("new")
def new(
    trajectory: Annotated[str | None, typer.Argument(
        help="with --replay: the recording to replay [default: the demo's]", show_default=False)] = None,
    mode: Annotated[Literal["hosted", "external"], typer.Option()] = "hosted",
    model: Annotated[str | None, typer.Option()] = None,
    budget: Annotated[int | None, typer.Option(
        help="working-set budget in tokens (tool definitions are charged to it) [default: the model's usable "
             "window; a replay: 12,000]", show_default=False)] = None,
    context_window: Annotated[int | None, typer.Option()] = None,
    max_output: Annotated[int | None, typer.Option()] = None,
    tools: Annotated[Literal["workspace", "recall", "none"] | None, typer.Option()] = None,
    system: Annotated[str | None, typer.Option(help="system prompt")] = None,
    system_file: Annotated[Path | None, typer.Option(help="read the system prompt from this file")] = None,
    max_turns: Annotated[int | None, typer.Option()] = None,
    llm_compaction: Annotated[bool | None, typer.Option("--llm-compaction/--no-llm-compaction",
        help="try one bounded LLM condensation at 80 % before the deterministic fallback [default: on, "
             "except replays]", show_default=False)] = None,
    context_tool: Annotated[list[str] | None, typer.Option(
        "--context-tool", metavar="NAME", help="offer a context tool to the model (repeatable): begin_episode, "
        "end_episode, condense_context, pin_note; 'episodes' stands for the three first")] = None,
    subagents: Annotated[int | None, typer.Option(
        metavar="N", help="offer the spawn_subagent tool, with at most N subagents running at once")] = None,
    replay: Annotated[bool, typer.Option("--replay",
        help="replay a recorded session with the replay model that 'lanes dev --replay' started, and send it "
             "its recorded task (no API key needed)")] = False,
    replay_model_url: Annotated[str | None, typer.Option(
        help="with --replay: the replay model's base URL [default: the one in <LANES_DATA_DIR>/replay-model.json]",
        show_default=False)] = None,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create a session; prints its id on stdout."""
    settings = api(url, token, as_json)

    async def run() -> int:
        replay_fields: dict[str, Any] = {}
        task = None
        if replay or trajectory is not None:
            replay_fields, task = _replay_body(trajectory, replay_model_url)
            if mode != "hosted":
                raise Usage("a replay drives the hosted agent loop: --mode hosted")
        elif replay_model_url:
            raise Usage("--replay-model-url needs --replay")
        prompt = system
        if system_file is not None:
            try:
                prompt = system_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise Usage(f"cannot read --system-file: {exc}") from None
        fields = {**replay_fields, "mode": mode, "model": model or replay_fields.get("model"),
                  "system_prompt": prompt or replay_fields.get("system_prompt")}
        async with settings.client() as lanes:
            created = await lanes.create_session(
                **fields, budget_tokens=budget or (DEFAULT_BUDGET if task else None),  # a replay compacts as
                context_window=context_window,  # 'lanes dev --replay' does
                max_output_tokens=max_output, tools=tools, max_turns_per_task=max_turns,
                compaction=None if llm_compaction is None else {"enabled": llm_compaction},
                context_tools=_context_tools(context_tool),
                subagents={"enabled": True, "max_concurrent": subagents} if subagents else None)
            accepted = await lanes.send_message(created.session_id, task) if task else None
        if as_json:
            print_json({**created.model_dump(mode="json"), **({"task_id": accepted.task_id} if accepted else {})})
            return 0
        if not quiet:  # the human line on stderr: stdout holds the id alone
            note = f"; replaying its recorded task as {accepted.task_id}" if accepted else ""
            console(stderr=True).print(f"created {created.mode} session [bold]{created.session_id}[/bold]{note}")
            console(stderr=True).print(budget_line(created.config), highlight=False)
        print(created.session_id)
        return 0

    run_api("lanes session new", settings, run)


@app.command("list")
def list_(limit: Annotated[int, typer.Option(min=1)] = 50, as_json: JsonOption = False,
          url: UrlOption = None, token: TokenOption = None) -> None:
    """The tenant's sessions, newest first."""
    from rich.table import Table

    settings = api(url, token, as_json)

    async def run() -> int:
        async with settings.client() as lanes:
            listing = await lanes.list_sessions(limit=limit)
        if as_json:
            print_json(listing)
            return 0
        table = Table("session", "mode", "model", "budget", "turns", "last active", "first task", box=None,
                      pad_edge=False)
        for s in listing.sessions:
            active = s.last_activity or s.created_at
            task = " ".join((s.first_task or "").split())
            table.add_row(s.session_id, s.mode, str(s.config.get("model", "")),
                          str(s.config.get("budget_tokens") or "window"), str(s.turns),
                          active.strftime("%Y-%m-%d %H:%M:%S"), task[:47] + "…" if len(task) > 48 else task)
        console().print(table if listing.sessions else "no sessions")
        return 0

    run_api("lanes session list", settings, run)


@app.command("show")
def show(session: str, as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """A session's configuration, state and tasks."""
    from rich.table import Table

    settings = api(url, token, as_json)

    async def run() -> int:
        async with settings.client() as lanes:
            info = await lanes.get_session(session)
        if as_json:
            print_json(info)
            return 0
        out = console()
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

    run_api("lanes session show", settings, run)


@app.command("cancel")
def cancel(session: str,
           terminate: Annotated[bool, typer.Option("--terminate", help="stop now instead of closing")] = False,
           reason: Annotated[str | None, typer.Option(help="why (recorded by Temporal on terminate)")] = None,
           as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None) -> None:
    """Close a session (after its queued tasks), or terminate it."""
    settings = api(url, token, as_json)

    async def run() -> int:
        async with settings.client() as lanes:
            result = await lanes.cancel_session(session, terminate=terminate, reason=reason)
        if as_json:
            print_json(result)
        elif result.action == "none":
            console().print(f"{result.session_id} had already ended ({result.workflow_status})")
        else:
            console().print(f"{result.session_id}: {'terminated' if result.action == 'terminate' else 'closing'} "
                            f"(workflow {result.workflow_status})")
        return 0

    run_api("lanes session cancel", settings, run)


def session_main(argv: list[str]) -> int:
    """``lanes session ARGS`` (kept for callers of the former entry point)."""
    from worker.cli import run

    return run(["session", *argv])


if __name__ == "__main__":
    sys.exit(session_main(sys.argv[1:]))
