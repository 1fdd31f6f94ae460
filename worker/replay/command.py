"""``lanes replay``: replay recorded trajectories offline under context policies.

    lanes replay [--policy P]... [--budget TOKENS]... [--json | --csv FILE | --plot FILE.png] [--jobs N] PATH...

For every recorded model call, build the request each policy would send (``full``,
``masking-M``, ``lanes``; default: full, masking-10 and lanes) and report input tokens,
prompt-cache hits, cost units, peak request, requests over the budget, compactions,
planning time and lost items, once per budget. ``--json`` prints one JSON object;
otherwise a table (one row per policy on a wide terminal, one row per figure at 80 columns),
with a progress bar over files on stderr. ``--csv`` and ``--plot`` write the figures per
budget and policy (:mod:`worker.replay.export`). No Temporal, no PostgreSQL.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from worker.replay import export
from worker.replay.policies import ReplayError, parse_policy
from worker.replay.simulator import DEFAULT_BUDGET, DEFAULT_POLICIES, ReplayReport, default_jobs, replay_paths


def parse_option(value: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``--engine-option``; the value is JSON when it parses as JSON."""
    key, eq, raw = value.partition("=")
    if not eq or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {value!r}")
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = raw
    return key.strip(), parsed


@dataclass
class ReplayOptions:
    paths: list[str]
    policies: list[str] = field(default_factory=lambda: list(DEFAULT_POLICIES))
    budgets: list[int] = field(default_factory=lambda: [DEFAULT_BUDGET])
    as_json: bool = False
    jobs: int | None = None
    engine_options: dict | None = None
    csv: Path | None = None
    plot: Path | None = None
    quiet: bool = False


def run(options: ReplayOptions) -> int:
    policies = [parse_policy(p).name for p in dict.fromkeys(options.policies)]  # keep order, drop repeats
    budgets = list(dict.fromkeys(options.budgets))
    jobs = options.jobs or default_jobs()
    reports = []
    try:
        for budget in budgets:
            if options.as_json or options.quiet:
                reports.append(replay_paths(options.paths, policies, budget, jobs=jobs,
                                            engine_options=options.engine_options))
            else:
                reports.append(_with_progress(options.paths, policies, budget, jobs, options.engine_options))
    except (ReplayError, ValueError) as error:
        print(f"lanes replay: error: {error}", file=sys.stderr)
        return 1
    if options.csv is not None:
        export.write_csv(reports, options.csv)
    if options.plot is not None:
        try:
            export.write_plot(reports, options.plot)
        except export.PlotUnavailable as error:
            print(f"lanes replay: {error}", file=sys.stderr)
            return 1
    if options.as_json:
        data = [report.as_dict() for report in reports]
        print(json.dumps(data[0] if len(data) == 1 else {"budgets": data}, indent=2))
    else:
        for report in reports:
            _print_table(report, quiet=options.quiet)
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


COLUMNS = ("input tokens", "cached", "cost units", "×first", "peak", "over budget", "unfit", "compactions",
           "plan p50 ms", "plan p99 ms", "lost items")
WIDE = 132  # the one-row-per-policy table needs this many columns; narrower: one row per figure
CAPTION = ("cost units = uncached input + 0.1 × cached input (a prefix of at least 1,024 tokens byte-identical "
           "to the previous request, tool definitions first); ×first = cost relative to the first policy listed.")


def _figures(report: ReplayReport) -> dict[str, list[str]]:
    """Each policy's figures, formatted in the order of :data:`COLUMNS`."""
    out: dict[str, list[str]] = {}
    first = None
    for name, p in report.as_dict()["policies"].items():
        first = first or p["cost_units"] or 1.0
        out[name] = [f"{p['input_tokens']:,}", f"{p['cached_input_tokens']:,}", f"{p['cost_units']:,.0f}",
                     f"{p['cost_units'] / first:.3f}", f"{p['peak_input_tokens']:,}", str(p["over_budget_steps"]),
                     str(p["unfit_steps"]), str(p["compactions"]), f"{p['plan_ms_p50']:.3f}",
                     f"{p['plan_ms_p99']:.3f}", str(p["lost_items"])]
    return out


def _print_table(report: ReplayReport, quiet: bool = False, console: Console | None = None) -> None:
    from rich.table import Table

    data = report.as_dict()
    title = (f"{data['files']} files, {data['steps']:,} model calls, budget {data['budget']:,} tokens "
             f"({report.seconds:.1f} s)")
    if console is None:
        console = Console()
        if not console.is_terminal:  # piped: no terminal width to respect, keep the numbers whole
            console = Console(width=100_000)
    figures = _figures(report)
    if console.width >= WIDE:
        table = Table(title=title)
        table.add_column("policy")
        for column in COLUMNS:
            table.add_column(column, justify="right")
        for name, values in figures.items():
            table.add_row(name, *values)
    else:  # at 80 columns: policies across, figures down
        table = Table(title=title, title_justify="left")
        table.add_column("")
        for name in figures:
            table.add_column(name, justify="right")
        for index, column in enumerate(COLUMNS):
            table.add_row(column, *(values[index] for values in figures.values()))
    console.print(table)
    if not quiet:
        console.print(CAPTION, highlight=False)


if __name__ == "__main__":
    from worker.cli import run as cli

    sys.exit(cli(["replay", *sys.argv[1:]]))
