"""``lanes demo``: drive a whole recorded session through the real stack, offline.

Starts whatever is not already running (Temporal dev server, PostgreSQL, a worker in
its own process, the replay model server), replays the trajectory as a hosted
session and prints a summary. ``--kill-worker-at-step N`` SIGKILLs the worker when
the session reaches step N and starts a fresh one: the session carries on.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from activities.store import Store
from recordings import load_trajectory
from worker import sessions
from worker.local.api_process import DEFAULT_API_PORT, LocalApi, check_port, start_api
from worker.local.commands import installed_command
from worker.local.replay_session import DEFAULT_REPLAY_BUDGET, DEFAULT_TRAJECTORY, session_body
from worker.local.stack import Stack, free_port, kill_process, port_is_free
from worker.replay.model_server import ReplayModelServer
from worker.settings import get_settings
from worker.worker import connect

DEFAULT_BUDGET = DEFAULT_REPLAY_BUDGET


@dataclass
class DemoOptions:
    trajectory: str = str(DEFAULT_TRAJECTORY)
    kill_worker_at_step: int | None = None
    budget: int = DEFAULT_BUDGET
    json: bool = False
    data_dir: str | None = None
    keep_running: bool = False  # keep the stack, with the API and its inspector, up after the demo
    api_port: int | None = None  # with keep_running: None is 8000 when free, else any free port
    quiet: bool = False


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


async def run_demo(args: DemoOptions, stack: Stack, temporal_address: str, console: Console,
                   api: LocalApi | None = None) -> dict:
    settings = get_settings()
    trajectory = load_trajectory(args.trajectory)
    worker = WorkerProcess(stack)
    server = ReplayModelServer([trajectory]).start()
    store = await Store.open(stack.dsn)
    try:
        client = await connect(settings.model_copy(update={"temporal_address": temporal_address}))
        if api is None:
            session_id = sessions.new_session_id("demo")
            config = sessions.replay_session_config(session_id, trajectory, args.trajectory, server.base_url,
                                                    budget_tokens=args.budget)
            handle = await sessions.start_session(client, config, settings.task_queue)
            task_id = await sessions.submit(handle, trajectory.task)
        else:  # through the API, so that its inspector lists the session
            session_id, task_id = await _start_through_api(api, args, trajectory, server.base_url)
            handle = client.get_workflow_handle(session_id)
            console.print(f"inspector: {api.ui_url(session_id)}")
        killed = False
        progress = _progress(console, args.quiet)
        step = progress.add_task("replaying", total=len(trajectory.turns))

        async def watch(status) -> None:
            nonlocal killed
            progress.update(step, completed=min(status.turns, len(trajectory.turns)))
            if args.kill_worker_at_step is not None and not killed and status.turns >= args.kill_worker_at_step:
                killed = True
                console.print(f"[yellow]step {status.turns}: SIGKILL worker pid {worker.proc.pid}, starting a new one")
                worker.kill_and_replace()

        with progress:
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
            "budget": report.budget,  # what the working set gets: --budget minus the tool definitions
            "tool_definition_tokens": report.tool_definition_tokens,
            "history_bytes": await sessions.history_bytes(handle),
            "temporal_address": temporal_address,
        }
    finally:
        server.stop()
        await store.close()


async def _start_through_api(api: LocalApi, args: DemoOptions, trajectory, model_url: str) -> tuple[str, str]:
    from lanes_client import AsyncLanesClient

    async with AsyncLanesClient(api.url, api.token) as lanes:
        body = session_body(Path(args.trajectory).resolve(), trajectory, model_url, budget_tokens=args.budget)
        created = await lanes.create_session(**body)
        accepted = await lanes.send_message(created.session_id, trajectory.task)
    return created.session_id, accepted.task_id


def _progress(console: Console, quiet: bool):
    """Model calls replayed so far (the demo takes a minute or two): a bar on a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("replaying the recorded session"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("steps"), TimeElapsedColumn(), console=console, transient=True,
                    disable=quiet or not console.is_terminal)


async def duplicate_items(store: Store, session_id: str, report, stored_ids: list[str]) -> int:
    """Items stored more than once: logged twice, or stored under an id the session
    never used (neither in its working set nor archived by a compaction)."""
    events = await store.list_events(session_id, limit=10_000)
    added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
    archived = {e.payload["item_id"] for e in events if e.kind == "item.archived"}
    known = {i.id for i in report.items} | archived
    return (len(added) - len(set(added))) + len(set(stored_ids) - known)


