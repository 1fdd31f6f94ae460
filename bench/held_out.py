"""Held-out check of the cost profile: choose on half the recordings, measure on the other half.

The engine's cost profile was picked on all the recordings its figures are reported on. This
driver splits them in two halves (:func:`worker.replay.held_out.halves`), applies the selection
rule to the variants of ``bench/engine_sensitivity.py`` on one half (the cheapest variant whose
fidelity miss rate is no higher than the engine's before the profile), and reports how the pick
does on the other half against the issue's targets: ≤ 0.55× full history, ≤ 0.30× masking-10
and a miss rate no higher than before the profile on the same files. Both directions.
Writes ``bench/results/held-out.json`` and the ``held-out`` block of ``bench/results/README.md``.

    .venv/bin/python bench/held_out.py [--budget 16000] [--jobs N] [--data DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from _results import machine, sources_digest, update_block, write_json
from engine_sensitivity import VARIANTS, options_of

from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from worker.replay.fidelity import Run, session_fidelity
from worker.replay.held_out import FileFigures, Score, halves, score, select
from worker.replay.simulator import default_jobs, largest_first, replay_trajectory

BASELINE = "before the cost profile"
PROFILE = "engine defaults"
TARGET_FULL, TARGET_MASKING = 0.55, 0.30


def measure_file(path: str, budget: int) -> tuple[str, dict]:
    """One recording: the cost of full and masking-10, and every variant's cost and fidelity."""
    traj = load_trajectory(path)
    reference = replay_trajectory(traj, ["full", "masking-10"], budget, path).policies
    runs = [Run(label, "lanes", budget, options_of((label, options), budget)) for label, options in VARIANTS]
    fidelity = session_fidelity(traj, runs)
    variants = {}
    for run in runs:
        lanes = replay_trajectory(traj, ["lanes"], budget, path, run.engine_options).policies["lanes"]
        variants[run.name] = FileFigures(lanes.cost_units, fidelity[run.name].named, fidelity[run.name].missed)
    return path, {"full": reference["full"].cost_units, "masking": reference["masking-10"].cost_units,
                  "variants": variants}


def measure(data: str, budget: int, jobs: int) -> dict[str, dict]:
    files = largest_first(str(f) for f, _ in trajectory_files([data]))
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return dict(pool.map(measure_file, files, [budget] * len(files)))


def check(per_file: dict[str, dict], pick_on: list[str], check_on: list[str]) -> dict:
    """The selection rule on ``pick_on``; the pick, the profile and the baseline on ``check_on``."""
    full = {f: per_file[f]["full"] for f in per_file}
    masking = {f: per_file[f]["masking"] for f in per_file}

    def scores(files: list[str]) -> list[Score]:
        return [score(label, {f: per_file[f]["variants"][label] for f in files}, full, masking, files)
                for label, _ in VARIANTS]

    picked = select(scores(pick_on), BASELINE)
    unseen = {s.variant: s for s in scores(check_on)}
    result, baseline = unseen[picked.variant], unseen[BASELINE]
    return {
        "pick_files": len(pick_on), "check_files": len(check_on),
        "picked": picked.variant, "on_pick_half": vars(picked), "on_check_half": vars(result),
        "baseline_on_check_half": vars(baseline), "profile_on_check_half": vars(unseen[PROFILE]),
        "met": {"cost ≤ 0.55× full": result.cost_vs_full <= TARGET_FULL,
                "cost ≤ 0.30× masking-10": result.cost_vs_masking <= TARGET_MASKING,
                "miss rate ≤ before the profile": result.miss_rate <= baseline.miss_rate},
    }


def readme_block(data: dict) -> str:
    lines = [
        f"## Held-out check of the cost profile (budget {data['budget']:,})",
        "",
        "Driver `bench/held_out.py`: the recordings split in two halves (per folder, alternately by the sha256 of "
        f"the file name: {data['halves'][0]} and {data['halves'][1]} files). On one half the rule picks, among the "
        f"{len(VARIANTS)} variants of `bench/engine_sensitivity.py`, the cheapest whose miss rate is no higher than "
        "the engine's before the profile; the other half, not used for the pick, is measured. Costs are sums over "
        "the half's files (cost units, cached input at its price), as in the replay benchmark.",
        "",
        "| picked on | picked | ×full (pick half) | on the other half: ×full | ×masking-10 | miss rate | "
        "miss rate before the profile | profile ×full / miss | met |",
        "|---|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for name, c in zip(("half A", "half B"), data["checks"], strict=True):
        got, base, prof = c["on_check_half"], c["baseline_on_check_half"], c["profile_on_check_half"]
        met = "yes" if all(c["met"].values()) else "**no**: " + ", ".join(k for k, v in c["met"].items() if not v)
        lines.append(f"| {name} | {c['picked']} | {c['on_pick_half']['cost_vs_full']:.3f} | {got['cost_vs_full']:.3f} "
                     f"| {got['cost_vs_masking']:.3f} | {100 * got['miss_rate']:.2f} % | "
                     f"{100 * base['miss_rate']:.2f} % | {prof['cost_vs_full']:.3f} / {100 * prof['miss_rate']:.2f} % "
                     f"| {met} |")
    m = data["run"]["machine"]
    lines += ["", "The variants themselves were written around the profile after looking at every recording, so "
                  "this checks the pick among them, not the grid. Run with "
                  f"{data['run']['jobs']} processes on {m['cpus']} CPUs in {data['run']['elapsed_seconds']:.0f} s."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=16_000)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--data", default=str(DEFAULT_TRAJECTORY_ROOT))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    per_file = measure(args.data, args.budget, args.jobs)
    first, second = halves(per_file)
    checks = [check(per_file, first, second), check(per_file, second, first)]
    for c in checks:
        print(f"picked {c['picked']!r} on {c['pick_files']} files; on the other {c['check_files']}: "
              f"{c['on_check_half']}, met {c['met']}", file=sys.stderr)
    data = {"budget": args.budget, "halves": [len(first), len(second)], "checks": checks,
            "run": {"elapsed_seconds": round(time.perf_counter() - started, 1), "jobs": args.jobs,
                    "machine": machine(), "code": sources_digest()}}
    write_json("held-out.json", data)
    update_block("held-out", readme_block(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
