"""``lanes subagents``: a session's subagent lanes through the API.

    lanes subagents SESSION                      # the lanes, their state and handoff item
    lanes subagents SESSION --spawn "BRIEF" [--tool T ...]
    lanes subagents SESSION --lane sub-0001      # that lane's own working set
"""

from __future__ import annotations

import argparse

from rich.table import Table

from worker.cli.sessions import _client, _common, _console, _print_json, _run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanes subagents", description=__doc__.split("\n\n")[0])
    parser.add_argument("session")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--spawn", metavar="BRIEF", help="start a subagent with this brief")
    action.add_argument("--lane", help="show this lane's context report")
    parser.add_argument("--tool", action="append", dest="tools", help="with --spawn: a tool it may use (repeat)")
    _common(parser)
    return parser


async def _subagents(args: argparse.Namespace) -> int:
    out = _console()
    async with _client(args) as lanes:
        if args.spawn is not None:
            started = await lanes.spawn_subagent(args.session, args.spawn, args.tools)
            if args.json:
                _print_json(started)
            else:
                out.print(f"started subagent lane [bold]{started.lane}[/bold] ({started.workflow_id})")
            return 0
        if args.lane is not None:
            report = await lanes.subagent_context(args.session, args.lane)
            if args.json:
                _print_json(report)
            else:
                out.print(f"lane {args.lane}: {report.working_set_tokens} of {report.budget} tokens "
                          f"({report.pressure:.0%}); shared prefix {report.shared_prefix_entries} messages, "
                          f"{report.shared_prefix_tokens} tokens; {len(report.items)} items of its own")
            return 0
        children = await lanes.subagents(args.session)
        if args.json:
            _print_json([c.model_dump(mode="json") for c in children])
            return 0
        table = Table("lane", "state", "task", "tools", "handoff item", "brief")
        for child in children:
            table.add_row(child.lane, child.state, child.task_id or "(api)", ",".join(child.tools),
                          child.handoff_item_id or "", child.brief_digest[:60])
        out.print(table if children else "no subagent lanes")
        return 0


def subagents_main(argv: list[str]) -> int:
    return _run("lanes subagents", _parser(), argv, _subagents)
