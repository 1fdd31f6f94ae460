"""``lanes replay``: recorded sessions replayed offline under context policies (no stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from worker.cli.common import QuietOption, fail

DEFAULT_POLICIES = ("full", "masking-10", "lanes")  # worker.replay.simulator.DEFAULT_POLICIES
DEFAULT_BUDGET = 16_000  # worker.replay.simulator.DEFAULT_BUDGET (tests/cli check they agree)


def _policy(value: str) -> str:
    from worker.replay.policies import parse_policy

    try:
        return parse_policy(value).name
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def replay(
    paths: Annotated[list[str], typer.Argument(metavar="PATH...", help="trajectory files or folders (searched recursively)")],
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", metavar="P", callback=lambda values: [_policy(v) for v in values or []],
        help=f"full, lanes or masking-M (e.g. masking-10); repeat for several [default: {', '.join(DEFAULT_POLICIES)}]",
        show_default=False)] = None,
    budget: Annotated[list[int] | None, typer.Option(
        "--budget", metavar="TOKENS", min=1,
        help=f"input token budget of a request; repeat to compare budgets [default: {DEFAULT_BUDGET:,}]",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object instead of a table")] = False,
    csv: Annotated[Path | None, typer.Option(metavar="FILE", help="write the figures per budget and policy as CSV")] = None,
    plot: Annotated[Path | None, typer.Option(
        metavar="FILE.png", help="plot cost and peak request per budget and policy (matplotlib)")] = None,
    jobs: Annotated[int | None, typer.Option(metavar="N", min=1,
                                             help="replay files in N processes [default: one per CPU, at most 8]",
                                             show_default=False)] = None,
    engine_option: Annotated[list[str] | None, typer.Option(
        metavar="KEY=VALUE", help="experiment: override an EngineConfig field of the lanes policy "
                                  "(e.g. target_ratio=0.4); the defaults are the engine's")] = None,
    quiet: QuietOption = False,
) -> None:
    """Replay recorded agent sessions offline and compare context policies: input tokens, cache hits,
    cost, peak request, compactions, lost items."""
    from worker.replay.command import ReplayOptions, parse_option, run
    from worker.replay.simulator import DEFAULT_POLICIES as policies_default

    try:
        options = dict(parse_option(value) for value in engine_option or []) or None
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--engine-option") from None
    if plot is not None and plot.suffix.lower() != ".png":
        raise fail("lanes replay", f"--plot writes a PNG: name the file *.png (got {plot})", 2)
    code = run(ReplayOptions(paths=paths, policies=policy or list(policies_default), budgets=budget or [DEFAULT_BUDGET],
                             as_json=as_json, jobs=jobs, engine_options=options, csv=csv, plot=plot, quiet=quiet))
    if code:
        raise typer.Exit(code)
