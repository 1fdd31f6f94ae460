"""Chaos: hosted sessions on two workers under random worker kills, PostgreSQL restarts and
model faults; what was lost or stored twice.

    .venv/bin/python bench/chaos.py [--sessions 32] [--minutes 20] [--seed 1]

Starts a throwaway stack (Temporal dev server, its own embedded PostgreSQL, the replay model
server in this process, two worker processes) and replays ``--sessions`` recorded sessions
of ``../shared/data/trajectories/mini-swe-agent-deepseek`` at once, each its own recording,
with a 16,000-token budget so that they compact. Until every session ended (or the time
bound), a fault is injected every 0.4 to 1.6 seconds, drawn at random (seeded):

- ``worker_kill``: SIGKILL one of the two workers (its sandboxes and in-flight activities
  die with it), restarted 1 to 3 s later;
- ``postgres_restart``: PostgreSQL stopped for 1 to 6 s, then started on the same data;
- ``model_<mode>``: the next 1 to 4 model calls answered with HTTP 500, HTTP 429
  (Retry-After 1 s), a body that is not JSON, or after a 3 s delay.

Model faults count the answers actually served faulty. Afterwards, per session: its task
state; every stored tool result answers its call once (else duplicated) and its archived
output is byte-identical to the recording (else lost); every stored item added to the event
log once (else lost, or duplicated); every recorded model turn asked for. Writes ``bench/results/chaos.json`` and its
block in ``bench/results/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import _results
import asyncpg

from activities.store import Store
from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, load_trajectory, recorded_outputs, trajectory_files
from worker import sessions
from worker.local.stack import Stack, kill_process, start_postgres
from worker.replay.model_server import FaultMode, ReplayModelServer
from worker.settings import Settings
from worker.worker import connect
from workflows.context import ItemContent

SOURCE = DEFAULT_TRAJECTORY_ROOT / "mini-swe-agent-deepseek"
BUDGET = 16_000
MODEL_FAULTS: tuple[FaultMode, ...] = ("http_500", "http_429", "garbage", "timeout")


def pick_recordings(count: int, rng: random.Random) -> list[tuple[Path, Trajectory]]:
    """``count`` distinct recordings of 20 to 80 steps."""
    files = [path for path, _ in trajectory_files([SOURCE])]
    rng.shuffle(files)
    chosen: list[tuple[Path, Trajectory]] = []
    for path in files:
        trajectory = load_trajectory(path)
        if 20 <= len(trajectory.turns) <= 80 and all(not t.user_after for t in trajectory.turns):
            chosen.append((path, trajectory))
        if len(chosen) == count:
            return chosen
    raise SystemExit(f"only {len(chosen)} usable recordings under {SOURCE}")


class Chaos:
    def __init__(self, stack: Stack, settings: Settings, server: ReplayModelServer, data_dir: Path,
                 rng: random.Random) -> None:
        self.stack, self.settings, self.server, self.data_dir, self.rng = stack, settings, server, data_dir, rng
        self.postgres = start_postgres(data_dir / "pg", database="lanes", use_database_url=False)
        self.workers: dict[str, object] = {}
        self.injected: Counter[str] = Counter()
        self.restarts = 0

    @property
    def dsn(self) -> str:
        return self.postgres.dsn

    def spawn(self, name: str) -> None:
        self.restarts += 1
        self.workers[name] = self.stack.spawn(f"{name}-{self.restarts}", [sys.executable, "-m", "worker.worker"], env={
            "DATABASE_URL": self.dsn, "LANES_TASK_QUEUE": self.settings.task_queue,
            "LANES_STORE_OUTAGE_SECONDS": "20", "LANES_LOG_LEVEL": "WARNING"}, cwd=_results.REPO)

    async def kill_worker(self) -> None:
        name = self.rng.choice(sorted(self.workers))
        kill_process(self.workers[name], signal.SIGKILL, grace=5)  # type: ignore[arg-type]
        self.injected["worker_kill"] += 1
        await asyncio.sleep(self.rng.uniform(1, 3))
        self.spawn(name)

    async def restart_postgres(self) -> None:
        self.postgres.stop()
        self.injected["postgres_restart"] += 1
        await asyncio.sleep(self.rng.uniform(1, 6))
        self.postgres = await asyncio.to_thread(start_postgres, self.data_dir / "pg", use_database_url=False)

    def model_fault(self) -> None:
        mode = self.rng.choice(MODEL_FAULTS)
        self.server.set_faults(mode, count=self.rng.randint(1, 4), retry_after=1, delay_seconds=3)

    async def run(self, done: asyncio.Event, until: float) -> None:
        while not done.is_set() and time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(0.4, 1.6))
            kind = self.rng.choices(["worker", "postgres", "model"], weights=[3, 1, 6])[0]
            if kind == "worker":
                await self.kill_worker()
            elif kind == "postgres":
                await self.restart_postgres()
            else:
                self.model_fault()
        self.server.set_faults("none")

    def faults(self) -> dict[str, int]:
        served = {f"model_{mode}": n for mode, n in self.server.state.faults_served.items()}
        return dict(sorted({**self.injected, **served}.items()))


async def check(dsn: str, session_id: str, trajectory: Trajectory) -> dict[str, int]:
    """Lost and duplicated items of one session (see the module's docstring)."""
    store = await Store.open(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        rows = await store.list_items(session_id, lane="main", limit=100_000)
        added = [e.payload["item_id"] for e in await store.list_events(session_id, limit=100_000)
                 if e.kind == "item.added"]
        archive = {r["item_id"]: r["sha256"] for r in await conn.fetch(
            "SELECT item_id, sha256 FROM observations WHERE session_id = $1", session_id)}
    finally:
        await conn.close()
        await store.close()
    recorded = recorded_outputs(trajectory)
    answers: Counter[str] = Counter()
    lost = duplicated = 0
    for row in rows:
        if row.kind != "tool_result":
            continue
        call_id = ItemContent.model_validate(row.content["content"]).tool_call_id or ""
        answers[call_id] += 1
        expected = hashlib.sha256(recorded[call_id].output.encode("utf-8", "surrogatepass")).hexdigest() \
            if call_id in recorded else None
        lost += archive.get(row.item_id) != expected  # missing or different archived output
    duplicated += sum(n - 1 for n in answers.values() if n > 1)
    duplicated += len(added) - len(set(added))
    lost += len({r.item_id for r in rows} - set(added))  # stored, never logged as added
    return {"lost": lost, "duplicated": duplicated}


async def main_async(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    data_dir = Path(tempfile.mkdtemp(prefix="lanes-chaos-"))
    data_dir.chmod(0o755)
    recordings = pick_recordings(args.sessions, rng)
    started = time.monotonic()
    with Stack(data_dir, postgres=False) as stack:
        settings = Settings(temporal_address=stack.temporal_address, task_queue=f"chaos-{uuid.uuid4().hex[:6]}",
                            data_dir=data_dir)
        client = await connect(settings)
        with ReplayModelServer([t for _, t in recordings]) as server:
            chaos = Chaos(stack, settings, server, data_dir, rng)
            try:
                for name in ("worker-a", "worker-b"):
                    chaos.spawn(name)
                handles = []
                for path, trajectory in recordings:
                    config = sessions.replay_session_config(sessions.new_session_id("chaos"), trajectory, path,
                                                            server.base_url, budget_tokens=BUDGET)
                    handle = await sessions.start_session(client, config, settings.task_queue)
                    handles.append((handle, await sessions.submit(handle, trajectory.task), trajectory))
                done = asyncio.Event()
                injector = asyncio.create_task(chaos.run(done, started + args.minutes * 60))
                waits = [asyncio.wait_for(sessions.wait_task(h, t, poll=1.0), args.minutes * 60 + 300)
                         for h, t, _ in handles]
                statuses = await asyncio.gather(*waits, return_exceptions=True)
                done.set()
                await injector
                results = []
                for (handle, task_id, trajectory), status in zip(handles, statuses, strict=True):
                    task = None if isinstance(status, BaseException) else next(
                        t for t in status.tasks if t.task_id == task_id)
                    counts = await check(chaos.dsn, handle.id, trajectory)
                    served = server.state.served_turns(trajectory.id)
                    results.append({"session": handle.id, "recording": trajectory.id, "steps": len(trajectory.turns),
                                    "state": task.state if task else f"timeout: {status!r}",
                                    "error": task.error if task else None,
                                    "steps_not_replayed": len(trajectory.turns) - len(served), **counts})
            finally:
                for proc in chaos.workers.values():
                    kill_process(proc, signal.SIGKILL, grace=5)  # type: ignore[arg-type]
                chaos.postgres.stop()
    faults = chaos.faults()
    return {
        "driver": "bench/chaos.py", "args": vars(args), "machine": _results.machine(),
        "seconds": round(time.monotonic() - started, 1),
        "faults_injected": sum(faults.values()), "faults": faults,
        "sessions": len(results), "sessions_completed": sum(r["state"] == "completed" for r in results),
        "items_lost": sum(r["lost"] for r in results), "items_duplicated": sum(r["duplicated"] for r in results),
        "steps_not_replayed": sum(r["steps_not_replayed"] for r in results),
        "per_session": results, "sources": _results.sources_digest(),
    }


def readme_block(result: dict) -> str:
    faults = ", ".join(f"{kind} {n}" for kind, n in result["faults"].items())
    return "\n".join([
        f"Run with `{' '.join(['.venv/bin/python bench/chaos.py'] + [f'--{k} {v}' for k, v in result['args'].items()])}`"
        f" ({result['seconds']:.0f} s on {result['machine']['cpus']} CPUs).",
        "",
        "| faults injected | sessions completed | items lost | items duplicated | recorded steps not replayed |",
        "|---|---|---|---|---|",
        f"| {result['faults_injected']} | {result['sessions_completed']} of {result['sessions']} | "
        f"{result['items_lost']} | {result['items_duplicated']} | {result['steps_not_replayed']} |",
        "",
        f"Faults by kind: {faults}.",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--minutes", type=float, default=20, help="stop injecting after this long")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    path = _results.write_json("chaos.json", result)
    _results.update_block("chaos", readme_block(result))
    print(f"{result['faults_injected']} faults, {result['sessions_completed']}/{result['sessions']} sessions "
          f"completed, {result['items_lost']} lost, {result['items_duplicated']} duplicated -> {path}")
    ok = result["sessions_completed"] == result["sessions"] and not result["items_lost"] \
        and not result["items_duplicated"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