# What each figure of the summary means, as the table prints it beside the value.
MEANINGS = {
    "session_id": "the session (its Temporal workflow id): the inspector, `lanes context` and Temporal name it",
    "trajectory": "the recorded agent session replayed: its model turns and tool outputs, as recorded",
    "task_state": "completed: the task ran to its end",
    "recorded_steps": "model calls in the recording",
    "replayed_steps": "recorded model calls the session asked for (all of them: nothing skipped)",
    "steps": "model turns the task took: the recorded ones, then one that ends the replay",
    "items_stored": "messages and tool results in PostgreSQL, content exactly as recorded",
    "observations_stored": "exact tool outputs archived, readable again at observation://…",
    "duplicate_items": "items stored twice (0: also across a killed worker)",
    "worker_restarts": "workers killed mid-task and replaced (--kill-worker-at-step)",
    "context_tokens": "tokens of the working set at the end: what the next request would carry",
    "compactions": "times the engine made room to stay inside the budget",
    "budget": "tokens the working set may use: the session's budget less the tool definitions",
    "tool_definition_tokens": "tokens of the tool definitions every request carries",
    "history_bytes": "Temporal history of the session's last run: item metadata only, never content",
    "temporal_address": "the Temporal server the session ran on",
}


def print_summary(summary: dict, console: Console) -> None:
    """The figures, each with what it means (``--json`` prints the figures alone)."""
    table = Table(title="Context Lanes demo", show_header=False)
    for key, value in summary.items():
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        table.add_row(key, shown, MEANINGS.get(key, ""))
    console.print(table)
    if summary.get("compactions"):
        console.print(f"The recording's history was compacted {summary['compactions']:,} times to stay inside "
                      f"{summary['budget']:,} tokens; nothing was lost: every output is stored and recallable.")


def print_next_steps(summary: dict, console: Console, api: LocalApi | None) -> None:
    """Point at what still exists: the running stack, or how to get one that stays."""
    lanes = installed_command("lanes")
    if api is None:
        console.print("The demo's stack has stopped. To watch a session compact in the inspector: "
                      f"[bold]{lanes} demo --ui[/bold] (make run ARGS=--ui), or [bold]{lanes} dev --replay[/bold].")
        return
    console.print(f"Inspector: {api.ui_url(summary['session_id'])}")
    console.print(f"Temporal:  {installed_command('temporal')} workflow show --address {summary['temporal_address']} "
                  f"-w {summary['session_id']}")
    console.print(f"CLI:       LANES_API_URL={api.url} LANES_DATA_DIR={Path(api.token_source).parent} "
                  f"{lanes} context {summary['session_id']}")


def run(args: DemoOptions) -> int:
    stream = sys.stderr if args.json else sys.stdout
    console = Console(stderr=args.json, width=None if stream.isatty() else 100_000)  # piped: never wrapped
    throwaway = args.data_dir is None
    data_dir = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="lanes-demo-"))
    try:
        return _run(args, console, data_dir)
    finally:
        if throwaway:
            shutil.rmtree(data_dir, ignore_errors=True)


def _run(args: DemoOptions, console: Console, data_dir: Path) -> int:
    api_port = None
    if args.keep_running:  # a port given is checked before anything starts; the default may move
        api_port = args.api_port or (DEFAULT_API_PORT if port_is_free(DEFAULT_API_PORT) else free_port())
        check_port(api_port, get_settings().api_host, "the API", "--api-port")
    # Use what is already running: a Temporal server at TEMPORAL_ADDRESS, PostgreSQL at
    # DATABASE_URL (the stack honours it); start the rest.
    running_temporal = os.environ.get("TEMPORAL_ADDRESS", "").strip()
    stack = Stack(data_dir, temporal=not running_temporal)
    with console.status("starting PostgreSQL and Temporal…"):
        stack.start()
    try:
        temporal_address = running_temporal or stack.temporal_address
        console.print(f"stack up: temporal {temporal_address}, data in {data_dir}")
        api = None
        if api_port is not None:
            with console.status("starting the API…"):
                api = start_api(stack, get_settings().api_host, api_port, allow_replay=True,
                                replay_roots=[Path(args.trajectory).resolve().parent])
        summary = asyncio.run(run_demo(args, stack, temporal_address, console, api))
        if args.json:
            print(json.dumps(summary), flush=True)
        else:
            print_summary(summary, console)
        print_next_steps(summary, console, api)  # with --json on stderr, as every note
        if args.keep_running:
            console.print("The stack is running; Ctrl-C stops everything.")
            try:
                stack.wait_any()
            except KeyboardInterrupt:
                pass
    finally:
        stack.stop()
    ok = summary["task_state"] == "completed" and summary["duplicate_items"] == 0
    if summary["replayed_steps"] != summary["recorded_steps"]:
        console.print(f"[red]the replay ran {summary['replayed_steps']} of {summary['recorded_steps']} recorded steps")
        ok = False
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m worker.local.demo ARGS``: the same as ``lanes demo ARGS``."""
    from worker.cli import run as cli

    return cli(["demo", *(sys.argv[1:] if argv is None else argv)])
