"""The scale bench against an earlier revision, alternating, in one run: per-turn costs as ratios.

    .venv/bin/python bench/scale_against.py [--against 1b6c27d] [--levels 1,16,64,128] [--rounds 2]

CPU per turn on a shared machine moves with the machine: the same code measured 9.4-13.2 ms of
worker CPU a turn one day and about twice that another. A figure from another day cannot be
compared; a ratio to a reference measured in the same hour can. This driver checks ``--against``
out into a temporary git worktree and runs ``bench/scale.py --levels ...`` there and here,
alternating (reference first), ``--rounds`` times each; each run starts its own throwaway stack
(Temporal dev server, PostgreSQL) and worker from its own checkout. Per level it reports the mean
of each side's runs and their ratio (now / reference) for the worker's, Temporal's and
PostgreSQL's CPU per turn and for turns per second; applied to a figure the reference measured
on another day, the ratio says what this code would have measured then.

Writes ``bench/results/scale-against.json`` and the ``scale-against`` block of
``bench/results/README.md``.

What it cannot see: what ``bench/scale.py`` cannot (a real model, tools that do work, several
hosts), and differences between the two checkouts' local stacks (each runs its own
``worker/local/stack.py``), which are counted as the code's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _results

from recordings import DEFAULT_TRAJECTORY_ROOT

PROCESSES = ("worker", "temporal", "postgres")


def scale_run(checkout: Path, levels: str, out: Path) -> dict[str, Any]:
    env = {**os.environ, "LANES_TRAJECTORY_ROOT": str(Path(DEFAULT_TRAJECTORY_ROOT).resolve())}
    subprocess.run([sys.executable, "bench/scale.py", "--levels", levels, "--out", str(out)], cwd=checkout,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def summary(runs: dict[str, list[dict[str, Any]]], reference: str) -> list[dict[str, Any]]:
    """Per level: each side's mean over its runs, and now / reference."""
    rows = []
    for index, level in enumerate(runs["now"][0]["levels"]):
        row: dict[str, Any] = {"sessions": level["sessions"]}
        for side, name in ((reference, "reference"), ("now", "now")):
            of_level = [run["levels"][index] for run in runs[side]]
            row[name] = {
                "turns_per_second": round(statistics.mean(r["turns_per_second"] for r in of_level), 2),
                **{f"{p}_cpu_ms": round(statistics.mean(r["cpu_ms_per_turn"][p] for r in of_level), 2)
                   for p in PROCESSES},
                "worker_cpu_ms_runs": [r["cpu_ms_per_turn"]["worker"] for r in of_level],
            }
        row["ratio"] = {key: round(row["now"][key] / row["reference"][key], 3)
                        for key in ("turns_per_second", *(f"{p}_cpu_ms" for p in PROCESSES)) if row["reference"][key]}
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {args.against: [], "now": []}
    with tempfile.TemporaryDirectory(prefix="lanes-against-") as tmp:
        worktree = Path(tmp) / "reference"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), args.against], cwd=_results.REPO,
                       check=True, capture_output=True)
        try:
            for round_ in range(args.rounds):
                for side, checkout in ((args.against, worktree), ("now", _results.REPO)):
                    print(f"round {round_ + 1}: {side}", file=sys.stderr)
                    runs[side].append(scale_run(checkout, args.levels, Path(tmp) / f"{side}-{round_}.json"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=_results.REPO,
                           capture_output=True)
    return {
        "driver": "bench/scale_against.py", "machine": _results.machine(), "sources": _results.sources_digest(),
        "against": args.against, "levels": args.levels, "rounds": args.rounds,
        "by_level": summary(runs, args.against),
    }


def readme_block(result: dict[str, Any]) -> str:
    against = result["against"]
    rows = "\n".join(
        f"| {r['sessions']} | {r['reference']['worker_cpu_ms']} ({', '.join(map(str, r['reference']['worker_cpu_ms_runs']))}) "
        f"| {r['now']['worker_cpu_ms']} ({', '.join(map(str, r['now']['worker_cpu_ms_runs']))}) "
        f"| **{r['ratio']['worker_cpu_ms']:.2f}** | {r['ratio']['temporal_cpu_ms']:.2f} | {r['ratio']['postgres_cpu_ms']:.2f} "
        f"| {r['ratio']['turns_per_second']:.2f} |"
        for r in result["by_level"])
    return f"""## Scale against an earlier revision, in one run (`bench/scale_against.py`)

`.venv/bin/python bench/scale_against.py --against {against} --levels {result['levels']} --rounds {result['rounds']}`:
`bench/scale.py` run in a worktree of `{against}` and in this checkout, alternating (reference first),
each run with its own stack and worker; means over each side's runs, and now / `{against}`.

| sessions | worker CPU ms/turn, `{against}` (runs) | now (runs) | worker CPU × | Temporal CPU × | PostgreSQL CPU × \
| turns/s × |
|---:|---|---|---:|---:|---:|---:|
{rows}

Cannot see: what `bench/scale.py` cannot; the two checkouts' local stacks differ where their
`worker/local/stack.py` do, and that difference is counted as the code's.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="1b6c27d", help="the reference revision")
    parser.add_argument("--levels", default="1,16,64,128")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    result = run(args)
    _results.publish(result, args.out, "scale-against.json", "scale-against", readme_block(result))


if __name__ == "__main__":
    main()
