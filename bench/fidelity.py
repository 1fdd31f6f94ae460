"""Fidelity benchmark: how often the request a policy sends no longer shows what the agent used next.

For every recorded model call of every trajectory file, the names in the recorded next
action that occurred earlier in the session are looked up in the request each policy
sends (definition: :mod:`worker.replay.fidelity` and ``bench/results/README.md``). The
policies and budgets are the replay cost bench's: full, masking-10, lanes and lanes as
sessions ran it before the cost profile at 8,000, 16,000, 32,000 and 64,000. full and
masking-10 do not depend on the budget (they never compact), so they are replayed once
and reported at every budget. Writes ``bench/results/fidelity-<budget>.json`` and the
``fidelity`` block of ``bench/results/README.md``.

    .venv/bin/python bench/fidelity.py [--jobs N] [--data DIR] [--budget B ...] [--stride S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from _results import machine, sources_digest, update_block, write_json
from run_replay_bench import folder_of

from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from worker.replay.fidelity import Fidelity, Run, session_fidelity
from worker.replay.policies import BEFORE_COST_PROFILE, BEFORE_KEY_LINES, BEFORE_PREVIEW_LINES
from worker.replay.simulator import default_jobs, largest_first

BUDGETS = [8_000, 16_000, 32_000, 64_000]
FIXED = ["full", "masking-10"]  # budget-independent
LANES = "lanes"
PREVIOUS = "lanes (before profile)"  # as sessions ran before the cost profile (issue 16)
BEFORE_LINES = "lanes (before key lines)"  # as sessions started before the checkpoint's lines (issue 29)
BEFORE_PREVIEWS = "lanes (before preview lines)"  # as sessions started before previews showed lines (issue 29)
POLICIES = [*FIXED, LANES, BEFORE_PREVIEWS, BEFORE_LINES, PREVIOUS]


def replay_file(path: str, budgets: list[int], stride: int) -> tuple[str, dict[tuple[str, int], Fidelity]]:
    runs = [Run(name, name, budgets[0]) for name in FIXED]
    for budget in budgets:
        runs += [Run(f"{LANES}@{budget}", LANES, budget), Run(f"{PREVIOUS}@{budget}", LANES, budget, BEFORE_COST_PROFILE),
                 Run(f"{BEFORE_LINES}@{budget}", LANES, budget, BEFORE_KEY_LINES),
                 Run(f"{BEFORE_PREVIEWS}@{budget}", LANES, budget, BEFORE_PREVIEW_LINES)]
    results = session_fidelity(load_trajectory(path), runs, stride=stride)
    out: dict[tuple[str, int], Fidelity] = {}
    for budget in budgets:
        for name in POLICIES:
            out[(name, budget)] = results[name if name in FIXED else f"{name}@{budget}"]
    return path, out


DEFINITION = [
    "**Definition.** Step *k* is the request a policy sends before recorded model call *k*; its *action* is "
    "recorded answer *k* (prose and tool-call arguments, JSON strings decoded). The action's *names* are the "
    "distinct tokens of four kinds: paths (a `/` and a letter, or a file name with a common extension), "
    "symbols (identifiers with an inner `_`, a lower-to-upper case change or a dot), numbers of ≥ 3 digits and "
    "quoted strings of 8–200 characters; shorter than 4 characters or an observation address: left out. A name "
    "*counts* at step *k* when it occurs verbatim in an item before call *k* (tool output or message, prose or "
    "call arguments) and not in the system prompt. A counted name is *visible* when it occurs verbatim in "
    "content the request carries (every message's content, tool-call arguments and reasoning: full text, preview "
    "head and tail, placeholders, the memory and the checkpoint's lines), else a *miss*. The checkpoint's index "
    "of names (`Files and symbols the archived items mentioned`) is not content: a bare name tells the model a "
    "file existed, not what was in it, so a name found only there is a miss, counted apart as *index-only* (the "
    "figure before this definition counted it as visible: *before*). A miss is *recallable* when it occurs in the "
    "exact stored text of an item whose `observation://` address appears in that request: one exact "
    "`recall_observation` of an address the model can read would find it (masking keeps no store: never). "
    "miss rate = misses / counted names, summed over all steps of all files; after recall = (misses − "
    "recallable) / counted names.",
]


def row(f: Fidelity) -> dict:
    return f.as_dict()


def spread_by_folder(per_file: dict[str, dict[tuple[str, int], Fidelity]], budget: int, data: str) -> dict:
    """folder (and "all") -> policy -> the distribution of the files' own miss rates: median,
    90th percentile, worst, and the five worst files (a mean over names hides a file that fails)."""
    rates: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for path, results in per_file.items():
        for folder in ("all", folder_of(path, data) or "(other)"):
            for name in POLICIES:
                f = results[(name, budget)]
                if f.named:
                    rates.setdefault(folder, {}).setdefault(name, []).append((f.miss_rate, path))

    def spread(values: list[tuple[float, str]]) -> dict:
        ordered = sorted(values)
        at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))][0]  # noqa: E731
        return {"files": len(ordered), "p50": round(at(0.5), 5), "p90": round(at(0.9), 5),
                "max": round(ordered[-1][0], 5),
                "worst": [{"file": path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1], "miss_rate": round(r, 5)}
                          for r, path in reversed(ordered[-5:])]}
    return {folder: {name: spread(values) for name, values in policies.items()} for folder, policies in sorted(rates.items())}


def readme_block(data: dict) -> str:
    lines = [
        "## Fidelity: what the next action names, visible in the request or not",
        "",
        f"All {data['files']} trajectory files ({data['steps']:,} recorded model calls counted"
        + (f", every {data['stride']}th" if data["stride"] > 1 else "")
        + f") under `{data['data']}`; driver `bench/fidelity.py`, counter `worker/replay/fidelity.py` "
        "(definition first). full and masking-10 never compact: replayed once, the same at every budget.",
        "",
        *DEFINITION,
        "",
        "| budget | policy | names | visible | misses | miss rate | of them index-only | before (index counted) "
        "| recallable misses | miss rate after recall |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in data["budgets"]:
        for name in POLICIES:
            p = data["results"][str(budget)]["all"][name]
            lines.append(f"| {budget:,} | {name} | {p['named']:,} | {p['visible']:,} | {p['missed']:,} | "
                         f"{100 * p['miss_rate']:.2f} % | {p['index_only']:,} | {100 * p['miss_rate_index_counted']:.2f} % "
                         f"| {p['recallable']:,} | {100 * p['unrecovered_rate']:.2f} % |")
    lines += ["", "lanes miss rate per folder, and over the files of each (a file's own miss rate):", "",
              "| budget | folder | names | miss rate | before (index counted) | after recall | files: median | 90th % "
              "| worst |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for budget in data["budgets"]:
        for folder, policies in data["results"][str(budget)]["by_folder"].items():
            p, spread = policies[LANES], data["results"][str(budget)]["per_file"][folder][LANES]
            lines.append(f"| {budget:,} | {folder} | {p['named']:,} | {100 * p['miss_rate']:.2f} % | "
                         f"{100 * p['miss_rate_index_counted']:.2f} % | {100 * p['unrecovered_rate']:.2f} % | "
                         f"{100 * spread['p50']:.2f} % | {100 * spread['p90']:.2f} % | {100 * spread['max']:.2f} % |")
    m = data["machine"]
    lines += ["", f"Run with {data['jobs']} processes on {m['cpus']} CPUs in {data['elapsed_seconds']} s "
                  f"(load average {m['load_average_1m']} at the start)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--data", default=str(DEFAULT_TRAJECTORY_ROOT))
    parser.add_argument("--budget", type=int, action="append", help="default: 8000, 16000, 32000 and 64000")
    parser.add_argument("--stride", type=int, default=1, help="count every S-th step only (all are planned)")
    args = parser.parse_args(argv)
    budgets = sorted(args.budget or BUDGETS)
    files = [str(f) for f, _ in trajectory_files([args.data])]
    load, code = machine(), sources_digest()  # before the run: the tree may change while it runs
    started = time.perf_counter()
    per_file: dict[str, dict[tuple[str, int], Fidelity]] = {}
    order = largest_first(files)
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(replay_file, f, budgets, args.stride) for f in order]
        for done, future in enumerate(as_completed(futures), 1):
            path, result = future.result()
            per_file[path] = result
            print(f"\r{done}/{len(files)} files", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    elapsed = round(time.perf_counter() - started, 1)
    data: dict = {"files": len(files), "budgets": budgets, "stride": args.stride, "data": args.data,
                  "jobs": args.jobs, "elapsed_seconds": elapsed, "machine": load, "code": code}
    results: dict[str, dict] = {}
    for budget in budgets:
        everything = {name: Fidelity() for name in POLICIES}
        folders: dict[str, dict[str, Fidelity]] = {}
        for path in files:
            folder = folders.setdefault(folder_of(path, args.data) or "(other)", {n: Fidelity() for n in POLICIES})
            for name in POLICIES:
                everything[name].merge(per_file[path][(name, budget)])
                folder[name].merge(per_file[path][(name, budget)])
        results[str(budget)] = {"all": {n: row(f) for n, f in everything.items()},
                                "by_folder": {d: {n: row(f) for n, f in p.items()} for d, p in sorted(folders.items())},
                                "per_file": spread_by_folder(per_file, budget, args.data)}
    data["steps"] = results[str(budgets[0])]["all"]["full"]["steps"]  # counted steps
    data["results"] = results
    for budget in budgets:
        write_json(f"fidelity-{budget}.json", {**{k: v for k, v in data.items() if k != "results"},
                                               "budget": budget, **results[str(budget)]})
    update_block("fidelity", readme_block(data))
    print(f"fidelity bench finished in {elapsed} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
