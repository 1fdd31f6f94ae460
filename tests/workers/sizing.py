"""Sizing figures for deploy/README.md §5, measured on the local stack.

    .venv/bin/python -m tests.workers.sizing [--phase storage|throughput|all] [--json OUT]
                                             [--trajectories PATH ...] [--store-concurrency N]

Starts its own stack in a temporary directory (Temporal dev server, embedded PostgreSQL
or ``DATABASE_URL``), the replay model and one ``python -m worker.worker`` process.

- storage: replays every trajectory (default: the whole recorded folder) through the
  worker with the default engine settings, ``--store-concurrency`` sessions at a time;
  PostgreSQL growth = ``pg_total_relation_size`` of each table (heap + TOAST + indexes)
  after - before, per model turn and per tool call; Temporal history = events and
  protobuf bytes of every run of every session, per turn.
- throughput: a fresh worker runs 1, 4 and 16 concurrent replays of the 53-step
  trajectory (the replay model answers at once, so the worker is CPU-bound): turns per
  second, worker CPU seconds per turn, workflow-task schedule-to-start latency (p50/p95),
  and the worker's RSS growth per cached (open) session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, load_trajectory, trajectory_files
from tests.integration.support import REPO
from tests.recordings import LONG_TRAJECTORY
from tests.workers.support import replay_config
from worker import sessions
from worker.local.stack import Stack, free_port, kill_process
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import connect

TABLES = ("sessions", "items", "events", "request_plans", "checkpoints", "observations")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- process and database probes ---------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def table_sizes(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        sizes = {t: await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", t) for t in TABLES}
        sizes["database"] = await conn.fetchval("SELECT pg_database_size(current_database())")
        return sizes
    finally:
        await conn.close()


async def tool_calls_stored(dsn: str, session_id: str) -> tuple[int, int]:
    """(observations, characters archived) of a session."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT count(*) AS n, coalesce(sum(size_chars), 0) AS chars"
                                  " FROM observations WHERE session_id = $1", session_id)
        return row["n"], row["chars"]
    finally:
        await conn.close()


async def history_of_all_runs(client: Client, workflow_id: str, first_run_id: str) -> list:
    """The events of every run of a workflow (its continue-as-new chain), oldest first."""
    events: list = []
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events.extend(history.events)
        last = history.events[-1]
        run_id = (last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                  if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW else "")
    return events


def wft_latencies(events) -> list[float]:
    """Workflow-task schedule-to-start latencies (seconds) of one history."""
    scheduled: dict[int, float] = {}
    out = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled[e.event_id] = e.event_time.ToMicroseconds() / 1e6
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            at = scheduled.get(e.workflow_task_started_event_attributes.scheduled_event_id)
            if at is not None:
                out.append(e.event_time.ToMicroseconds() / 1e6 - at)
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# --- sessions ------------------------------------------------------------------------------

async def replay_one(client: Client, queue: str, trajectory: Trajectory, path: Path, server: ReplayModelServer,
                     *, close: bool = True) -> tuple[WorkflowHandle, str, int]:
    """Run one replayed session to the end of its task; (handle, first run id, model turns)."""
    started = await sessions.start_session(
        client, replay_config(sessions.new_session_id("size"), trajectory, path, server), queue)
    task_id = await sessions.submit(started, trajectory.task)
    handle = client.get_workflow_handle(started.id)
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id, poll=1.0), timeout=3600)
    task = next(t for t in status.tasks if t.task_id == task_id)
    if task.state != "completed":
        raise RuntimeError(f"{trajectory.id}: task {task.state}: {task.error}")
    if close:
        await handle.signal("close")
        await handle.result()
    return handle, started.first_execution_run_id or started.run_id or "", status.turns


class Bench:
    def __init__(self, stack: Stack, data_dir: Path) -> None:
        self.stack = stack
        self.data_dir = data_dir
        self.queue = f"lanes-sizing-{uuid.uuid4().hex[:8]}"
        self.worker: subprocess.Popen | None = None
        self.n = 0

    def spawn_worker(self):
        if self.worker is not None:
            kill_process(self.worker)
        self.n += 1
        self.worker = self.stack.spawn(f"worker-{self.n}", [sys.executable, "-m", "worker.worker"], env={
            "LANES_TASK_QUEUE": self.queue, "PYTHONPATH": str(REPO), "LANES_LOG_LEVEL": "WARNING"}, cwd=REPO)
        log_path = self.data_dir / "logs" / f"worker-{self.n}.log"
        deadline = time.monotonic() + 60
        worker = self.worker
        while f"worker ready pid={worker.pid}" not in log_path.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.1)
        return self.worker


