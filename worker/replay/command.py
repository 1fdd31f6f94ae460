"""``lanes replay``: replay recorded trajectories offline under context policies.

    lanes replay [--policy P]... [--budget TOKENS] [--json] [--jobs N] PATH...

For every recorded model call, build the request each policy would send (``full``,
``masking-M``, ``lanes``; default: full, masking-10 and lanes) and report input tokens,
prompt-cache hits, cost units, peak request, requests over the budget, compactions,
planning time and lost items. ``--json`` prints one JSON object; otherwise a table, with
a progress bar over files on stderr. No Temporal, no PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import sys

from worker.replay.policies import ReplayError, parse_policy
from worker.replay.simulator import DEFAULT_BUDGET, DEFAULT_POLICIES, ReplayReport, default_jobs, replay_paths


def _policy(value: str) -> str:
    try:
        return parse_policy(value).name
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {number}")
    return number


def _option(value: str) -> tuple[str, object]:
    key, eq, raw = value.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = raw
    return key.strip(), parsed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lanes replay",
        description="Replay recorded agent trajectories offline and compare context policies.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trajectory files or folders (searched recursively)")
    parser.add_argument("--policy", action="append", type=_policy, metavar="P",
                        help="full, lanes or masking-M (e.g. masking-10); repeat for several "
                             f"(default: {', '.join(DEFAULT_POLICIES)})")
    parser.add_argument("--budget", type=_positive, default=DEFAULT_BUDGET, metavar="TOKENS",
                        help=f"input token budget of a request (default: {DEFAULT_BUDGET})")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--jobs", type=_positive, default=None, metavar="N",
                        help="replay files in N processes (default: one per CPU, at most 8)")
    parser.add_argument("--engine-option", action="append", type=_option, default=[], metavar="KEY=VALUE",
                        help="experiment: override an EngineConfig field of the lanes policy "
                             "(e.g. target_ratio=0.4); the defaults are the engine's")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    policies = list(dict.fromkeys(args.policy or DEFAULT_POLICIES))  # keep order, drop repeats
    jobs = args.jobs or default_jobs()
    options = dict(args.engine_option) or None
    try:
        if args.json:
            report = replay_paths(args.paths, policies, args.budget, jobs=jobs, engine_options=options)
        else:
            report = _with_progress(args.paths, policies, args.budget, jobs, options)
    except (ReplayError, ValueError) as error:
        print(f"lanes replay: error: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        _print_table(report)
    return 0


def _with_progress(paths: list[str], policies: list[str], budget: int, jobs: int,
                   options: dict | None) -> ReplayReport:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("replay", total=None)
        return replay_paths(paths, policies, budget, jobs=jobs, engine_options=options,
                            on_start=lambda n: progress.update(task, total=n),
                            on_file=lambda _: progress.advance(task))


def _print_table(report: ReplayReport) -> None:
    from rich.console import Console
    from rich.table import Table

    data = report.as_dict()
    table = Table(title=f"{data['files']} files, {data['steps']:,} model calls, budget {data['budget']:,} tokens "
                        f"({report.seconds:.1f} s)")
    for column in ("policy", "input tokens", "cached", "cost units", "×first", "peak", "over budget",
                   "unfit", "compactions", "plan p50 ms", "plan p99 ms", "lost items"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    first = None
    for name, p in data["policies"].items():
        first = first or p["cost_units"] or 1.0
        table.add_row(
            name, f"{p['input_tokens']:,}", f"{p['cached_input_tokens']:,}", f"{p['cost_units']:,.0f}",
            f"{p['cost_units'] / first:.3f}", f"{p['peak_input_tokens']:,}", str(p["over_budget_steps"]),
            str(p["unfit_steps"]), str(p["compactions"]), f"{p['plan_ms_p50']:.3f}", f"{p['plan_ms_p99']:.3f}",
            str(p["lost_items"]),
        )
    console = Console()
    if not console.is_terminal:  # piped: no terminal width to respect, keep the numbers whole
        console = Console(width=200)
    console.print(table)
    print("cost units = uncached input + 0.1 × cached input (a prefix of at least 1,024 tokens byte-identical "
          "to the previous request); ×first = cost relative to the first policy listed.")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
