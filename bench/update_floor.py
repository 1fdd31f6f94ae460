"""The floor under a gateway call: what one workflow update costs on this machine's Temporal dev
server when the workflow does nothing else, shaped as the gateway's step is.

    .venv/bin/python bench/update_floor.py [--calls 200] [--pause-ms 100]

A gateway call takes its step through one workflow update (worker/api/gateway/service.py): the
update runs a local activity that measures the new turns, plans, and answers while the turns'
writes are scheduled as activities. This driver starts the same Temporal dev server the local
stack runs (worker/local/stack.py), a worker process with the project's data converter and
workflow runner, and a workflow whose updates do no work of their own, in four shapes:

- ``bare``: the update returns;
- ``schedules``: it schedules one activity (a no-op) and returns without waiting for it;
- ``local``: it runs one local activity (a no-op) and returns its result;
- ``step``: a local activity, then one activity scheduled: the gateway step's shape;
- ``activity``: an activity run and waited for, so the answer comes from a workflow task that
  follows the activity's completion: the path each model and tool call of a hosted turn takes.

Each shape is called ``--calls`` times from a client in this process, ``--pause-ms`` apart (an
agent's own time between calls; 0: back to back), alternating shapes call by call so the load
of the machine falls on each alike. Writes ``bench/results/update_floor.json`` and its block in
``bench/results/README.md``. Set against the gateway bench's ``step`` phase (its answers'
``Server-Timing``), the ``step`` shape's p50 is what remains of that phase when the engine, the
store and the payloads cost nothing.

What it cannot see: a Temporal cluster (the dev server's SQLite and the worker share these
cores), larger payloads, and a workflow with a long history (this one's is short and sticky).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _results
from _floor_workflow import SHAPES, UpdateFloor, noop
from gateway import pct
from temporalio.client import Client
from temporalio.worker import Worker

from worker.local.stack import start_temporal
from worker.payload_codec import DATA_CONVERTER
from worker.workflow_runner import workflow_runner


async def serve(address: str, task_queue: str) -> None:
    """The worker process: this module's workflow and activity, as the product's worker runs them."""
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    await Worker(client, task_queue=task_queue, workflows=[UpdateFloor], activities=[noop],
                 workflow_runner=workflow_runner()).run()


async def measure(address: str, task_queue: str, calls: int, pause: float) -> dict[str, list[float]]:
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    handle = await client.start_workflow(UpdateFloor.run, id=f"floor-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
    for shape in SHAPES * 5:  # warm: the worker's cache, the server's, the connection
        await handle.execute_update(UpdateFloor.call, shape)
    times: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    for _ in range(calls):
        for shape in SHAPES:
            started = time.perf_counter()
            await handle.execute_update(UpdateFloor.call, shape)
            times[shape].append((time.perf_counter() - started) * 1000)
            if pause:
                await asyncio.sleep(pause)
    await handle.signal(UpdateFloor.stop)
    return times


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lanes-floor-") as tmp:
        temporal = start_temporal(Path(tmp), port=None)
        task_queue = f"floor-{uuid.uuid4().hex[:6]}"
        worker = subprocess.Popen([sys.executable, __file__, "--serve", temporal.address, task_queue])
        try:
            levels = {}
            for pause_ms in (args.pause_ms, 0.0):
                times = asyncio.run(measure(temporal.address, task_queue, args.calls, pause_ms / 1000))
                levels[f"{pause_ms:g}"] = {shape: {"p50": pct(v, 0.5), "p99": pct(v, 0.99),
                                                   "mean": round(statistics.fmean(v), 2), "calls": len(v)}
                                           for shape, v in times.items()}
        finally:
            worker.terminate()
            worker.wait(10)
            temporal.stop()
    return {"driver": "bench/update_floor.py", "args": {"calls": args.calls, "pause_ms": args.pause_ms},
            "machine": _results.machine(), "sources": _results.sources_digest(), "pause_ms": levels}


def readme_block(result: dict[str, Any]) -> str:
    paused, back = result["pause_ms"][f"{result['args']['pause_ms']:g}"], result["pause_ms"]["0"]
    rows = "\n".join(f"| `{shape}` | {paused[shape]['p50']} / {paused[shape]['p99']} | "
                     f"{back[shape]['p50']} / {back[shape]['p99']} |" for shape in SHAPES)
    return f"""## The floor under a gateway call: one workflow update (`bench/update_floor.py`)

`.venv/bin/python bench/update_floor.py --calls {result['args']['calls']}`: a workflow whose updates do
nothing but Temporal's machinery, on the local stack's dev server, a worker process with the
product's converter and runner, the client in the driver. Milliseconds per update, p50 / p99, over
{paused['bare']['calls']} calls of each shape, shapes alternating call by call.

| update | {result['args']['pause_ms']:g} ms between calls (an agent's pause) | back to back |
|---|---:|---:|
{rows}

`step` is the gateway step's shape (a local activity measures the turns, their writes are
scheduled with the answer): the gateway bench's `step` phase less this is what the engine, the
store and the payloads cost. `activity` waits for an activity and the workflow task after it,
as each model and tool call of a hosted turn does (the dev server runs with
`history.transferProcessorMaxPollRPS=100`, `worker/local/stack.py`). Cannot see: a Temporal
cluster, larger payloads, long histories.
"""


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        asyncio.run(serve(sys.argv[2], sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="updates of each shape, at each pause")
    parser.add_argument("--pause-ms", type=float, default=100.0, help="between calls (the agent's own time)")
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    result = run(args)
    _results.publish(result, args.out, "update_floor.json", "update-floor", readme_block(result))


if __name__ == "__main__":
    main()
