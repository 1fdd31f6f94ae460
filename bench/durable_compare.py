"""Context Lanes against the hand-written durable agent, side by side in one run.

    .venv/bin/python bench/durable_compare.py [--trajectory PATH] [--rounds 2] [--budget 16000]

Starts a throwaway local stack (Temporal dev server, PostgreSQL), one in-process worker for
each agent (Context Lanes' worker; ``durable_baseline.py``'s) and one replay model server (in
a process of its own, as a provider is; ``--model-server thread``: in the driver's process),
then replays the same recorded session (default: a 176-step mini-swe-agent session) through
both, alternating A B C C B A ... so that machine load falls on all alike (C: lanes with its
recorded tool outputs in the tool activity, as a live session's workspace tools run). Per agent: per-turn
wall time (the gap between two consecutive model requests as the replay server receives them:
model call, tool call and all the durable machinery between) by session third, workflow tasks
and activities per turn, and Temporal history bytes per turn. Writes
``bench/results/durable-compare.json`` and the ``durable-compare`` block of the results README.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from _results import machine, sources_digest, update_block, write_json
from durable_baseline import ACTIVITIES, BaselineInput, DurableBaselineAgent
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from recordings import Trajectory, load_trajectory
from worker import sessions
from worker.local.stack import Stack
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import build_worker, connect

DEFAULT_TRAJECTORY = ("/work/shared/data/trajectories/mini-swe-agent-deepseek/deepseek_chat_dev/"
                      "pylint-dev__astroid-1333.traj.json.gz")
WARMUP_TRAJECTORY = ("/work/shared/data/trajectories/mini-swe-agent-deepseek/deepseek_reasoner_dev/"
                     "pvlib__pvlib-python-1707.traj.json.gz")
ROOT = Path(__file__).resolve().parents[1]
LANES, BASELINE = "lanes", "baseline"
# Lanes with its recorded tool outputs looked up in the tool activity, as a live session's
# workspace tools run (ReplaySpec.tools_as_activities): what a live turn's machinery costs.
LANES_TOOL_ACTIVITY = "lanes-tool-activity"
AGENTS = (LANES, BASELINE, LANES_TOOL_ACTIVITY)


class Stamps:
    """When the replay server received each turn's request (its request log), per run (runs are
    sequential)."""

    def __init__(self, root_url: str) -> None:
        self.root_url = root_url

    async def take(self) -> list[float]:
        """Per-turn wall times (ms) of the run that just ended; the log is cleared for the next."""
        async with httpx.AsyncClient(base_url=self.root_url, timeout=60) as http:
            log = (await http.get("/admin/requests", params={"bodies": "false"})).json()["requests"]
            await http.delete("/admin/requests")
        first: dict[int, float] = {}
        for request in log:  # a turn's first request (the overflow ladder may send more)
            turn = request.get("turn")
            if turn is not None and turn.isdigit():
                first.setdefault(int(turn), request["at"])
        ordered = [first[t] for t in sorted(first)]
        return [(b - a) * 1000 for a, b in itertools.pairwise(ordered)]


@contextlib.contextmanager
def model_server(paths: list[str], where: str) -> Iterator[str]:
    """The replay model server's root URL. ``process``: a process of its own, as a provider is (a
    server thread in the driver shares the interpreter lock with both workers and stalls their
    turns); ``thread``: in the driver's process."""
    if where == "thread":
        with ReplayModelServer(paths) as server:
            yield server.root_url
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "worker.replay.model_server", "--port", str(port),
            *[arg for path in paths for arg in ("--trajectory", path)]]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{root}/v1/models", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the replay model server did not start: {' '.join(argv)}") from None
                time.sleep(0.2)
        yield root
    finally:
        proc.terminate()
        proc.wait(10)


async def history_of(client: Client, workflow_id: str) -> dict[str, Any]:
    """Events, bytes, workflow tasks and activities over every run of ``workflow_id``."""
    totals: dict[str, Any] = {"runs": 0, "events": 0, "bytes": 0, "workflow_tasks": 0, "activities": 0,
                              "local_activities": 0, "activity_types": {}}
    async for info in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await client.get_workflow_handle(workflow_id, run_id=info.run_id).fetch_history()
        totals["runs"] += 1
        totals["events"] += len(history.events)
        totals["bytes"] += sum(e.ByteSize() for e in history.events)
        _add_timings(totals, history.events)
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                totals["workflow_tasks"] += 1
            elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                totals["activities"] += 1
                name = e.activity_task_scheduled_event_attributes.activity_type.name
                totals["activity_types"][name] = totals["activity_types"].get(name, 0) + 1
            elif e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
                totals["local_activities"] += 1
    return totals


