"""How many workers, cores and activity slots a deployment needs: a sizing table computed
from the measured per-turn costs (``bench/results/scale.json``) and checked against the
multi-worker run (``bench/results/scale-workers.json``).

    .venv/bin/python bench/sizing.py [--sessions 10000] [--model-seconds 2 10 30]

The model: a session whose model takes *T* seconds per answer makes at most 1/*T* turns per
second (its tools and the machinery add to *T*; here they are left out, so the table errs
towards more capacity). *S* sessions then make *R* = *S*/*T* turns per second, and need

- worker CPU: *R* × (worker CPU seconds per turn) cores, at the utilisation asked for; one
  worker process uses at most about one core (Python: one interpreter lock), so at least that
  many worker processes;
- activity slots: every waiting model call holds one, so *S* slots in all
  (``LANES_MAX_CONCURRENT_ACTIVITIES`` per process): at least *S* / slots processes;
- workflow cache: a session whose workflow is not cached is replayed from history on its next
  turn (CPU), so *S* / ``LANES_MAX_CACHED_WORKFLOWS`` processes at least;
- Temporal and PostgreSQL CPU: *R* × their CPU seconds per turn. Temporal's figure is its dev
  server's (SQLite, one process): a cluster's per-turn cost differs and must be measured there.

Per-turn costs: the largest of the measured levels (whichever level that is). Writes the ``sizing``
block of ``bench/results/README.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from _results import RESULTS, update_block
from scale import against_one_worker

UTILISATION = 0.7  # of a core a process is planned at: headroom for bursts and replays
MIB_PER_CACHED_SESSION = 0.9  # deploy/README.md §5: 0.5-0.9 MiB per cached SessionWorkflow


def per_turn(scale: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per turn of each process: the largest over the measured levels."""
    names = scale["levels"][0]["cpu_ms_per_turn"]
    return {name: max(level["cpu_ms_per_turn"][name] for level in scale["levels"]) / 1000 for name in names}


def plan(sessions: int, model_seconds: float, cpu: dict[str, float], slots: int, cache: int) -> dict[str, Any]:
    rate = sessions / model_seconds
    worker_cores = rate * cpu["worker"] / UTILISATION
    processes = max(math.ceil(worker_cores), math.ceil(sessions / slots), math.ceil(sessions / cache))
    return {
        "sessions": sessions, "model_seconds": model_seconds, "turns_per_second": round(rate, 1),
        "worker_cores": round(worker_cores, 1), "worker_processes": processes,
        "sessions_per_process": math.ceil(sessions / processes),
        "bound_by": "CPU" if processes == math.ceil(worker_cores) else "activity slots",
        "worker_memory_gib": round(sessions * MIB_PER_CACHED_SESSION / 1024, 1),
        "temporal_cores": round(rate * cpu["temporal"] / UTILISATION, 1),
        "postgres_cores": round(rate * cpu["postgres"] / UTILISATION, 1),
    }


HEADER = ("| sessions | model time per turn | turns/s | worker cores | worker processes (bound by) | sessions per process "
          "| worker memory (cached sessions) | Temporal cores (dev-server cost) | PostgreSQL cores |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def block(rows: list[dict[str, Any]], cpu: dict[str, float], slots: int, workers: dict[str, Any] | None) -> str:
    table = "\n".join(
        f"| {r['sessions']:,} | {r['model_seconds']:g} s | {r['turns_per_second']:,} | {r['worker_cores']:,} | "
        f"{r['worker_processes']:,} ({r['bound_by']}) | {r['sessions_per_process']:,} | {r['worker_memory_gib']} GiB | "
        f"{r['temporal_cores']:,} | {r['postgres_cores']:,} |" for r in rows)
    one_core = UTILISATION / cpu["worker"]
    checked = ""
    if workers:
        ratios = ", ".join(f"{r['workers']} workers {ratio:.2f}x"
                           for r, ratio in against_one_worker(workers["levels"]) if r["workers"] > 1)
        checked = (f"\n\nChecked by the multi-worker run (block `scale-workers`, model {workers['model_seconds']:g} s per "
                   f"answer, {', '.join(f'{k}={v}' for k, v in workers['worker_env'].items())}): throughput against one "
                   f"worker: {ratios}.")
    return f"""## Sizing: workers for many sessions (`bench/sizing.py`)

Computed from the per-turn CPU that `bench/scale.py` measured (the largest of its levels: worker
{1000 * cpu['worker']:.1f} ms, Temporal dev server {1000 * cpu['temporal']:.1f} ms, PostgreSQL
{1000 * cpu['postgres']:.1f} ms per turn), a worker process planned at {UTILISATION:.0%} of one core,
{slots} activity slots per process (`LANES_MAX_CONCURRENT_ACTIVITIES`): one core runs about
{one_core:.0f} turns/s, so about {one_core:.0f} × *T* sessions whose model answers in *T* seconds.

{HEADER}
{table}

Adding workers: every worker polls the one task queue; a session's turns go to whichever
worker has it cached (sticky), or any other after a replay. Nothing is shared between workers but
Temporal and PostgreSQL, so workers add up until those do not.{checked}

Cannot see: a Temporal cluster's own per-turn cost (the dev server's is used), tools that do
work (their CPU is the workspace's, not the worker's), bursts (every session answering at once),
and a provider's rate limits, which cap turns/s before any of this."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--model-seconds", type=float, nargs="+", default=[2.0, 10.0, 30.0])
    parser.add_argument("--slots", type=int, default=None, help="activity slots per process (default: the setting's)")
    args = parser.parse_args()
    from worker.settings import Settings

    fields = Settings.model_fields
    slots = args.slots or fields["max_concurrent_activities"].default
    cache = fields["max_cached_workflows"].default
    cpu = per_turn(json.loads((RESULTS / "scale.json").read_text()))
    workers_path = RESULTS / "scale-workers.json"
    workers = json.loads(workers_path.read_text()) if workers_path.exists() else None
    rows = [plan(s, t, cpu, slots, cache) for s in args.sessions for t in args.model_seconds]
    text = block(rows, cpu, slots, workers)
    update_block("sizing", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
