"""``lanes demo``: drive a whole recorded session through the real stack, offline.

Starts whatever is not already running (Temporal dev server, PostgreSQL, a worker in
its own process, the replay model server), replays the trajectory as a hosted
session and prints a summary. ``--kill-worker-at-step N`` SIGKILLs the worker when
the session reaches step N and starts a fresh one: the session carries on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from activities.store import Store
from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory
from worker import sessions
from worker.local.stack import Stack, kill_process
from worker.replay.model_server import ReplayModelServer
from worker.settings import get_settings
from worker.worker import connect

DEFAULT_TRAJECTORY = (
    Path(DEFAULT_TRAJECTORY_ROOT)
    / "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pydicom__pydicom-1256.traj.json.gz"
)


DEFAULT_BUDGET = 12_000


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lanes demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectory", default=str(DEFAULT_TRAJECTORY), help="recorded session to replay")
    parser.add_argument("--kill-worker-at-step", type=int, default=None, metavar="N")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                        help=f"working-set budget in tokens (default {DEFAULT_BUDGET}: small enough to see compactions)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--data-dir", default=None, help="where the local stack keeps its files")
    parser.add_argument("--keep-running", action="store_true", help="keep the stack up after the demo (Ctrl-C stops)")
    return parser.parse_args(argv)


class WorkerProcess:
    """The demo's worker, a child process that can be killed and replaced."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.restarts = 0
        self.proc = self._spawn()

    def _spawn(self):
        name = f"worker-{self.restarts}"
        return self.stack.spawn(name, [sys.executable, "-m", "worker.worker"])

    def kill_and_replace(self) -> None:
        kill_process(self.proc, signal.SIGKILL)
        self.restarts += 1
        self.proc = self._spawn()


async def run_demo(args: argparse.Namespace, stack: Stack, temporal_address: str, console: Console) -> dict:
    settings = get_settings()
    trajectory = load_trajectory(args.trajectory)
    worker = WorkerProcess(stack)
    server = ReplayModelServer([trajectory]).start()
    store = await Store.open(stack.dsn)
    try:
        client = await connect(settings.model_copy(update={"temporal_address": temporal_address}))
        session_id = sessions.new_session_id("demo")
        config = sessions.replay_session_config(session_id, trajectory, args.trajectory, server.base_url,
                                                budget_tokens=args.budget)
        handle = await sessions.start_session(client, config, settings.task_queue)
        task_id = await sessions.submit(handle, trajectory.task)
        killed = False

        async def watch(status) -> None:
            nonlocal killed
            if args.kill_worker_at_step is not None and not killed and status.turns >= args.kill_worker_at_step:
                killed = True
                console.print(f"[yellow]step {status.turns}: SIGKILL worker pid {worker.proc.pid}, starting a new one")
                worker.kill_and_replace()

        final = await sessions.wait_task(handle, task_id, on_status=watch)
        report = await sessions.context(handle)
        await handle.signal("close")
        await handle.result()
        stored_ids = await store.item_ids(session_id)
        task = next(t for t in final.tasks if t.task_id == task_id)
        served = server.state.served_turns(trajectory.id)
        return {
            "session_id": session_id,
            "trajectory": trajectory.id,
            "task_state": task.state,
            "recorded_steps": len(trajectory.turns),
            "replayed_steps": len(served),  # recorded model turns the session asked for
            "steps": task.turns,
            "items_stored": len(stored_ids),
            "observations_stored": await store.count_observations(session_id),
            "duplicate_items": await duplicate_items(store, session_id, report, stored_ids),
            "worker_restarts": worker.restarts,
            "context_tokens": report.working_set_tokens,
            "compactions": report.compactions,
            "budget": report.budget,
            "history_bytes": await sessions.history_bytes(handle),
            "temporal_address": temporal_address,
        }
    finally:
        server.stop()
        await store.close()


async def duplicate_items(store: Store, session_id: str, report, stored_ids: list[str]) -> int:
    """Items stored more than once: logged twice, or stored under an id the session
    never used (neither in its working set nor archived by a compaction)."""
    events = await store.list_events(session_id, limit=10_000)
    added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
    archived = {e.payload["item_id"] for e in events if e.kind == "item.archived"}
    known = {i.id for i in report.items} | archived
    return (len(added) - len(set(added))) + len(set(stored_ids) - known)


def print_summary(summary: dict, console: Console) -> None:
    table = Table(title="Context Lanes demo", show_header=False)
    for key, value in summary.items():
        table.add_row(key, str(value))
    console.print(table)
    console.print(
        f"Inspect it: temporal workflow show --address {summary['temporal_address']} -w {summary['session_id']}"
    )


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    console = Console(stderr=args.json)
    throwaway = args.data_dir is None
    data_dir = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="lanes-demo-"))
    try:
        return _run(args, console, data_dir)
    finally:
        if throwaway:
            shutil.rmtree(data_dir, ignore_errors=True)


def _run(args: argparse.Namespace, console: Console, data_dir: Path) -> int:
    # Use what is already running: a Temporal server at TEMPORAL_ADDRESS, PostgreSQL at
    # DATABASE_URL (the stack honours it); start the rest.
    running_temporal = os.environ.get("TEMPORAL_ADDRESS", "").strip()
    with Stack(data_dir, temporal=not running_temporal) as stack:
        temporal_address = running_temporal or stack.temporal_address
        console.print(f"stack up: temporal {temporal_address}, data in {data_dir}")
        summary = asyncio.run(run_demo(args, stack, temporal_address, console))
        if args.json:
            print(json.dumps(summary))
        else:
            print_summary(summary, console)
        if args.keep_running:
            console.print("stack is running; Ctrl-C stops everything")
            try:
                stack.wait_any()
            except KeyboardInterrupt:
                pass
    ok = summary["task_state"] == "completed" and summary["duplicate_items"] == 0
    if summary["replayed_steps"] != summary["recorded_steps"]:
        console.print(f"[red]the replay ran {summary['replayed_steps']} of {summary['recorded_steps']} recorded steps")
        ok = False
    return 0 if ok else 1