def _add_timings(totals: dict[str, Any], events) -> None:
    """Milliseconds spent queued and running, per workflow task and per activity type (from the
    history's event times): where a turn's wall time goes."""
    at = {e.event_id: e.event_time.ToDatetime() for e in events}
    names = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name for e in events
             if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    ms = totals.setdefault("ms", {})

    def add(key: str, start, end) -> None:
        ms[key] = ms.get(key, 0.0) + (at[end] - at[start]).total_seconds() * 1000

    for e in events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            add("workflow_task.queued", e.workflow_task_started_event_attributes.scheduled_event_id, e.event_id)
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            a = e.workflow_task_completed_event_attributes
            add("workflow_task.running", a.started_event_id, e.event_id)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            name = names[a.scheduled_event_id]
            add(f"{name}.queued", a.scheduled_event_id, a.started_event_id)
            add(f"{name}.running", a.started_event_id, e.event_id)


async def run_lanes(client: Client, queue: str, trajectory: Trajectory, path: str, base_url: str,
                    budget: int, tools_as_activities: bool = False) -> tuple[str, int]:
    session_id = f"cmp-{uuid.uuid4().hex[:8]}"
    config = sessions.replay_session_config(session_id, trajectory, path, base_url, budget_tokens=budget,
                                           max_turns_per_task=len(trajectory.turns) + 10)
    assert config.replay is not None
    config.replay.tools_as_activities = tools_as_activities
    handle = await sessions.start_session(client, config, queue)
    task_id = await sessions.submit(handle, trajectory.task)
    status = await sessions.wait_task(handle, task_id, poll=0.5)
    task = next(t for t in status.tasks if t.task_id == task_id)
    if task.state != "completed":
        raise RuntimeError(f"lanes session {session_id} ended {task.state}: {task.error}")
    return session_id, len(trajectory.turns) + 1  # the recorded turns and the closing answer


async def run_baseline(client: Client, queue: str, trajectory: Trajectory, path: str, base_url: str) -> tuple[str, int]:
    workflow_id = f"base-{uuid.uuid4().hex[:8]}"
    result = await client.execute_workflow(
        DurableBaselineAgent.run,
        BaselineInput(trajectory_path=str(Path(path).resolve()), trajectory_id=trajectory.id, model_base_url=base_url,
                      system_prompt=trajectory.system or "You are a helpful assistant.", task=trajectory.task),
        id=workflow_id, task_queue=queue)
    return workflow_id, result.turns


