"""Recorded agent sessions driven through the gateway, against the same client calling the
upstream directly.

    .venv/bin/python bench/gateway.py [--files 6] [--budget 16000] [--concurrent 100]

Starts a throwaway local stack (Temporal dev server, PostgreSQL), a worker and the API, each
its own process as deployed (``lanes worker``, ``lanes api``; in one process their event
loops and the benchmark's would share a core and one lock, and time each other's work), and
a local upstream speaking Chat Completions that answers each call of a recorded
session with that session's next recorded answer (instantly, so time measured is the
gateway's own). Each recorded session is played as an unchanged agent would: its whole
conversation sent on every call (system, task, every answer and every tool output so far),
through the gateway, or straight to the upstream. Writes ``bench/results/gateway.json``:

- input tokens per upstream request, gateway vs direct (our tokenizer, both sides alike), and
  their ratio: what the agent's provider bill would be, since input dominates agents' cost;
- the time a call takes through the gateway against a direct call to the same upstream, p50
  and p99, per call (the gateway stores the turn, plans, calls, keeps the answer), with
  ``--agent-ms`` between calls (the agent running its tools: the answer's items are appended
  to the session then), and back to back (each call waits for the previous answer's append);
- ``--concurrent`` conversations at once (same system prompt, different tasks), each checked
  for being answered from its own session only (misrouted: an answer or a stored turn that
  belongs to another conversation).

What it cannot see: a real provider's latency and prompt cache (the upstream answers at once
and bills nothing), recall rounds (the recorded model never calls recall_observation; they add
upstream calls), and answers that differ from the recording (the conversation is the
recording's whatever the bounded request showed).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import _results
import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from gateway_report import readme_block

from activities.tokens import count_message_tokens
from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, iter_trajectories
from worker.api.gateway.timing import parse_header
from worker.local.stack import Stack, free_port
from workflows.contract.lane_events import CONTINUATION_MISSED

TOKEN, TENANT = "bench-gateway-token-0123456789", "bench"
COUNT_MODEL = "gpt-4o-mini"  # one tokenizer for both sides
CACHE_READ_PRICES = (0.1, 0.5)  # a cached input token's price, of an uncached one's: Anthropic's, OpenAI's
STREAM_GAP_SECONDS = 0.05  # between a streamed answer's first chunk and the rest


class RecordedUpstream:
    """Answers the n-th call for model ``rec-<i>`` with recording i's n-th turn."""

    def __init__(self) -> None:
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.sent_tokens: dict[str, list[int]] = {}
        self.seen: dict[str, list[str]] = {}  # model -> the task text of each request (misrouting check)
        self.lock = threading.Lock()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            body = await request.json()
            model = body["model"]
            tokens = sum(count_message_tokens(m, COUNT_MODEL) for m in body["messages"])
            with self.lock:
                self.sent_tokens.setdefault(model, []).append(tokens)
                self.seen.setdefault(model, []).append(json.dumps(body["messages"]))
                script = self.answers.get(model, [])
                message = script.pop(0) if script else {"role": "assistant", "content": "done"}
            if body.get("stream"):
                return StreamingResponse(self._chunks(model, message, tokens), media_type="text/event-stream")
            return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}}

        self.app = app

    @staticmethod
    async def _chunks(model: str, message: dict[str, Any], tokens: int):
        """A text answer as Chat Completions chunks: the first at once, the rest after
        STREAM_GAP_SECONDS (so the first byte and the whole answer are told apart)."""
        def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict | None = None) -> bytes:
            data = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage is not None:
                data["usage"] = usage
            return f"data: {json.dumps(data)}\n\n".encode()
        yield chunk({"role": "assistant", "content": ""})
        await asyncio.sleep(STREAM_GAP_SECONDS)
        yield chunk({"content": message.get("content") or "done"})
        yield chunk({}, "stop", {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1})
        yield b"data: [DONE]\n\n"


