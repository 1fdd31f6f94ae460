"""``lanes subagents``: a session's subagent lanes through the API.

    lanes subagents SESSION                      # the lanes, their state and handoff item
    lanes subagents SESSION --spawn "BRIEF" [--tool T ...]
    lanes subagents SESSION --lane sub-0001      # that lane's own working set
"""

from __future__ import annotations

from typing import Annotated

import typer

from worker.cli.common import JsonOption, TokenOption, UrlOption, Usage, api, console, print_json, run_api


def subagents(
    session: str,
    spawn: Annotated[str | None, typer.Option(metavar="BRIEF", help="start a subagent with this brief")] = None,
    lane: Annotated[str | None, typer.Option(help="show this lane's context report")] = None,
    tools: Annotated[list[str] | None, typer.Option("--tool", help="with --spawn: a tool it may use (repeat)")] = None,
    as_json: JsonOption = False, url: UrlOption = None, token: TokenOption = None,
) -> None:
    """A session's subagent lanes: list them, --spawn one, or show a --lane's working set."""
    from rich.table import Table

    settings = api(url, token, as_json)

    async def run() -> int:
        if spawn is not None and lane is not None:
            raise Usage("--spawn and --lane exclude each other")
        out = console()
        async with settings.client() as lanes:
            if spawn is not None:
                started = await lanes.spawn_subagent(session, spawn, tools)
                if as_json:
                    print_json(started)
                else:
                    out.print(f"started subagent lane [bold]{started.lane}[/bold] ({started.workflow_id})")
                return 0
            if lane is not None:
                report = await lanes.subagent_context(session, lane)
                if as_json:
                    print_json(report)
                else:
                    out.print(f"lane {lane}: {report.working_set_tokens} of {report.budget} tokens "
                              f"({report.pressure:.0%}); shared prefix {report.shared_prefix_entries} messages, "
                              f"{report.shared_prefix_tokens} tokens; {len(report.items)} items of its own")
                return 0
            children = await lanes.subagents(session)
        if as_json:
            print_json([c.model_dump(mode="json") for c in children])
            return 0
        table = Table("lane", "state", "task", "tools", "handoff item", "brief")
        for child in children:
            table.add_row(child.lane, child.state, child.task_id or "(api)", ",".join(child.tools),
                          child.handoff_item_id or "", child.brief_digest[:60])
        out.print(table if children else "no subagent lanes")
        return 0

    run_api("lanes subagents", settings, run)
