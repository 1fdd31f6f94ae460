"""A real, long PostgreSQL outage in the middle of a hosted session, with production settings.

    .venv/bin/python bench/outage.py [--minutes 10]

Starts a throwaway stack (Temporal dev server, its own embedded PostgreSQL, the replay model
server, one worker process with the default LANES_STORE_OUTAGE_SECONDS) and replays a
recorded session. At its fourth step PostgreSQL is stopped for ``--minutes``, then started
on the same data. Meanwhile the driver samples, every 30 s, what the session's pending
activity reports (its attempt and last failure) and how long the API takes to answer 503.
Afterwards: the task's state, items stored once, every recorded tool output archived.
Writes ``bench/results/outage.json`` and its block in ``bench/results/README.md``.

The suite's tests/integration/test_outages.py runs the same scenario scaled down (a 4 s
wait per attempt, an outage of about 30 s); this shows the production numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import _results
import httpx

from activities.store import Store
from recordings import SHORT_TRAJECTORY, load_trajectory, recorded_outputs
from worker import sessions
from worker.api.app import create_app
from worker.local.stack import Stack, kill_process, start_postgres
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import connect


async def sample(handle, settings: Settings) -> dict:
    described = await handle.describe()
    pending = [{"activity": p.activity_type.name, "attempt": p.attempt, "last_failure": p.last_failure.message}
               for p in described.raw_description.pending_activities]
    app = create_app(settings, tokens={"bench-token-xxxx": "bench"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        started = time.monotonic()
        answer = await api.get("/v1/sessions", headers={"Authorization": "Bearer bench-token-xxxx"})
        took = time.monotonic() - started
    return {"pending": pending, "api_status": answer.status_code, "api_seconds": round(took, 3)}


async def main_async(args: argparse.Namespace) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="lanes-outage-"))
    data_dir.chmod(0o755)
    trajectory = load_trajectory(SHORT_TRAJECTORY)
    with Stack(data_dir, postgres=False) as stack:
        postgres = start_postgres(data_dir / "pg", database="lanes", use_database_url=False)
        settings = Settings(temporal_address=stack.temporal_address, database_url=postgres.dsn,
                            task_queue=f"outage-{uuid.uuid4().hex[:6]}", data_dir=data_dir)
        worker = stack.spawn("worker", [sys.executable, "-m", "worker.worker"], env={
            "DATABASE_URL": postgres.dsn, "LANES_TASK_QUEUE": settings.task_queue}, cwd=_results.REPO)
        client = await connect(settings)
        samples = []
        try:
            with ReplayModelServer([trajectory]) as server:
                config = sessions.replay_session_config(sessions.new_session_id("outage"), trajectory,
                                                        SHORT_TRAJECTORY, server.base_url)
                handle = await sessions.start_session(client, config, settings.task_queue)
                task_id = await sessions.submit(handle, trajectory.task)
                stopped: list[float] = []

                async def stop_at_step_4(status) -> None:
                    if not stopped and status.turns >= 4:
                        stopped.append(time.monotonic())
                        postgres.stop()

                waiting = asyncio.create_task(sessions.wait_task(handle, task_id, on_status=stop_at_step_4))
                while not stopped:
                    await asyncio.sleep(0.1)
                while time.monotonic() < stopped[0] + args.minutes * 60:
                    await asyncio.sleep(min(30.0, max(0.0, stopped[0] + args.minutes * 60 - time.monotonic())))
                    samples.append({"at_seconds": round(time.monotonic() - stopped[0]), "session_waiting":
                                    not waiting.done(), **await sample(handle, settings)})
                postgres = start_postgres(data_dir / "pg", use_database_url=False)
                restarted = time.monotonic()
                status = await asyncio.wait_for(waiting, 900)
                resumed_in = time.monotonic() - restarted
            task = next(t for t in status.tasks if t.task_id == task_id)
            store = await Store.open(postgres.dsn)
            try:
                events = await store.list_events(handle.id, limit=100_000)
                added = [e.payload["item_id"] for e in events if e.kind == "item.added"]
                observations = await store.count_observations(handle.id)
            finally:
                await store.close()
        finally:
            kill_process(worker, signal.SIGKILL, grace=5)
            postgres.stop()
    return {
        "driver": "bench/outage.py", "args": vars(args), "machine": _results.machine(),
        "recording": trajectory.id, "recorded_steps": len(trajectory.turns),
        "outage_seconds": round(args.minutes * 60), "task_state": task.state, "task_error": task.error,
        "steps": task.turns, "completed_seconds_after_restart": round(resumed_in, 1),
        "items_added": len(added), "items_added_twice": len(added) - len(set(added)),
        "observations": observations, "recorded_outputs": len(recorded_outputs(trajectory)),
        "samples": samples, "sources": _results.sources_digest(),
    }


def readme_block(result: dict) -> str:
    waits = [s for s in result["samples"] if s["pending"]]
    attempts = max((p["attempt"] for s in waits for p in s["pending"]), default=0)
    failure = next((p["last_failure"] for s in waits for p in s["pending"] if p["last_failure"]), "")
    api = [s["api_seconds"] for s in result["samples"]]
    return "\n".join([
        f"Run with `.venv/bin/python bench/outage.py --minutes {result['args']['minutes']:g}`: PostgreSQL stopped "
        f"{result['outage_seconds']} s at step 4 of {result['recording']} ({result['recorded_steps']} steps).",
        "",
        "| task | steps | completed after restart | items added twice | observations / recorded outputs | "
        "highest attempt while down | API 503 answer |",
        "|---|---|---|---|---|---|---|",
        f"| {result['task_state']} | {result['steps']} | {result['completed_seconds_after_restart']} s | "
        f"{result['items_added_twice']} | {result['observations']} / {result['recorded_outputs']} | {attempts} | "
        f"{min(api, default=0):.2f}–{max(api, default=0):.2f} s |",
        "",
        f"The pending activity's last failure during the outage: `{failure}`.",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    path = _results.write_json("outage.json", result)
    _results.update_block("outage", readme_block(result))
    print(f"{result['task_state']} after a {result['outage_seconds']} s outage -> {path}")
    sys.exit(0 if result["task_state"] == "completed" and not result["items_added_twice"] else 1)


if __name__ == "__main__":
    main()