def thirds(gaps: list[float]) -> list[list[float]]:
    size = len(gaps) / 3
    return [gaps[round(i * size):round((i + 1) * size)] for i in range(3)]


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-turn figures of one agent over its runs (turn i of every run pooled into its third)."""
    by_third: list[list[float]] = [[], [], []]
    for run in runs:
        for i, part in enumerate(thirds(run["gaps_ms"])):
            by_third[i].extend(part)
    gaps = [g for run in runs for g in run["gaps_ms"]]
    turns = sum(r["turns"] for r in runs)
    return {
        "runs": len(runs),
        "turns_per_run": runs[0]["turns"],
        "mean_ms": round(statistics.fmean(gaps), 1),
        "median_ms": round(statistics.median(gaps), 1),
        "thirds_mean_ms": [round(statistics.fmean(t), 1) for t in by_third],
        "thirds_median_ms": [round(statistics.median(t), 1) for t in by_third],
        "history_bytes_per_turn": round(sum(r["history"]["bytes"] for r in runs) / turns),
        "history_bytes": max(r["history"]["bytes"] for r in runs),
        "history_events": max(r["history"]["events"] for r in runs),
        "workflow_tasks_per_turn": round(sum(r["history"]["workflow_tasks"] for r in runs) / turns, 2),
        "activities_per_turn": round(sum(r["history"]["activities"] for r in runs) / turns, 2),
        "local_activities_per_turn": round(sum(r["history"]["local_activities"] for r in runs) / turns, 2),
        "ms_per_turn": {key: round(sum(r["history"]["ms"].get(key, 0) for r in runs) / turns, 1)
                        for key in sorted({k for r in runs for k in r["history"]["ms"]})},
        "activity_types_per_turn": {name: round(sum(r["history"]["activity_types"].get(name, 0) for r in runs) / turns, 3)
                                    for name in sorted({n for r in runs for n in r["history"]["activity_types"]})},
    }


async def compare(args: argparse.Namespace, tmp: Path, stack: Stack) -> dict[str, Any]:
    path = str(Path(args.trajectory).resolve())
    trajectory = load_trajectory(path)
    warmup = load_trajectory(WARMUP_TRAJECTORY) if args.warmup else None
    settings = Settings(temporal_address=stack.temporal_address, database_url=stack.dsn,
                        task_queue=f"lanes-{uuid.uuid4().hex[:6]}", data_dir=tmp / "data")
    client = await connect(settings)
    # The hand-written agent as its engineer writes it: Temporal's pydantic converter, not Lanes'
    # (whose codec compresses payloads over 64 KiB, which its whole-history payloads would gain from).
    baseline_client = await Client.connect(stack.temporal_address, data_converter=pydantic_data_converter)
    baseline_queue = f"baseline-{uuid.uuid4().hex[:6]}"
    results: dict[str, list[dict[str, Any]]] = {agent: [] for agent in AGENTS}
    load = [machine()["load_average_1m"]]
    with model_server([path] + ([WARMUP_TRAJECTORY] if warmup else []), args.model_server) as root_url:
        stamps = Stamps(root_url)
        base_url = f"{root_url}/v1"
        async with build_worker(client, settings), Worker(baseline_client, task_queue=baseline_queue,
                                                           workflows=[DurableBaselineAgent], activities=ACTIVITIES):
            if warmup is not None:  # imports, encodings, connection pools: paid before anything is measured
                await run_lanes(client, settings.task_queue, warmup, WARMUP_TRAJECTORY, base_url, args.budget)
                await run_baseline(baseline_client, baseline_queue, warmup, WARMUP_TRAJECTORY, base_url)
                await stamps.take()
            order = [agent for i in range(args.rounds) for agent in (AGENTS if i % 2 == 0 else AGENTS[::-1])
                     if args.only in (None, agent)]
            for agent in order:
                started = time.perf_counter()
                if agent != BASELINE:
                    workflow_id, turns = await run_lanes(client, settings.task_queue, trajectory, path,
                                                         base_url, args.budget, agent == LANES_TOOL_ACTIVITY)
                else:
                    workflow_id, turns = await run_baseline(baseline_client, baseline_queue, trajectory, path, base_url)
                elapsed = time.perf_counter() - started
                gaps = await stamps.take()
                history = await history_of(baseline_client if agent == BASELINE else client, workflow_id)
                results[agent].append({"workflow_id": workflow_id, "turns": turns, "elapsed_s": round(elapsed, 2),
                                       "gaps_ms": [round(g, 2) for g in gaps], "history": history})
                print(f"{agent}: {turns} turns in {elapsed:.1f} s, mean {statistics.fmean(gaps):.1f} ms/turn, "
                      f"history {history['bytes']:,} B, {history['workflow_tasks'] / turns:.2f} workflow tasks/turn",
                      file=sys.stderr)
                load.append(machine()["load_average_1m"])
    if args.only is not None:  # a look at one agent (profiling): no comparison
        return {"order": order, args.only: summarise(results[args.only]), "runs": results}
    lanes, baseline = summarise(results[LANES]), summarise(results[BASELINE])
    tool_activity = summarise(results[LANES_TOOL_ACTIVITY])
    return {
        "trajectory": trajectory.id,
        "recorded_steps": len(trajectory.turns),
        "budget": args.budget,
        "model_server": args.model_server,
        "order": order,
        LANES: lanes,
        BASELINE: baseline,
        LANES_TOOL_ACTIVITY: tool_activity,
        "ratio_mean": round(lanes["mean_ms"] / baseline["mean_ms"], 3),
        "ratio_median": round(lanes["median_ms"] / baseline["median_ms"], 3),
        "ratio_thirds_mean": [round(a / b, 3) for a, b in zip(lanes["thirds_mean_ms"], baseline["thirds_mean_ms"],
                                                                strict=True)],
        "tool_activity_ratio_mean": round(tool_activity["mean_ms"] / baseline["mean_ms"], 3),
        "tool_activity_ratio_median": round(tool_activity["median_ms"] / baseline["median_ms"], 3),
        "load_average_1m": load,
        "machine": machine(),
        "sources": sources_digest(),
        "runs": results,
    }


def readme_block(result: dict[str, Any], command: str) -> str:
    lanes, base, live = result[LANES], result[BASELINE], result[LANES_TOOL_ACTIVITY]
    third = ["first third", "second third", "last third"]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}×"

    rows = [f"| per-turn wall time, {third[i]} (mean / median ms) | {lanes['thirds_mean_ms'][i]} / "
            f"{lanes['thirds_median_ms'][i]} | {base['thirds_mean_ms'][i]} / {base['thirds_median_ms'][i]} | "
            f"{result['ratio_thirds_mean'][i]:.2f}× | {live['thirds_mean_ms'][i]} / {live['thirds_median_ms'][i]} | "
            f"{ratio(live['thirds_mean_ms'][i], base['thirds_mean_ms'][i])} |" for i in range(3)]
    return "\n".join([
        "## Durable comparison: Context Lanes vs a hand-written durable agent",
        "",
        f"Run with `{command}`: the recorded session `{result['trajectory']}` ({result['recorded_steps']} steps) "
        f"replayed {lanes['runs']}× by each agent, alternating ({', '.join(result['order'])}), on one local "
        "Temporal dev server + PostgreSQL, each agent's worker in the driver's process, one replay model server "
        f"({'in a process of its own' if result['model_server'] == 'process' else 'a thread of the driver'}). "
        f"Lanes at a {result['budget']:,}-token budget; the hand-written agent (`bench/durable_baseline.py`: full "
        "history in workflow state, one activity per model call and per tool call) sends the whole history. "
        "Per-turn wall time: the gap between two consecutive model requests at the replay server. "
        "*Context Lanes* looks a recorded tool output up in a local activity (a replay runs nothing in a "
        "workspace); *tool activity* is the same replay with each tool call in the tool activity, as a live "
        "session's workspace tools run (`ReplaySpec.tools_as_activities`).",
        "",
        "| | Context Lanes | hand-written durable | lanes / hand-written | Context Lanes, tool activity | "
        "tool activity / hand-written |",
        "|---|---:|---:|---:|---:|---:|",
        f"| per-turn wall time, whole session (mean / median ms) | {lanes['mean_ms']} / {lanes['median_ms']} | "
        f"{base['mean_ms']} / {base['median_ms']} | {result['ratio_mean']:.2f}× / {result['ratio_median']:.2f}× | "
        f"{live['mean_ms']} / {live['median_ms']} | {result['tool_activity_ratio_mean']:.2f}× / "
        f"{result['tool_activity_ratio_median']:.2f}× |",
        *rows,
        f"| history bytes per turn | {lanes['history_bytes_per_turn']:,} | {base['history_bytes_per_turn']:,} | "
        f"{ratio(lanes['history_bytes_per_turn'], base['history_bytes_per_turn'])} | "
        f"{live['history_bytes_per_turn']:,} | {ratio(live['history_bytes_per_turn'], base['history_bytes_per_turn'])} |",
        f"| history of one session (bytes, events) | {lanes['history_bytes']:,}, {lanes['history_events']:,} | "
        f"{base['history_bytes']:,}, {base['history_events']:,} | | {live['history_bytes']:,}, "
        f"{live['history_events']:,} | |",
        f"| workflow tasks per turn | {lanes['workflow_tasks_per_turn']} | {base['workflow_tasks_per_turn']} | | "
        f"{live['workflow_tasks_per_turn']} | |",
        f"| activities (+ local activities) per turn | {lanes['activities_per_turn']} "
        f"(+ {lanes['local_activities_per_turn']}) | {base['activities_per_turn']} "
        f"(+ {base['local_activities_per_turn']}) | | {live['activities_per_turn']} "
        f"(+ {live['local_activities_per_turn']}) | |",
        "",
        f"Load average (1 min) at the start and after each run: {', '.join(str(x) for x in result['load_average_1m'])} "
        f"({result['machine']['cpus']} CPUs, shared).",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectory", default=DEFAULT_TRAJECTORY)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each agent (alternating A B C C B A ...)")
    parser.add_argument("--budget", type=int, default=16_000)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--no-write", dest="write", action="store_false", help="print only")
    parser.add_argument("--model-server", choices=["process", "thread"], default="process",
                        help="the replay model server in a process of its own (default) or a thread of the driver")
    parser.add_argument("--only", choices=AGENTS, help="run one agent only (implies --no-write)")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the driver's process (both workers) into FILE")
    args = parser.parse_args()
    args.write = args.write and args.only is None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with tempfile.TemporaryDirectory(prefix="lanes-compare-") as tmp, Stack(Path(tmp)) as stack:
        result = asyncio.run(compare(args, Path(tmp), stack))
    if args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    summary = {k: v for k, v in result.items() if k != "runs"}
    print(summary)
    if args.write:
        write_json("durable-compare.json", result)
        command = (".venv/bin/python bench/durable_compare.py" + ("" if args.rounds == 2 else f" --rounds {args.rounds}")
                   + ("" if args.model_server == "process" else f" --model-server {args.model_server}"))
        update_block("durable-compare", readme_block(result, command))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
