"""How the lanes figures move with the engine's fallback knobs (information, not tuning).

The replay benchmark uses the engine as a new session runs it (its defaults and the cost
profile). This driver replays the whole trajectory folder with ``lanes`` under alternative
``EngineConfig`` values (the engine before the cost profile, and each knob of the profile
back or further) next to ``full`` and ``masking-10``, at each budget, so the
engine's owner can see what a default buys or costs across every file, in cost and in
fidelity (the miss rate of ``bench/fidelity.py``, every variant replayed in lockstep per
file). Nothing here changes the policy.
Writes ``bench/results/engine-sensitivity.json`` and its block of the results README.

    .venv/bin/python bench/engine_sensitivity.py [--budget 16000 32000] [--jobs N]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from _results import machine, sources_digest, update_block, write_json

from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from worker.replay.fidelity import Fidelity, Run, session_fidelity
from worker.replay.policies import BEFORE_COST_PROFILE, BEFORE_KEY_LINES, BEFORE_PREVIEW_LINES
from worker.replay.simulator import default_jobs, engine_config, largest_first, replay_paths
from workflows.context import CHECKPOINT_PROFILE, FALLBACK_PROFILE, NAMES_INDEX_PROFILE

# (label, options); options may depend on the budget (a callable of it)
Variant = tuple[str, dict | Callable[[int], dict]]
VARIANTS: list[Variant] = [
    ("engine defaults", {}),
    # as sessions ran before the cost profile (issue 16), and its two halves
    ("before the cost profile", BEFORE_COST_PROFILE),
    ("checkpoint profile only (fallback as before)", {k: BEFORE_COST_PROFILE[k] for k in FALLBACK_PROFILE}),
    ("fallback profile only (checkpoint as before)", {k: BEFORE_COST_PROFILE[k] for k in CHECKPOINT_PROFILE}),
    # as sessions started between issue 16 and issue 29 ran: the checkpoint lists 192 names
    ("with the names index (before issue 29)", NAMES_INDEX_PROFILE),
    # as sessions started before the checkpoint's key lines ran (issue 29), and each half of them
    ("without key lines (before patch checkpoint-lines)", BEFORE_KEY_LINES),
    # as sessions started before previews showed lines of their middle, and each half of that patch
    ("without preview lines (before patch preview-lines)", BEFORE_PREVIEW_LINES),
    ("preview lines, pool of 96 archived lines", {"checkpoint_pool_lines": 96}),
    ("pool of 192 archived lines, head-and-tail previews", {"preview_lines": False}),
    ("key lines, references with digests", {"checkpoint_brief_references": False}),
    ("brief references, no key lines", {"checkpoint_lines": 0}),
    ("checkpoint_lines=24", {"checkpoint_lines": 24}),
    # one knob of the profile back at its previous value
    ("compact_at_ratio=1", {"compact_at_ratio": 1.0}),
    ("compact_at_ratio=0.8", {"compact_at_ratio": 0.8}),
    ("compact_at_ratio=0.7", {"compact_at_ratio": 0.7}),
    ("target_ratio=0.6", {"target_ratio": 0.6}),
    ("protected_groups=4", {"protected_groups": 4}),
    ("protected_groups=1", {"protected_groups": 1}),
    ("preview_share=0.5", {"preview_share": 0.5}),
    ("checkpoint_tokens=1200", {"checkpoint_tokens": 1200}),
    ("cache_aware_sweep=False", {"cache_aware_sweep": False}),
]


def options_of(variant: Variant, budget: int) -> dict:
    options = variant[1]
    return options(budget) if callable(options) else options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, nargs="+", default=[16_000, 32_000])
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--data", default=str(DEFAULT_TRAJECTORY_ROOT))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    runs = [sensitivity(budget, args.data, args.jobs) for budget in args.budget]
    defaults = engine_config(args.budget[0])
    engine_defaults = {name: getattr(defaults, name) for name in (*BEFORE_COST_PROFILE, "cache_aware_sweep")}
    data = {
        "engine_defaults": engine_defaults, "runs": runs,
        "run": {"elapsed_seconds": round(time.perf_counter() - started, 1), "jobs": args.jobs, "machine": machine(),
                "code": sources_digest()},
    }
    write_json("engine-sensitivity.json", data)
    budgets = " and ".join(f"{b:,}" for b in args.budget)
    lines = [
        f"## Sensitivity of lanes to the fallback knobs (budgets {budgets}; information, not applied)",
        "",
        "Driver `bench/engine_sensitivity.py`: the same whole-folder replay with one `EngineConfig` field changed "
        f"(engine defaults: {', '.join(f'{k} {v}' for k, v in engine_defaults.items())}).",
        "",
        "| budget | lanes variant | cost units | lanes/full | lanes/masking-10 | miss rate | after recall "
        "| mean request | compactions | over budget | plan p99 ms | lost |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for r in run["variants"]:
            lanes, fidelity = r["lanes"], r["fidelity"]
            lines.append(f"| {run['budget']:,} | {r['variant']} | {lanes['cost_units']:,.0f} | {r['lanes/full']:.3f} | "
                         f"{r['lanes/masking-10']:.3f} | {100 * fidelity['miss_rate']:.2f} % | "
                         f"{100 * fidelity['unrecovered_rate']:.2f} % | "
                         f"{lanes['input_tokens'] / max(1, lanes['steps']):,.0f} | "
                         f"{lanes['compactions']} | {lanes['over_budget_steps']} | {lanes['plan_ms_p99']:.2f} | "
                         f"{lanes['lost_items']} |")
    update_block("engine-sensitivity", "\n".join(lines))
    return 0


def sensitivity(budget: int, data: str, jobs: int) -> dict:
    """``full``, ``masking-10`` and every lanes variant over the folder at one budget."""
    reference = replay_paths([data], ["full", "masking-10"], budget, jobs=jobs).as_dict()
    full = reference["policies"]["full"]["cost_units"]
    masking = reference["policies"]["masking-10"]["cost_units"]
    fidelity = variants_fidelity(budget, data, jobs)
    rows = []
    for variant in VARIANTS:
        label, options = variant[0], options_of(variant, budget)
        lanes = replay_paths([data], ["lanes"], budget, jobs=jobs,
                             engine_options=options).as_dict()["policies"]["lanes"]
        rows.append({"variant": label, "engine_options": options, "lanes": lanes,
                     "lanes/full": round(lanes["cost_units"] / full, 4),
                     "lanes/masking-10": round(lanes["cost_units"] / masking, 4),
                     "fidelity": fidelity[label].as_dict()})
        print(f"{budget:>6} {label:>42}: lanes/full {rows[-1]['lanes/full']:.3f}, lanes/masking-10 "
              f"{rows[-1]['lanes/masking-10']:.3f}, miss rate {100 * fidelity[label].miss_rate:.2f} %, "
              f"over budget {lanes['over_budget_steps']}", file=sys.stderr)
    return {"budget": budget, "files": reference["files"], "steps": reference["steps"],
            "reference": reference["policies"], "variants": rows}


def _file_fidelity(path: str, budget: int) -> dict[str, Fidelity]:
    runs = [Run(label, "lanes", budget, options_of((label, options), budget)) for label, options in VARIANTS]
    return session_fidelity(load_trajectory(path), runs)


def variants_fidelity(budget: int, data: str, jobs: int) -> dict[str, Fidelity]:
    """The fidelity of every variant over the folder (all replayed in lockstep per file, so the
    names of a step are extracted once)."""
    files = largest_first(str(f) for f, _ in trajectory_files([data]))
    totals = {label: Fidelity() for label, _ in VARIANTS}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for result in pool.map(_file_fidelity, files, [budget] * len(files)):
            for label, counts in result.items():
                totals[label].merge(counts)
    return totals


if __name__ == "__main__":
    sys.exit(main())
