"""Throughput as hosted sessions pile up: 1, 16, 64 and 128 sessions at once on one worker.

    .venv/bin/python bench/scale.py [--levels 1,16,64,128] [--budget 16000]
    .venv/bin/python bench/scale.py --workers 1,2,3 --levels 96 --model-seconds 1 \
        --worker-env LANES_MAX_CONCURRENT_ACTIVITIES=16     # does throughput add up across workers?

Starts a throwaway local stack (Temporal dev server, PostgreSQL), one worker in a process of its
own (``python -m worker.worker``, as deployed, default settings) and one replay model server
(its own process, answering at once, as a provider that costs nothing). Each level starts that
many hosted sessions at once, each replaying a different recorded mini-swe-agent session (every
recording used holds 8 to 60 model calls, so a level is over in minutes), and waits until every session
has made its last model call. Per level:

- throughput: model calls (turns) per second, from the level's first call to its last;
- per-turn wall time, p50 and p99: the gap between two consecutive model calls of one session
  as the model server received them (the model call, the tool and every durable step between);
- CPU per turn of each process: the worker, Temporal's server, PostgreSQL (all its
  processes), from ``/proc`` before and after the level, divided by the level's turns;
- history per turn: events and workflow tasks, over every run of every session; workflow
  task timeouts and failed tasks.

Writes ``bench/results/scale.json`` and the ``scale`` block of ``bench/results/README.md``.

``--workers 1,2,3`` runs the levels once per worker count, that many worker processes on one
task queue (CPU per turn: all of them), and writes ``scale-workers.json`` and its block
instead; ``--model-seconds S`` makes the replay model take S seconds per answer (a provider's
latency: sessions then wait on the model, each call holding one activity slot of a worker);
``--worker-env KEY=VALUE`` sets a worker setting (LANES_MAX_CONCURRENT_ACTIVITIES, ...).

What it cannot see: a real provider's latency (the replay model answers at once, so the
machinery is all a turn waits for, and more sessions queue on it than a real model would
let them), tools that do work (recorded outputs are looked up), and more than one host: the
worker, Temporal and PostgreSQL share these cores.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _results import machine, sources_digest, update_block, write_json
from durable_compare import model_server
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from worker import sessions
from worker.local.stack import Stack, kill_process
from worker.replay.simulator import percentile
from worker.settings import Settings
from worker.worker import connect

TICKS = os.sysconf("SC_CLK_TCK")
MIN_TURNS, MAX_TURNS = 8, 60


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def processes(stack: Stack, worker_pids: list[int]) -> dict[str, list[int]]:
    """The pids of each process the turns run through (PostgreSQL: its server and every process
    it started, backends included)."""
    found: dict[str, list[int]] = {"worker": list(worker_pids), "temporal": [], "postgres": []}
    data, parents = str(stack.data_dir), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(status.split("PPid:", 1)[1].split()[0])
        if data in cmdline and "start-dev" in cmdline:
            found["temporal"].append(int(entry.name))
        elif data in cmdline and "postgres" in cmdline.split(" ")[0]:
            found["postgres"].append(int(entry.name))
    servers = set(found["postgres"])
    found["postgres"] += [pid for pid, parent in parents.items() if parent in servers]
    return found


def pick(root: str, count: int) -> list[str]:
    """``count`` recordings of MIN_TURNS to MAX_TURNS model calls, spread over the folders."""
    chosen, ids = [], set()
    for path, _ in trajectory_files([root]):
        if "mini-swe-agent" not in str(path):  # the claude-code folder holds four recordings
            continue
        trajectory = load_trajectory(str(path))
        if MIN_TURNS <= len(trajectory.turns) <= MAX_TURNS and trajectory.id not in ids:  # one session per id
            chosen.append(str(path))
            ids.add(trajectory.id)
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} recordings of {MIN_TURNS}-{MAX_TURNS} calls under {root}")
    return chosen[:: max(1, len(chosen) // count)][:count]


async def worker_ready(log: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while "worker ready" not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start: {log}")
        await asyncio.sleep(0.2)


async def run_level(client: Client, queue: str, root_url: str, files: list[str], budget: int,
                    pids: dict[str, list[int]]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=root_url, timeout=60) as http:
        await http.delete("/admin/requests")
        before = {name: cpu_seconds(p) for name, p in pids.items()}
        started = [(sessions.replay_session_config(
            f"scale-{uuid.uuid4().hex[:8]}", trajectory, path, f"{root_url}/v1", budget_tokens=budget,
            max_turns_per_task=len(trajectory.turns) + 10), trajectory)
            for path, trajectory in ((path, load_trajectory(path)) for path in files)]
        handles = await asyncio.gather(*[sessions.start_session(client, config, queue) for config, _ in started])
        await asyncio.gather(*[sessions.submit(h, t.task) for h, (_, t) in zip(handles, started, strict=True)])
        ids = [(config.session_id, t.id, len(t.turns)) for config, t in started]
        # the model server's log (it keeps the last 200 requests): read every half second, so
        # that no request is missed; a session is done once its last recorded call arrived (a
        # closing call may follow it: the log is read once more at the end)
        seen: dict[int, dict[str, Any]] = {}
        last_turn = {tid: turns for _, tid, turns in ids}
        done: set[str] = set()
        quiet_since = time.monotonic()
        while len(done) < len(ids):
            if time.monotonic() - quiet_since > 120:
                missing = sorted(set(last_turn) - done)
                raise SystemExit(f"level of {len(ids)} sessions: no model call for 2 minutes; not done: {missing[:5]}")
            for request in (await http.get("/admin/requests", params={"bodies": "false"})).json()["requests"]:
                if request["seq"] not in seen:
                    quiet_since = time.monotonic()
                seen[request["seq"]] = request
                if request.get("turn") is not None and int(request["turn"]) >= last_turn.get(request["trajectory"], 1e9) - 1:
                    done.add(request["trajectory"])
            await asyncio.sleep(0.5)
        await asyncio.sleep(2)
        seen.update({r["seq"]: r for r in (await http.get("/admin/requests", params={"bodies": "false"})).json()["requests"]})
        after = {name: cpu_seconds(p) for name, p in pids.items()}
    by_session: dict[str, dict[int, float]] = {}
    for request in seen.values():
        if request.get("turn") is not None:
            by_session.setdefault(request["trajectory"], {}).setdefault(int(request["turn"]), request["at"])
    gaps = [(b - a) * 1000 for calls in by_session.values()
            for a, b in itertools.pairwise(calls[t] for t in sorted(calls))]
    times = [at for calls in by_session.values() for at in calls.values()]
    turns = sum(len(calls) for calls in by_session.values())
    seconds = max(times) - min(times)
    history = await histories(client, [sid for sid, _, _ in ids])
    return {
        "sessions": len(ids), "turns": turns, "seconds": round(seconds, 2),
        "turns_per_second": round(turns / seconds, 2) if seconds else None,
        "turn_ms_p50": round(statistics.median(gaps), 1),
        "turn_ms_p99": round(percentile(gaps, 99), 1),
        "cpu_ms_per_turn": {name: round(1000 * (after[name] - before[name]) / turns, 1) for name in pids},
        "events_per_turn": round(history["events"] / turns, 2),
        "workflow_tasks_per_turn": round(history["workflow_tasks"] / turns, 2),
        "workflow_task_timeouts": history["timeouts"], "workflow_task_failures": history["failures"],
    }


async def histories(client: Client, session_ids: list[str]) -> dict[str, int]:
    totals = {"events": 0, "workflow_tasks": 0, "timeouts": 0, "failures": 0}
    for sid in session_ids:
        async for info in client.list_workflows(f'WorkflowId = "{sid}"'):
            async for event in client.get_workflow_handle(sid, run_id=info.run_id).fetch_history_events():
                totals["events"] += 1
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                    totals["workflow_tasks"] += 1
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                    totals["timeouts"] += 1
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    totals["failures"] += 1
    return totals


async def start_workers(stack: Stack, count: int, env: dict[str, str]) -> tuple[str, list[Any]]:
    """``count`` worker processes polling one new task queue, once each is ready."""
    queue = f"scale-{uuid.uuid4().hex[:6]}"
    names = [f"worker-{queue}-{n}" for n in range(count)]
    procs = [stack.spawn(name, [sys.executable, "-m", "worker.worker"], {**env, "LANES_TASK_QUEUE": queue})
             for name in names]
    for name in names:
        await worker_ready(stack.data_dir / "logs" / f"{name}.log")
    return queue, procs


async def run(args: argparse.Namespace, stack: Stack) -> dict[str, Any]:
    levels = [int(n) for n in args.levels.split(",")]
    counts = [int(n) for n in args.workers.split(",")]
    env = dict(pair.split("=", 1) for pair in args.worker_env)
    files = pick(args.root, max(levels))
    client = await connect(Settings(temporal_address=stack.temporal_address))
    results = []
    with model_server(files, "process") as root_url:
        if args.model_seconds:  # every answer held that long: the replay server's "timeout" fault
            httpx.post(f"{root_url}/admin/faults", json={"mode": "timeout", "count": -1,
                                                         "delay_seconds": args.model_seconds}).raise_for_status()
        for count in counts:
            queue, procs = await start_workers(stack, count, env)
            pids = [proc.pid for proc in procs]
            warm = await run_level(client, queue, root_url, files[:2], args.budget, processes(stack, pids))
            print(f"warm-up: {warm['turns']} turns", file=sys.stderr)
            for level in levels:
                result = await run_level(client, queue, root_url, files[:level], args.budget, processes(stack, pids))
                result["workers"] = count
                result["load_average_1m"] = machine()["load_average_1m"]
                results.append(result)
                print(f"{count} worker(s), {level} sessions: {result['turns_per_second']} turns/s, p50 "
                      f"{result['turn_ms_p50']} ms, cpu/turn {result['cpu_ms_per_turn']}", file=sys.stderr)
            for proc in procs:
                kill_process(proc)
    best = max(r["turns_per_second"] or 0 for r in results)
    for r in results:
        r["throughput_of_best"] = round((r["turns_per_second"] or 0) / best, 3)
    return {"driver": "bench/scale.py", "budget": args.budget, "levels": results, "machine": machine(),
            "model_seconds": args.model_seconds, "worker_env": env,
            "sources": sources_digest(), "recordings": [Path(p).name for p in files]}


HEADER = ("| sessions | turns | turns/s | of the best | turn ms p50 / p99 | worker CPU ms/turn | Temporal CPU ms/turn "
          "| PostgreSQL CPU ms/turn | history events/turn | workflow tasks/turn | task timeouts |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def readme_block(result: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {r['sessions']} | {r['turns']:,} | {r['turns_per_second']} | {r['throughput_of_best']:.2f} | "
        f"{r['turn_ms_p50']} / {r['turn_ms_p99']} | {r['cpu_ms_per_turn']['worker']} | "
        f"{r['cpu_ms_per_turn']['temporal']} | {r['cpu_ms_per_turn']['postgres']} | {r['events_per_turn']} | "
        f"{r['workflow_tasks_per_turn']} | {r['workflow_task_timeouts']} |" for r in result["levels"])
    m = result["machine"]
    return f"""## Scale: hosted sessions at once on one worker (`bench/scale.py`)

