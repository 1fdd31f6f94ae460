"""A conversation's first call through the gateway: what opening its session costs.

    .venv/bin/python bench/gateway_opening.py [--conversations 40] [--agent-ms 100]

The first call of a conversation the gateway has not seen starts a session (a workflow that
registers it, measures its tool definitions and stores its system prompt) before its first step
can plan; every later call finds the session open. This driver starts the stack as
``bench/gateway.py`` does (a throwaway local stack, the worker and the API each in its own
process, a local upstream that answers at once), then opens ``--conversations`` new
conversations one after another, each a recorded session's system prompt and a task of its
own, and sends each a second call after ``--agent-ms`` (the agent running its tools). The same
calls go straight to the upstream, alternating call by call. Writes
``bench/results/gateway_opening.json`` and its block in ``bench/results/README.md``: per call
p50/p99 through the gateway and direct, and the gateway's phases (its answers'
``Server-Timing``) for the opening calls and the second calls.

What it cannot see: a real provider's latency, conversations opened at once (the concurrent part
of ``bench/gateway.py`` opens 100), and a Temporal cluster (the dev server shares these cores).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import _results
import httpx
from gateway import TOKEN, RecordedUpstream, answer_of, followers, gateway_stack, pct, phase_p50

from recordings import DEFAULT_TRAJECTORY_ROOT, iter_trajectories
from worker.api.gateway.timing import parse_header
from worker.local.stack import Stack


async def call(http: httpx.AsyncClient, url: str, model: str, messages: list[dict[str, Any]]) -> tuple[float, dict]:
    """One call: its time in ms and its answer; the gateway's Server-Timing under ``"timing"``."""
    started = asyncio.get_running_loop().time()
    response = await http.post(url, json={"model": model, "messages": messages},
                               headers={"Authorization": f"Bearer {TOKEN}"})
    ms = (asyncio.get_running_loop().time() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}: {response.text[:300]}")
    answer = response.json()["choices"][0]["message"]
    answer = {k: v for k, v in answer.items() if v is not None}
    if "server-timing" in response.headers:
        answer["timing"] = parse_header(response.headers["server-timing"])
    return ms, answer


async def run(args: argparse.Namespace, stack: Stack, tmp: Path) -> dict[str, Any]:
    upstream = RecordedUpstream()
    up_server, up_port, api_port = await gateway_stack(stack, tmp, upstream, "bench-open")
    urls = {"gateway": f"http://127.0.0.1:{api_port}/gateway/openai/v1/chat/completions",
            "direct": f"http://127.0.0.1:{up_port}/v1/chat/completions"}
    recordings = [t for t in iter_trajectories([args.root]) if len(t.turns) >= 2 and t.system]
    times: dict[str, list[float]] = {f"{route} {which}": [] for route in urls for which in ("opening", "second")}
    phases: dict[str, list[dict[str, float]]] = {"opening": [], "second": []}
    async with httpx.AsyncClient(timeout=120) as http:
        for n in range(args.warm + args.conversations):
            recording = recordings[n % len(recordings)]
            tools = recording.tool_protocol == "tool_calls"
            for route, url in urls.items():
                model = f"open-{n}-{route}"
                upstream.answers[model] = [answer_of(turn, k, tools) for k, turn in enumerate(recording.turns[:2])]
                messages: list[dict[str, Any]] = [{"role": "system", "content": recording.system},
                            {"role": "user", "content": f"[conversation {n}] {recording.task}"}]
                for which in ("opening", "second"):
                    ms, answer = await call(http, url, model, messages)
                    timing = answer.pop("timing", None)
                    if n >= args.warm:
                        times[f"{route} {which}"].append(ms)
                        if timing is not None:
                            phases[which].append(timing)
                    messages += [answer, *followers(recording.turns[0], answer)]
                    await asyncio.sleep(args.agent_ms / 1000)
    up_server.should_exit = True
    return {"driver": "bench/gateway_opening.py",
            "args": {k: str(v) for k, v in vars(args).items() if k != "out"},
            "machine": _results.machine(), "sources": _results.sources_digest(),
            "calls": {which: {"gateway_p50": pct(times[f"gateway {which}"], 0.5),
                              "gateway_p99": pct(times[f"gateway {which}"], 0.99),
                              "direct_p50": pct(times[f"direct {which}"], 0.5),
                              "direct_p99": pct(times[f"direct {which}"], 0.99),
                              "added_p50": round(pct(times[f"gateway {which}"], 0.5)
                                                 - pct(times[f"direct {which}"], 0.5), 2),
                              "phases_p50": phase_p50(phases[which]), "calls": len(times[f"gateway {which}"])}
                      for which in ("opening", "second")}}


def readme_block(result: dict[str, Any]) -> str:
    rows = []
    for which, label in (("opening", "first call (opens the session)"), ("second", "second call")):
        c = result["calls"][which]
        spent = ", ".join(f"{name} {ms}" for name, ms in c["phases_p50"].items())
        rows.append(f"| {label} | {c['gateway_p50']} / {c['gateway_p99']} | {c['direct_p50']} / {c['direct_p99']} "
                    f"| {c['added_p50']} | {spent} |")
    table = "\n".join(rows)
    return f"""## A conversation's first call through the gateway (`bench/gateway_opening.py`)

`.venv/bin/python bench/gateway_opening.py --conversations {result['args']['conversations']}`: new conversations
opened one after another (a recorded session's system prompt, a task of their own), each sent a
second call {float(result['args']['agent_ms']):g} ms after its first answer; the same calls straight to the
upstream, which answers at once. Milliseconds per call, p50 / p99; phases from the gateway's
`Server-Timing`, p50.

| call | through the gateway | direct | added at p50 | gateway phases (p50) |
|---|---:|---:|---:|---|
{table}

The first call's `open` starts the session's workflow; its `step` waits for the session's start
(registering it, measuring the tool definitions, storing the system prompt) and then plans.
Cannot see: a real provider, conversations opened at once, a Temporal cluster.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=40, help="new conversations, each way")
    parser.add_argument("--warm", type=int, default=3, help="conversations first, not counted")
    parser.add_argument("--root", default=str(Path(DEFAULT_TRAJECTORY_ROOT) / "mini-swe-agent-gemini"))
    parser.add_argument("--agent-ms", type=float, default=100.0, help="the agent's own time after each answer")
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanes-opening-") as tmp, Stack(Path(tmp)) as stack:
        result = asyncio.run(run(args, stack, Path(tmp)))
    _results.publish(result, args.out, "gateway_opening.json", "gateway-opening", readme_block(result))


if __name__ == "__main__":
    main()
