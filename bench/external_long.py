"""A 10,000-step external-agent session through the HTTP API, and the one-call step form
against the two-call form, side by side in one run.

    .venv/bin/python bench/external_long.py [--steps 10000] [--compare 400]

Starts a throwaway local stack as ``lanes dev`` does (Temporal dev server, embedded
PostgreSQL, one worker process and the API process on free ports) and drives it with the
HTTP client, as an external agent would: each step appends the agent's answer (a tool call)
and the tool's output, and gets the next request to send. Reported:

- the long session: every step's outcome (any error ends it), the runs it went through
  (continue-as-new) with each run's history events and bytes, per-step latency p50/p99 by
  1,000-step bucket;
- latency per step of ``POST /steps`` (one call) and ``POST /items`` + ``GET /request``
  (two calls), ``--compare`` steps each, alternating on two fresh sessions.

Writes ``bench/results/external-long.json`` and its block in ``bench/results/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _results

from lanes_client import AsyncLanesClient, assistant_item, tool_result_item, user_item
from lanes_client.schemas import ItemIn
from worker.local.stack import Stack, free_port
from worker.settings import Settings
from worker.worker import connect

BUDGET = 8_000
TOKEN = "bench-token-0123456789"


def exchange(n: int) -> list[ItemIn]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "bash",
                                                            "arguments": json.dumps({"command": f"cat part{n}.txt"})}}
    return [assistant_item({"content": f"Reading part {n}.", "tool_calls": [call]}),
            tool_result_item(f"c{n}", "bash", f"part {n}: " + "data " * 60, 0)]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))] if ordered else 0.0


async def long_session(client: AsyncLanesClient, steps: int) -> tuple[str, list[float]]:
    sid = (await client.create_session(mode="external", budget_tokens=BUDGET, system_prompt="You read files.")).session_id
    await client.step(sid, [user_item("Read every part and summarise.")], step_id="0")
    latencies = []
    for n in range(1, steps):
        started = time.perf_counter()
        out = await client.step(sid, exchange(n), step_id=str(n))
        latencies.append((time.perf_counter() - started) * 1000)
        if not out.request.fits or len(out.item_ids) != 2:
            raise SystemExit(f"step {n}: unexpected answer {out.model_dump_json()[:300]}")
        if n % 1000 == 0:
            print(f"  {n} steps, p50 {statistics.median(latencies[-1000:]):.1f} ms", file=sys.stderr)
    return sid, latencies


async def compare(client: AsyncLanesClient, steps: int) -> dict[str, list[float]]:
    one = (await client.create_session(mode="external", budget_tokens=BUDGET)).session_id
    two = (await client.create_session(mode="external", budget_tokens=BUDGET)).session_id
    await client.step(one, [user_item("go")])
    await client.append_items(two, [user_item("go")])
    times: dict[str, list[float]] = {"one call (POST /steps)": [], "two calls (POST /items + GET /request)": []}
    for n in range(1, steps + 1):
        started = time.perf_counter()
        await client.step(one, exchange(n), step_id=f"c{n}")
        times["one call (POST /steps)"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await client.append_items(two, exchange(n), idempotency_key=f"c{n}")
        await client.next_request(two)
        times["two calls (POST /items + GET /request)"].append((time.perf_counter() - started) * 1000)
    return times


async def runs_of(settings: Settings, session_id: str) -> list[dict]:
    temporal = await connect(settings)
    runs = [r async for r in temporal.list_workflows(f'WorkflowId = "{session_id}"')]
    out = []
    for run in sorted(runs, key=lambda r: r.start_time):
        history = await temporal.get_workflow_handle(session_id, run_id=run.run_id).fetch_history()
        out.append({"events": len(history.events), "bytes": sum(e.ByteSize() for e in history.events),
                    "status": run.status.name if run.status else "UNKNOWN"})
    return out


async def main_async(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="lanes-extlong-") as tmp, Stack(Path(tmp)) as stack:
        port = free_port()
        env = {**stack.env(), "LANES_API_PORT": str(port), "LANES_API_TOKENS": f"bench:{TOKEN}"}
        stack.spawn("worker", [sys.executable, "-m", "worker.worker"], env=env)
        stack.spawn("api", [sys.executable, "-m", "worker.api.main"], env=env)
        settings = Settings(temporal_address=stack.temporal_address, database_url=stack.dsn,
                            data_dir=Path(tmp) / "data")
        async with AsyncLanesClient(f"http://127.0.0.1:{port}", TOKEN, timeout=120) as client:
            for _ in range(300):
                try:
                    await client.ready()
                    break
                except Exception:
                    await asyncio.sleep(0.2)
            started = time.perf_counter()
            sid, latencies = await long_session(client, args.steps)
            seconds = time.perf_counter() - started
            comparison = await compare(client, args.compare)
            raw = await client.list_items(sid, after_seq=-1, limit=1)
        runs = await runs_of(settings, sid)
    buckets = [{"steps": f"{i + 1}-{min(i + 1000, len(latencies))}",
                "p50_ms": round(statistics.median(latencies[i:i + 1000]), 1),
                "p99_ms": round(percentile(latencies[i:i + 1000], 99), 1)} for i in range(0, len(latencies), 1000)]
    forms = {name: {"p50_ms": round(statistics.median(v), 1), "p99_ms": round(percentile(v, 99), 1)}
             for name, v in comparison.items()}
    one, two = (forms[k]["p50_ms"] for k in comparison)
    return {
        "driver": "bench/external_long.py", "steps": args.steps, "seconds": round(seconds, 1), "budget": BUDGET,
        "errors": 0, "first_item": raw.items[0].item_id if raw.items else None,
        "runs": runs, "max_run_events": max(r["events"] for r in runs), "max_run_bytes": max(r["bytes"] for r in runs),
        "latency_buckets": buckets, "compare_steps": args.compare, "forms": forms,
        "two_calls_over_one": round(two / one, 2), "machine": _results.machine(), "cpus": os.cpu_count(),
    }


def readme_block(r: dict) -> str:
    lines = [
        "## External agent: 10,000 steps through the HTTP API",
        "",
        f"Run with `.venv/bin/python bench/external_long.py --steps {r['steps']} --compare {r['compare_steps']}` "
        f"({r['seconds']} s for the long session; budget {r['budget']:,}). Each step: the agent's tool call and its "
        "output appended, the next request returned (`POST /steps`).",
        "",
        f"Completed all {r['steps']:,} steps with {r['errors']} errors over {len(r['runs'])} runs (continue-as-new "
        f"every 500 calls); largest run history {r['max_run_events']:,} events, {r['max_run_bytes'] / 1e6:.1f} MB "
        "(Temporal's limits: 51,200 events, 50 MB).",
        "",
        "| steps | p50 ms | p99 ms |",
        "|---|---:|---:|",
        *[f"| {b['steps']} | {b['p50_ms']} | {b['p99_ms']} |" for b in r["latency_buckets"]],
        "",
        f"One call against two, {r['compare_steps']} steps each, alternating in one run:",
        "",
        "| form | p50 ms | p99 ms |",
        "|---|---:|---:|",
        *[f"| {name} | {f['p50_ms']} | {f['p99_ms']} |" for name, f in r["forms"].items()],
        "",
        f"The two-call form takes {r['two_calls_over_one']}× the one-call form's median.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--compare", type=int, default=400)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    _results.write_json("external-long.json", result)
    _results.update_block("external-long", readme_block(result))
    print(readme_block(result))


if __name__ == "__main__":
    main()
