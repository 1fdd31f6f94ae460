"""How the lanes figures move with the engine's fallback knobs (information, not tuning).

The replay benchmark uses the engine's defaults. This driver replays the whole trajectory
folder with ``lanes`` under a few alternative ``EngineConfig`` values (the cache-aware
sweep off, compaction target, protected exchange groups) next to ``full`` and
``masking-10``, at each budget, so the engine's owner can see what a default buys or costs
across every file. Nothing here changes the policy.
Writes ``bench/results/engine-sensitivity.json`` and its block of the results README.

    .venv/bin/python bench/engine_sensitivity.py [--budget 16000 32000] [--jobs N]
"""

from __future__ import annotations

import argparse
import sys
import time

from _results import machine, sources_digest, update_block, write_json

from recordings import DEFAULT_TRAJECTORY_ROOT
from worker.replay.simulator import default_jobs, engine_config, replay_paths

VARIANTS: list[tuple[str, dict]] = [
    ("engine defaults", {}),
    ("cache_aware_sweep=False", {"cache_aware_sweep": False}),  # the fallback before the sweep
    ("cache_aware_sweep=False, target_ratio=0.4", {"cache_aware_sweep": False, "target_ratio": 0.4}),
    ("target_ratio=0.5", {"target_ratio": 0.5}),
    ("target_ratio=0.4", {"target_ratio": 0.4}),
    ("target_ratio=0.3", {"target_ratio": 0.3}),
    ("protected_groups=2", {"protected_groups": 2}),
    ("protected_groups=1", {"protected_groups": 1}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, nargs="+", default=[16_000, 32_000])
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--data", default=str(DEFAULT_TRAJECTORY_ROOT))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    runs = [sensitivity(budget, args.data, args.jobs) for budget in args.budget]
    defaults = engine_config(args.budget[0])
    engine_defaults = {"target_ratio": defaults.target_ratio, "protected_groups": defaults.protected_groups,
                       "cache_aware_sweep": defaults.cache_aware_sweep}
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
        "| budget | lanes variant | cost units | lanes/full | lanes/masking-10 | mean request | compactions "
        "| over budget | plan p99 ms | lost |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for r in run["variants"]:
            lanes = r["lanes"]
            lines.append(f"| {run['budget']:,} | {r['variant']} | {lanes['cost_units']:,.0f} | {r['lanes/full']:.3f} | "
                         f"{r['lanes/masking-10']:.3f} | {lanes['input_tokens'] / max(1, lanes['steps']):,.0f} | "
                         f"{lanes['compactions']} | {lanes['over_budget_steps']} | {lanes['plan_ms_p99']:.2f} | "
                         f"{lanes['lost_items']} |")
    update_block("engine-sensitivity", "\n".join(lines))
    return 0


def sensitivity(budget: int, data: str, jobs: int) -> dict:
    """``full``, ``masking-10`` and every lanes variant over the folder at one budget."""
    reference = replay_paths([data], ["full", "masking-10"], budget, jobs=jobs).as_dict()
    full = reference["policies"]["full"]["cost_units"]
    masking = reference["policies"]["masking-10"]["cost_units"]
    rows = []
    for label, options in VARIANTS:
        lanes = replay_paths([data], ["lanes"], budget, jobs=jobs,
                             engine_options=options).as_dict()["policies"]["lanes"]
        rows.append({"variant": label, "engine_options": options, "lanes": lanes,
                     "lanes/full": round(lanes["cost_units"] / full, 4),
                     "lanes/masking-10": round(lanes["cost_units"] / masking, 4)})
        print(f"{budget:>6} {label:>42}: lanes/full {rows[-1]['lanes/full']:.3f}, lanes/masking-10 "
              f"{rows[-1]['lanes/masking-10']:.3f}, over budget {lanes['over_budget_steps']}", file=sys.stderr)
    return {"budget": budget, "files": reference["files"], "steps": reference["steps"],
            "reference": reference["policies"], "variants": rows}


if __name__ == "__main__":
    sys.exit(main())
