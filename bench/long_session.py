"""A 5,000-turn hosted session through continue-as-new, measured.

    .venv/bin/python bench/long_session.py [--turns 5000] [--budget 16000]

Starts a throwaway local stack (Temporal dev server with default limits, PostgreSQL,
one in-process worker) and replays a deterministic synthetic recording of N turns as
one hosted session with the default ``turns_per_run``. Writes
``bench/results/long-session.json``: per-run history events and bytes (limits: 4 MiB,
10,240 events), per-turn latency by turn-number bucket (it must not grow with the
turn number), and whether the last request equals the pure engine's offline plan.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from recordings import dump_trajectory, load_trajectory, synthetic_trajectory
from worker import sessions
from worker.local.stack import Stack
from worker.replay.model_server import ReplayModelServer
from worker.replay.recorded_lane import lane_batches
from worker.replay.simulator import iter_requests
from worker.settings import Settings
from worker.worker import build_worker, connect

RESULTS = Path(__file__).resolve().parent / "results" / "long-session.json"
BUCKETS = 10


async def run(turns: int, budget: int, tmp: Path, stack: Stack) -> dict:
    recorded = synthetic_trajectory(turns, seed=11)
    for turn in recorded.turns:  # hosted replays do not inject mid-task user text
        turn.user_after = []
    path = dump_trajectory(recorded, tmp / "long.json")
    trajectory = load_trajectory(path)
    settings = Settings(temporal_address=stack.temporal_address, database_url=stack.dsn,
                        task_queue=f"bench-{uuid.uuid4().hex[:6]}", data_dir=tmp / "data")
    client = await connect(settings)
    stamps: dict[int, float] = {}
    with ReplayModelServer([trajectory]) as server:
        original = server.state.record

        def record(headers, body):  # time each model call as the server sees it
            turn = headers.get("x-lanes-turn")
            if turn is not None and turn.isdigit():
                stamps.setdefault(int(turn), time.perf_counter())
            return original(headers, body)

        server.state.record = record  # type: ignore[method-assign]
        async with build_worker(client, settings):
            session_id = f"long-{uuid.uuid4().hex[:8]}"
            handle = await sessions.start_session(
                client, sessions.replay_session_config(session_id, trajectory, path, server.base_url,
                                                     budget_tokens=budget, max_turns_per_task=turns + 10),
                settings.task_queue)
            started = time.perf_counter()
            task_id = await sessions.submit(handle, trajectory.task)
            status = await sessions.wait_task(handle, task_id, poll=1.0)
            elapsed = time.perf_counter() - started
            last_request = next(r for r in reversed(server.requests())
                                if int(r["turn"]) == turns - 1)["body"]["messages"]
            runs = []
            async for info in client.list_workflows(f'WorkflowId = "{session_id}"'):
                history = await client.get_workflow_handle(session_id, run_id=info.run_id).fetch_history()
                runs.append({"events": len(history.events), "bytes": sum(e.ByteSize() for e in history.events)})
    offline = list(iter_requests(trajectory, "lanes", budget, batches=lane_batches(trajectory, session_id)))
    ordered = [stamps[t] for t in sorted(stamps)]
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(ordered)]
    size = max(1, len(gaps) // BUCKETS)
    buckets = [
        {"turns": f"{i * size}-{min(len(gaps), (i + 1) * size) - 1}",
         "median_ms": round(statistics.median(gaps[i * size:(i + 1) * size]), 2)}
        for i in range(BUCKETS) if gaps[i * size:(i + 1) * size]
    ]
    return {
        "turns": turns,
        "budget": budget,
        "task_state": status.tasks[0].state,
        "elapsed_s": round(elapsed, 1),
        "runs": len(runs),
        "max_run_events": max(r["events"] for r in runs),
        "max_run_bytes": max(r["bytes"] for r in runs),
        "limits": {"events": 10_240, "bytes": 4 * 1024 * 1024},
        "per_turn_latency_by_bucket": buckets,
        "last_request_equals_pure_engine": last_request == offline[-1].messages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5_000)
    parser.add_argument("--budget", type=int, default=16_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanes-long-") as tmp, Stack(Path(tmp)) as stack:
        result = asyncio.run(run(args.turns, args.budget, Path(tmp), stack))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