`.venv/bin/python bench/scale.py`: 1, 16, 64 and 128 hosted sessions started at once, each
replaying a different recorded session of 8-60 model calls at a {result['budget']:,}-token budget,
against a replay model that answers at once; one worker process with default settings, Temporal's
dev server and PostgreSQL on the same {m['cpus']} CPUs. Turn time: the gap between two model calls
of one session. CPU per turn: each process's CPU time over the level divided by its turns.

{HEADER}
{rows}

Cannot see: a real model's latency (with it, sessions wait on the model, not on each other),
tools that do work, several hosts."""


WORKERS_HEADER = ("| workers | sessions | turns | turns/s | of 1 worker | turn ms p50 / p99 | worker CPU ms/turn "
                  "| Temporal CPU ms/turn | PostgreSQL CPU ms/turn | task timeouts |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def against_one_worker(levels: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each level of a ``--workers`` run with its throughput over one worker's at as many sessions."""
    one = {r["sessions"]: r["turns_per_second"] or 0 for r in levels if r["workers"] == 1}
    return [(r, (r["turns_per_second"] or 0) / one[r["sessions"]]) for r in levels if one.get(r["sessions"])]


def workers_block(result: dict[str, Any]) -> str:
    levels = result["levels"]
    rows = "\n".join(
        f"| {r['workers']} | {r['sessions']} | {r['turns']:,} | {r['turns_per_second']} | "
        f"{ratio:.2f}x | {r['turn_ms_p50']} / {r['turn_ms_p99']} | "
        f"{r['cpu_ms_per_turn']['worker']} | {r['cpu_ms_per_turn']['temporal']} | {r['cpu_ms_per_turn']['postgres']} | "
        f"{r['workflow_task_timeouts']} |" for r, ratio in against_one_worker(levels))
    env = ", ".join(f"`{k}={v}`" for k, v in result["worker_env"].items()) or "default settings"
    m = result["machine"]
    command = (f"bench/scale.py --workers {','.join(sorted({str(r['workers']) for r in levels}))} --levels "
               f"{','.join(sorted({str(r['sessions']) for r in levels}, key=int))} "
               f"--model-seconds {result['model_seconds']:g}")
    return f"""## Scale across workers: does throughput add up? (`bench/scale.py --workers`)

`.venv/bin/python {command}` with {env}: the same hosted sessions (recorded sessions of 8-60
model calls, {result['budget']:,}-token budget) run by 1, 2, ... worker processes on one task queue,
against a replay model that takes {result["model_seconds"]:g} s per answer (a provider's latency: each
model call holds one activity slot of a worker for that long). Temporal's dev server and PostgreSQL
share the same {m['cpus']} CPUs. CPU per turn: every worker process together.

{WORKERS_HEADER}
{rows}

Cannot see: several hosts (the workers share these cores with Temporal and PostgreSQL, so only a
run whose turns wait on the model, not on CPU, can show workers adding up here), a real
provider's rate limits."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,16,64,128")
    parser.add_argument("--budget", type=int, default=16_000)
    parser.add_argument("--root", default=str(DEFAULT_TRAJECTORY_ROOT))
    parser.add_argument("--workers", default="1", help="worker counts, comma-separated (each runs every level)")
    parser.add_argument("--model-seconds", type=float, default=0.0, help="the replay model's time per answer")
    parser.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE", help="a worker setting")
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanes-scale-") as tmp, Stack(Path(tmp)) as stack:
        result = asyncio.run(run(args, stack))
    workers = args.workers != "1"
    block = workers_block(result) if workers else readme_block(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    elif workers:
        write_json("scale-workers.json", result)
        update_block("scale-workers", block)
    else:
        write_json("scale.json", result)
        update_block("scale", block)
    print(block)


if __name__ == "__main__":
    main()