async def storage_phase(bench: Bench, client: Client, dsn: str, paths: list[Path], concurrency: int) -> dict:
    trajectories = [(p, load_trajectory(p)) for p in paths]
    trajectories = [(p, t) for p, t in trajectories if t.turns]
    server = ReplayModelServer([t for _, t in trajectories]).start()
    bench.spawn_worker()
    try:
        before = await table_sizes(dsn)
        limit = asyncio.Semaphore(concurrency)
        per_session = []
        started = time.monotonic()

        async def one(path: Path, trajectory: Trajectory) -> None:
            async with limit:
                handle, first_run, turns = await replay_one(client, bench.queue, trajectory, path, server)
                events = await history_of_all_runs(client, handle.id, first_run)
                calls, chars = await tool_calls_stored(dsn, handle.id)
                runs = 1 + sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW for e in events)
                per_session.append({"trajectory": trajectory.id, "turns": turns, "tool_calls": calls,
                                    "tool_output_chars": chars, "history_events": len(events),
                                    "history_bytes": sum(e.ByteSize() for e in events), "runs": runs})
                if len(per_session) % 10 == 0:
                    log(f"storage: {len(per_session)}/{len(trajectories)} sessions, "
                        f"{sum(s['turns'] for s in per_session)} turns, {time.monotonic() - started:.0f}s")

        await asyncio.gather(*(one(p, t) for p, t in trajectories))
        after = await table_sizes(dsn)
    finally:
        server.stop()
    turns = sum(s["turns"] for s in per_session)
    calls = sum(s["tool_calls"] for s in per_session)
    growth = {k: after[k] - before[k] for k in after}
    per_turn_bytes = [s["history_bytes"] / s["turns"] for s in per_session]
    per_turn_events = [s["history_events"] / s["turns"] for s in per_session]
    engine_tables = sum(growth[t] for t in ("sessions", "items", "events", "request_plans", "checkpoints"))
    return {
        "sessions": len(per_session), "turns": turns, "tool_calls": calls,
        "tool_output_chars": sum(s["tool_output_chars"] for s in per_session),
        "seconds": round(time.monotonic() - started, 1), "concurrency": concurrency,
        "growth_bytes": growth,
        "pg_bytes_per_turn_items_events_plans": round(engine_tables / turns),
        "pg_bytes_per_tool_call_observations": round(growth["observations"] / calls) if calls else None,
        "pg_bytes_per_turn_all_tables": round(sum(growth[t] for t in TABLES) / turns),
        "pg_database_bytes_per_turn": round(growth["database"] / turns),
        "history_events_per_turn": round(sum(s["history_events"] for s in per_session) / turns, 2),
        "history_bytes_per_turn": round(sum(s["history_bytes"] for s in per_session) / turns),
        "history_bytes_per_turn_p50_p95_max": [round(pct(per_turn_bytes, q)) for q in (0.5, 0.95)]
        + [round(max(per_turn_bytes))],
        "history_events_per_turn_p50_p95_max": [round(pct(per_turn_events, q), 1) for q in (0.5, 0.95)]
        + [round(max(per_turn_events), 1)],
        "largest_session": max(per_session, key=lambda s: s["history_events"]),
        "continued_as_new": sum(s["runs"] - 1 for s in per_session),
        "per_session": per_session,
    }


async def throughput_phase(bench: Bench, client: Client, levels: list[int], memory_sessions: int) -> dict:
    trajectory = load_trajectory(LONG_TRAJECTORY)
    server = ReplayModelServer([trajectory]).start()
    worker = bench.spawn_worker()
    results = []
    try:
        await replay_one(client, bench.queue, trajectory, LONG_TRAJECTORY, server)  # warm-up
        for n in levels:
            cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
            done = await asyncio.gather(*(replay_one(client, bench.queue, trajectory, LONG_TRAJECTORY, server)
                                          for _ in range(n)))
            seconds, cpu = time.monotonic() - t0, cpu_seconds(worker.pid) - cpu0
            turns = sum(t for _, _, t in done)
            latencies = []
            for handle, first_run, _ in done:
                latencies += wft_latencies(await history_of_all_runs(client, handle.id, first_run))
            results.append({"sessions": n, "turns": turns, "seconds": round(seconds, 1),
                            "turns_per_second": round(turns / seconds, 2),
                            "worker_cpu_seconds_per_turn": round(cpu / turns, 4),
                            "worker_cpu_utilisation": round(cpu / seconds, 2),
                            "wft_schedule_to_start_p50_p95_s": [round(pct(latencies, 0.5), 3),
                                                                round(pct(latencies, 0.95), 3)]})
            log(f"throughput: {results[-1]}")
        # memory: RSS growth while sessions stay open (cached in the worker)
        rss0 = rss_mib(worker.pid)
        opened = await asyncio.gather(*(replay_one(client, bench.queue, trajectory, LONG_TRAJECTORY, server,
                                                   close=False) for _ in range(memory_sessions)))
        rss1 = rss_mib(worker.pid)
        for handle, _, _ in opened:
            await handle.signal("close")
        memory = {"open_sessions": memory_sessions, "turns_each": opened[0][2], "rss_before_mib": round(rss0, 1),
                  "rss_after_mib": round(rss1, 1),
                  "rss_per_open_session_kib": round((rss1 - rss0) * 1024 / memory_sessions)}
        log(f"memory: {memory}")
    finally:
        server.stop()
    return {"trajectory": trajectory.id, "levels": results, "memory": memory}


async def main_async(args: argparse.Namespace) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="lanes-sizing-"))
    out: dict = {"machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}}
    with Stack(data_dir, temporal_port=free_port()) as stack:
        client = await connect(Settings(temporal_address=stack.temporal_address))
        bench = Bench(stack, data_dir)
        if args.phase in ("throughput", "all"):
            out["throughput"] = await throughput_phase(bench, client, args.levels, args.memory_sessions)
        if args.phase in ("storage", "all"):
            paths = [f for f, _ in trajectory_files([str(p) for p in args.trajectories])]
            out["storage"] = await storage_phase(bench, client, stack.dsn, paths, args.store_concurrency)
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.workers.sizing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase", choices=("storage", "throughput", "all"), default="all")
    parser.add_argument("--trajectories", nargs="+", type=Path, default=[Path(DEFAULT_TRAJECTORY_ROOT)])
    parser.add_argument("--store-concurrency", type=int, default=4)
    parser.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16])
    parser.add_argument("--memory-sessions", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    summary = {k: v for k, v in result.get("storage", {}).items() if k != "per_session"}
    print(json.dumps({"machine": result["machine"], "throughput": result.get("throughput"), "storage": summary},
                     indent=2))


if __name__ == "__main__":
    main()