def serve(app: Any) -> tuple[uvicorn.Server, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, sock.getsockname()[1]


def answer_of(turn: Any, n: int, tool_calls: bool = True) -> dict[str, Any]:
    """The recorded answer; a text-protocol recording's (its actions in its text) without calls."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.assistant_text or None}
    if turn.tool_calls and tool_calls:
        message["tool_calls"] = [{"id": c.id or f"call-{n}-{i}", "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                                 for i, c in enumerate(turn.tool_calls)]
    return message


def followers(turn: Any, message: dict[str, Any]) -> list[dict[str, Any]]:
    """What the agent sends after an answer: its tool outputs, then any user text."""
    ids = [c["id"] for c in message.get("tool_calls") or ()]
    out: list[dict[str, Any]] = []
    for n, result in enumerate(turn.results):
        if result.render_role == "tool" and n < len(ids):
            out.append({"role": "tool", "tool_call_id": ids[n], "content": result.output})
        else:
            out.append({"role": "user", "content": result.output})
    for n in range(len(out), len(ids)):  # a call the recording has no output for
        out.append({"role": "tool", "tool_call_id": ids[n], "content": "(no output recorded)"})
    out += [{"role": "user", "content": text} for text in turn.user_after]
    return out


async def play(http: httpx.AsyncClient, url: str, trajectory: Trajectory, model: str, budget: int,
               conversation_id: str | None = None, agent_ms: float = 0.0) -> dict[str, Any]:
    """The recording as an unchanged agent sends it; ``agent_ms``: the agent's own time after
    each answer (its tools running), not counted in the call's."""
    messages: list[dict[str, Any]] = ([{"role": "system", "content": trajectory.system}] if trajectory.system
                                      else []) + [{"role": "user", "content": trajectory.task}]
    full, times, sessions = [], [], set()
    phases: list[dict[str, float]] = []  # each answer's Server-Timing (the gateway's; none direct)
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Lanes-Budget-Tokens": str(budget)}
    if conversation_id:
        headers["X-Lanes-Conversation"] = conversation_id
    for turn in trajectory.turns:
        full.append(sum(count_message_tokens(m, COUNT_MODEL) for m in messages))
        started = time.perf_counter()
        response = await http.post(url, json={"model": model, "messages": messages}, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            return {"error": f"HTTP {response.status_code}: {response.text[:300]}", "calls": len(times)}
        sessions.add(response.headers.get("x-lanes-session"))
        if "server-timing" in response.headers:
            phases.append(parse_header(response.headers["server-timing"]))
        message = response.json()["choices"][0]["message"]
        message = {k: v for k, v in message.items() if v is not None}
        messages += [message, *followers(turn, message)]
        if agent_ms:
            await asyncio.sleep(agent_ms / 1000)
    return {"full_tokens": full, "ms": times, "sessions": sorted(s for s in sessions if s), "phases": phases}


def cached_tokens(requests: list[str]) -> int:
    """Tokens a provider's prompt cache would serve: of each request, its leading messages equal
    to the previous request's (the JSON of each request's messages, in order)."""
    cached, previous = 0, list[Any]()
    for body in requests:
        messages = json.loads(body)
        same = 0
        while same < min(len(previous), len(messages)) and previous[same] == messages[same]:
            same += 1
        cached += sum(count_message_tokens(m, COUNT_MODEL) for m in messages[:same])
        previous = messages
    return cached


def cost_with_cache(files: list[dict[str, Any]], read_price: float) -> float:
    """Input cost through the gateway against direct, cached tokens billed at ``read_price`` of the
    input price (cache writes at the input price: Anthropic's 1.25x write premium is left out)."""
    def cost(side: str) -> float:
        return sum(f[f"{side}_tokens"] - (1 - read_price) * f[f"{side}_cached"] for f in files)
    return round(cost("gateway") / max(1.0, cost("direct")), 3)


def call_ms(timings: dict[str, list[float]], agent_ms: float) -> dict[str, Any]:
    gateway, direct = timings[f"gateway {agent_ms:g}"], timings[f"direct {agent_ms:g}"]
    return {"agent_ms": agent_ms, "gateway_p50": pct(gateway, 0.5), "gateway_p99": pct(gateway, 0.99),
            "direct_p50": pct(direct, 0.5), "direct_p99": pct(direct, 0.99),
            "added_p50": round(pct(gateway, 0.5) - pct(direct, 0.5), 2),
            "added_p99": round(pct(gateway, 0.99) - pct(direct, 0.99), 2), "calls": len(gateway)}


def phase_p50(answers: list[dict[str, float]]) -> dict[str, float]:
    """Each phase's median over the calls that took it (worker/api/gateway/timing.py), in the
    order calls take them."""
    names = list(dict.fromkeys(name for timing in answers for name in timing))
    return {name: pct([timing[name] for timing in answers if name in timing], 0.5) for name in names}


async def ready(url: str, seconds: float = 60.0) -> None:
    """Wait until the API process answers ``url``."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the API did not become ready at {url}")
            await asyncio.sleep(0.2)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


async def gateway_stack(stack: Stack, tmp: Path, upstream: RecordedUpstream, queue: str) -> tuple[Any, int, int]:
    """``upstream`` served, then a worker and the API spawned (each a process of its own, on task
    queue ``queue``-<random>) and ready: (the upstream's server, its port, the API's port)."""
    up_server, up_port = serve(upstream.app)
    api_port = free_port()
    env = {"LANES_TASK_QUEUE": f"{queue}-{uuid.uuid4().hex[:6]}", "LANES_DATA_DIR": str(tmp / "data"),
           "LANES_API_HOST": "127.0.0.1", "LANES_API_PORT": str(api_port), "LANES_API_TOKENS": f"{TENANT}:{TOKEN}",
           "LANES_GATEWAY_OPENAI_BASE_URL": f"http://127.0.0.1:{up_port}/v1", "LANES_GATEWAY_OPENAI_API_KEY": "sk-bench"}
    stack.spawn("worker", [sys.executable, "-m", "worker.worker"], env)
    stack.spawn("api", [sys.executable, "-m", "worker.api.main", "--log-level", "warning"], env)
    await ready(f"http://127.0.0.1:{api_port}/readyz")
    return up_server, up_port, api_port


async def run(args: argparse.Namespace, stack: Stack, tmp: Path) -> dict[str, Any]:
    upstream = RecordedUpstream()
    up_server, up_port, api_port = await gateway_stack(stack, tmp, upstream, "bench-gw")
    gateway_url = f"http://127.0.0.1:{api_port}/gateway/openai/v1/chat/completions"
    direct_url = f"http://127.0.0.1:{up_port}/v1/chat/completions"
    trajectories = [t for t in iter_trajectories([args.root]) if t.turns]
    trajectories = trajectories[:: max(1, len(trajectories) // args.files)][: args.files]
    per_file: list[dict[str, Any]] = []
    timings: dict[str, list[float]] = {}  # "<route> <agent ms>" -> call times
    phases: dict[str, list[dict[str, float]]] = {}  # "<agent ms>" -> the gateway's answers' Server-Timing
    async with httpx.AsyncClient(timeout=120) as http:
        for i, trajectory in enumerate(trajectories):
            for (route, url), agent_ms in itertools.product((("gateway", gateway_url), ("direct", direct_url)),
                                                            (args.agent_ms, 0.0)):
                model = f"rec-{i}-{route}-{agent_ms:g}"
                upstream.answers[model] = [answer_of(turn, n, trajectory.tool_protocol == "tool_calls")
                                           for n, turn in enumerate(trajectory.turns)]
                played = await play(http, url, trajectory, model, args.budget, conversation_id=model, agent_ms=agent_ms)
                if "error" in played:
                    raise SystemExit(f"{trajectory.id} via {route}: {played['error']}")
                timings.setdefault(f"{route} {agent_ms:g}", []).extend(played["ms"])
                if route == "gateway":
                    phases.setdefault(f"{agent_ms:g}", []).extend(played["phases"])
                if route == "gateway" and agent_ms == args.agent_ms:
                    sent = upstream.sent_tokens[model]
                    per_file.append({"id": trajectory.id, "calls": len(sent), "sessions": len(played["sessions"]),
                                     "gateway_tokens": sum(sent), "direct_tokens": sum(played["full_tokens"]),
                                     "gateway_cached": cached_tokens(upstream.seen[model]),
                                     # the agent's own requests only ever append: each holds the last whole
                                     "direct_cached": sum(played["full_tokens"][:-1]),
                                     "max_request": max(sent), "over_budget": sum(t > args.budget for t in sent)})
            print(f"  {trajectory.id}: {per_file[-1]['gateway_tokens'] / per_file[-1]['direct_tokens']:.3f}x",
                  file=sys.stderr)
        concurrent = await misrouting(http, gateway_url, upstream, trajectories[0], args.concurrent)
        streaming = await first_bytes(http, gateway_url, direct_url, upstream, args.stream_calls, args.agent_ms)
        long = await long_conversation(http, gateway_url, upstream, args.long_calls, args.budget, args.out_long)
    if long.get("session"):
        long.update(await largest_payloads(stack, long["session"]))
    missed = await continuations_missed(stack)
    up_server.should_exit = True
    gateway_total = sum(f["gateway_tokens"] for f in per_file)
    direct_total = sum(f["direct_tokens"] for f in per_file)
    return {
        "driver": "bench/gateway.py", "args": {k: str(v) for k, v in vars(args).items() if k not in ("out", "out_long")},
        "machine": _results.machine(), "sources": _results.sources_digest(),
        "files": per_file,
        "input_tokens": {"gateway": gateway_total, "direct": direct_total,
                         "ratio": round(gateway_total / max(1, direct_total), 4)},
        "cached_share": {side: round(sum(f[f"{side}_cached"] for f in per_file) / max(1, total), 3)
                         for side, total in (("gateway", gateway_total), ("direct", direct_total))},
        "cost_with_cache": {str(price): cost_with_cache(per_file, price) for price in CACHE_READ_PRICES},
        "over_budget_requests": sum(f["over_budget"] for f in per_file),
        "call_ms": {**call_ms(timings, args.agent_ms), "phases_p50": phase_p50(phases[f"{args.agent_ms:g}"]),
                    **continued_calls(phases[f"{args.agent_ms:g}"])},
        "call_ms_back_to_back": {**call_ms(timings, 0.0), "phases_p50": phase_p50(phases["0"]),
                                 **continued_calls(phases["0"])},
        "continuations_missed": missed,
        "concurrent": concurrent,
        "streaming": streaming,
        "long_conversation": long,
    }


def continued_calls(phases: list[dict[str, float]]) -> dict[str, int]:
    """How many of the calls (a conversation's first left out: it opens its session) went
    upstream with no workflow update first: their ``Server-Timing`` has no ``step``."""
    calls = [p for p in phases if "open" not in p]
    return {"continued": sum("step" not in p for p in calls), "not_opening": len(calls)}


async def continuations_missed(stack: Stack) -> int:
    """Requests sent continued that their session would not have planned (every session of the
    run: the stack is this run's own)."""
    import asyncpg

    connection = await asyncpg.connect(stack.dsn)
    try:
        return int(await connection.fetchval("SELECT count(*) FROM events WHERE kind = $1", CONTINUATION_MISSED))
    finally:
        await connection.close()


async def misrouting(http: httpx.AsyncClient, url: str, upstream: RecordedUpstream, trajectory: Trajectory,
                     count: int) -> dict[str, Any]:
    """``count`` conversations at once, one recording each with its own task text; an upstream
    request that shows another conversation's task, or two conversations in one session, is misrouted."""
    turns = trajectory.turns[:3]
    plays = []
    for n in range(count):
        variant = trajectory.model_copy(update={"task": f"[conversation {n}] {trajectory.task}", "turns": turns})
        model = f"conc-{n}"
        upstream.answers[model] = [answer_of(turn, k, trajectory.tool_protocol == "tool_calls")
                                   for k, turn in enumerate(turns)]
        plays.append(play(http, url, variant, model, 16_000))
    started = time.perf_counter()
    results = await asyncio.gather(*plays)
    seconds = time.perf_counter() - started
    errors = [r["error"] for r in results if "error" in r]
    misrouted = 0
    examples: list[dict[str, Any]] = []
    owners: dict[str, list[int]] = {}
    for n, result in enumerate(results):
        for sid in result.get("sessions", []):
            owners.setdefault(sid, []).append(n)
    for n, result in enumerate(results):
        mine = f"[conversation {n}] "
        foreign = [m for m in range(count) if m != n and any(f"[conversation {m}] " in s
                                                             for s in upstream.seen.get(f"conc-{n}", []))]
        missing = not all(mine in s for s in upstream.seen.get(f"conc-{n}", []))
        shared = [m for sid in result.get("sessions", []) for m in owners[sid] if m != n]
        if foreign or missing or shared or len(result.get("sessions", [])) != 1:
            misrouted += 1
            if len(examples) < 5:
                examples.append({"conversation": n, "sessions": result.get("sessions"), "saw": foreign[:3],
                                 "own_task_missing": missing, "shares_with": shared[:3]})
    sessions = {s for r in results for s in r.get("sessions", [])}
    return {"conversations": count, "calls": count * len(turns), "seconds": round(seconds, 2), "errors": errors[:5],
            "misrouted": misrouted, "sessions": len(sessions), "examples": examples}


async def first_bytes(http: httpx.AsyncClient, gateway_url: str, direct_url: str, upstream: RecordedUpstream,
                      calls: int, agent_ms: float) -> dict[str, Any]:
    """Streamed calls of one conversation each way (a new user turn each, ``agent_ms`` after
    each answer): the time to the first event and to the end, through the gateway and direct
    (the upstream waits STREAM_GAP_SECONDS after its first). The conversation's first call,
    which opens its session, is reported alone."""
    timings: dict[str, dict[str, list[float]]] = {}
    phases: list[dict[str, float]] = []  # the gateway's Server-Timing, the opening call's left out
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for route, url in (("gateway", gateway_url), ("direct", direct_url)):
        first, whole = [], []
        model = f"stream-{route}"
        upstream.answers[model] = [{"role": "assistant", "content": f"streamed answer {n}"} for n in range(calls + 1)]
        messages = [{"role": "system", "content": "You are terse."}]
        for n in range(calls + 1):
            messages.append({"role": "user", "content": f"stream {n} {route}"})
            body = {"model": model, "stream": True, "messages": messages}
            started = time.perf_counter()
            text = ""
            async with http.stream("POST", url, json=body, headers=headers) as response:
                seen = None
                async for line in response.aiter_lines():
                    if line.startswith("data:") and seen is None:
                        seen = time.perf_counter()
                    if line.startswith("data: {"):
                        for choice in json.loads(line[6:]).get("choices") or []:
                            text += (choice.get("delta") or {}).get("content") or ""
                if response.status_code != 200 or seen is None:
                    raise SystemExit(f"streamed call via {route}: HTTP {response.status_code}")
                if n and "server-timing" in response.headers:
                    phases.append(parse_header(response.headers["server-timing"]))
            first.append((seen - started) * 1000)
            whole.append((time.perf_counter() - started) * 1000)
            messages.append({"role": "assistant", "content": text})
            await asyncio.sleep(agent_ms / 1000)
        timings[route] = {"first": first[1:], "whole": whole[1:], "opening": first[:1]}
    g, d = timings["gateway"], timings["direct"]
    return {"calls": calls, "gap_ms": STREAM_GAP_SECONDS * 1000, "agent_ms": agent_ms,
            "opening_call_first_byte": {"gateway": round(g["opening"][0], 2), "direct": round(d["opening"][0], 2)},
            "first_byte_p50": {"gateway": pct(g["first"], 0.5), "direct": pct(d["first"], 0.5)},
            "first_byte_p99": {"gateway": pct(g["first"], 0.99), "direct": pct(d["first"], 0.99)},
            "added_first_byte_p50": round(pct(g["first"], 0.5) - pct(d["first"], 0.5), 2),
            "whole_p50": {"gateway": pct(g["whole"], 0.5), "direct": pct(d["whole"], 0.5)},
            "phases_p50": phase_p50(phases)}


async def long_conversation(http: httpx.AsyncClient, url: str, upstream: RecordedUpstream, calls: int,
                            budget: int, progress: Path | None) -> dict[str, Any]:
    """One conversation of ``calls`` calls, each a short user turn and a short answer, the whole
    conversation sent every time: call time and request size as it grows, the largest upstream
    request, and how many sessions hold it (one). ``progress``: rewritten every 250 calls."""
    model = "long-conversation"
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You keep a running log. Answer briefly."}]
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Lanes-Budget-Tokens": str(budget)}
    times: list[float] = []
    sizes: list[int] = []
    phases: list[dict[str, float]] = []  # each answer's Server-Timing: where the growth goes
    sessions: set[str | None] = set()
    error: str | None = None
    started = time.perf_counter()

    def summary() -> dict[str, Any]:
        window = max(1, min(100, len(times) // 10))
        sent = upstream.sent_tokens.get(model, [])
        return {"calls": len(times), "asked": calls, "seconds": round(time.perf_counter() - started, 1),
                "sessions": len(sessions), "session": next(iter(sessions), None), "error": error,
                "first_calls_ms_p50": pct(times[:window], 0.5), "last_calls_ms_p50": pct(times[-window:], 0.5),
                "last_calls_ms_p99": pct(times[-window:], 0.99), "window": window,
                "last_body_bytes": sizes[-1] if sizes else 0,
                "largest_upstream_request_tokens": max(sent, default=0),
                "over_budget_requests": sum(t > budget for t in sent),
                "ms_by_thousand": [pct(times[k:k + 1000], 0.5) for k in range(0, len(times), 1000)],
                "phases_by_thousand": [phase_p50(phases[k:k + 1000]) for k in range(0, len(phases), 1000)]}

    for n in range(calls):
        messages.append({"role": "user", "content": f"Entry {n}: the build of commit {n:05d} passed in {n % 97} s."})
        upstream.answers[model] = [{"role": "assistant", "content": f"Logged entry {n}."}]
        body = json.dumps({"model": model, "messages": messages})
        sizes.append(len(body))
        call_started = time.perf_counter()
        response = await http.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
        times.append((time.perf_counter() - call_started) * 1000)
        if response.status_code != 200:
            error = f"call {n}: HTTP {response.status_code}: {response.text[:300]}"
            break
        sessions.add(response.headers.get("x-lanes-session"))
        if "server-timing" in response.headers:
            phases.append(parse_header(response.headers["server-timing"]))
        messages.append({"role": "assistant", "content": response.json()["choices"][0]["message"]["content"]})
        if progress is not None and (n + 1) % 250 == 0:
            progress.write_text(json.dumps(summary(), indent=1) + "\n")
            print(f"  long conversation: {n + 1} calls, last p50 {summary()['last_calls_ms_p50']} ms", file=sys.stderr)
    return summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=6, help="recorded sessions (spread over the folder)")
    parser.add_argument("--root", default=str(Path(DEFAULT_TRAJECTORY_ROOT) / "mini-swe-agent-gemini"))
    parser.add_argument("--budget", type=int, default=16_000)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--stream-calls", type=int, default=50, help="streamed calls for the first-byte time")
    parser.add_argument("--long-calls", type=int, default=10_000, help="calls through one conversation")
    parser.add_argument("--agent-ms", type=float, default=100.0,
                        help="the agent's own time after each answer (its tools), not counted in the call's")
    parser.add_argument("--out-long", type=Path, help="where the long conversation's progress is written")
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanes-gateway-") as tmp, Stack(Path(tmp)) as stack:
        result = asyncio.run(run(args, stack, Path(tmp)))
    _results.publish(result, args.out, "gateway.json", "gateway", readme_block(result))


async def largest_payloads(stack: Stack, session_id: str) -> dict[str, Any]:
    """The session's runs and its largest history event (payloads as stored: compressed past
    64 KiB): Temporal warns past 512 KiB and refuses a payload over 2 MiB."""
    from worker.settings import Settings
    from worker.worker import connect

    client = await connect(Settings(temporal_address=stack.temporal_address))
    largest, kind, runs = 0, "", 0
    async for run in client.list_workflows(f"WorkflowId = '{session_id}'"):
        runs += 1
        async for event in client.get_workflow_handle(session_id, run_id=run.run_id).fetch_history_events():
            if event.ByteSize() > largest:
                largest, kind = event.ByteSize(), (event.WhichOneof("attributes") or "").removesuffix("_event_attributes")
    return {"runs": runs, "largest_event_bytes": largest, "largest_event": kind}


if __name__ == "__main__":
    main()
