"""Chaos for external agents: what the API acknowledged is stored, exactly once, under the id
it returned, while the worker is killed or the machine is overloaded.

    .venv/bin/python bench/external_chaos.py [--rounds 20] [--calls 40] [--modes kill,overload] [--seed 1]

Starts a throwaway stack (Temporal dev server, embedded PostgreSQL, two worker processes and
the API process on free ports). Each mode gets an external session of its own and sends it
``--rounds`` rounds of ``--calls`` concurrent calls: appends (``POST /items``) and steps
(``POST /steps``), keyed (``Idempotency-Key``, ``step_id``) and unkeyed, some items with
client item ids, some too large to travel inline (stored by reference first). Every item's
text is unique, so a row can be traced to the call that sent it. Meanwhile:

- ``kill``: a worker is SIGKILLed every ``--kill-every`` seconds and restarted a second
  later (every ``--api-kill-every``-th kill takes the API process instead);
- ``overload``: ``--burners`` processes spin on the CPU and, every ``--pause-every``
  seconds, a worker stalls (SIGSTOP) for ``--pause-seconds``, past the workflow task
  timeout: its tasks go to the other worker, and when it goes on the server refuses the
  completions it still sends ("Task not found"), as on a machine too loaded to keep up.
  Nothing is killed.

A client does what the API's answers allow: a keyed call is retried with the same key until
it is acknowledged; an unkeyed call is retried only after an answer that says it was not
applied (a connection refused, 429, a 503 other than ``outcome_unknown``); a dropped
connection or ``outcome_unknown`` leaves it unknown, and the driver records it as such.

Then every stored row of the session is compared with what was acknowledged:

- lost: an acknowledged id with no row;
- misattributed: an acknowledged id whose row holds another call's text;
- duplicated: a text stored in more than one row;
- applied though refused: the text of a call the API refused as not applied, in a row;
- unlogged: a row without exactly one ``item.added`` event.

Unknown outcomes are counted, never judged (each may hold its text once, or not at all).
Also reported: the worker's and the server's lost workflow tasks (timeouts and failures in
the session's histories), kills, and calls retried. Writes
``bench/results/external-chaos.json`` and its block in ``bench/results/README.md``, or only
``--out`` when given (the test suite runs a small version so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import _results
import asyncpg
import httpx
from temporalio.api.enums.v1 import EventType

from worker.local.stack import Stack, free_port, kill_process
from worker.settings import Settings
from worker.worker import connect

TOKEN = "chaos-token-0123456789"
BUDGET = 32_000  # compacts over a run, and the newest exchanges (some of 20,000 characters) fit
CALL_DEADLINE = 240.0  # a keyed call is retried this long
LARGE_TEXT = 20_000  # above the API's inline limit: stored by reference before the update


@dataclass
class Call:
    """One API call and what the client learned of it."""

    mode: str
    round: int
    index: int
    route: str  # "append" or "step"
    keyed: bool
    items: list[dict]
    outcome: str = "pending"  # acknowledged, refused, unknown
    item_ids: list[str] = field(default_factory=list)
    attempts: int = 0
    last_error: str = ""

    @property
    def key(self) -> str | None:
        return f"{self.mode}-{self.round}-{self.index}" if self.keyed else None

    @property
    def texts(self) -> list[str]:
        return [item["text"] for item in self.items]


def make_items(mode: str, round_: int, index: int, route: str, rng: random.Random) -> list[dict]:
    """The call's items; every text is unique (it names the call and the item)."""
    def text(n: int) -> str:
        tag = f"[{mode} r{round_} c{index} i{n}]"
        size = LARGE_TEXT if rng.random() < 0.1 else rng.randint(20, 400)
        return tag + " " + "x" * max(0, size - len(tag) - 1)

    def client_id(n: int) -> dict:
        return {"item_id": f"cid-{mode}-{round_}-{index}-{n}"} if rng.random() < 0.2 else {}

    if route == "step":
        call_id = f"call-{mode}-{round_}-{index}"
        arguments = json.dumps({"command": f"cat f{index}.txt"})
        return [
            {"kind": "assistant", "text": text(0), **client_id(0),
             "tool_calls": [{"id": call_id, "name": "bash", "arguments": arguments}]},
            {"kind": "tool_result", "text": text(1), "tool_call_id": call_id, "tool_name": "bash", "exit_code": 0,
             **client_id(1)},
        ]
    kind = rng.choice(["user", "assistant"])  # an assistant answer without tool calls opens no call
    return [{"kind": kind, "text": text(n), **client_id(n)} for n in range(rng.randint(1, 2))]


def not_applied(response: httpx.Response) -> bool:
    """The API said the call did nothing (safe to repeat without a key)."""
    if response.status_code == 429:
        return True
    if response.status_code == 503:
        try:
            code = response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return False
        return code != "outcome_unknown"
    return False


def stored_anyway(response: httpx.Response) -> list[str] | None:
    """The item ids a refused step says it stored (422 request_unfit, details.item_ids)."""
    try:
        error = response.json()["error"]
        return next(d["item_ids"] for d in error.get("details") or [] if "item_ids" in d)
    except (ValueError, KeyError, TypeError, StopIteration):
        return None


async def send(http: httpx.AsyncClient, sid: str, call: Call) -> None:
    """Send ``call`` until its outcome is known (or, keyed, until the deadline)."""
    deadline = time.monotonic() + CALL_DEADLINE
    body: dict[str, object] = {"items": call.items}
    headers: dict[str, str] = {}
    if call.route == "append":
        url = f"/v1/sessions/{sid}/items"
        if call.key:
            headers["Idempotency-Key"] = call.key
    else:
        url = f"/v1/sessions/{sid}/steps"
        if call.key:
            body["step_id"] = call.key
    delay = 0.2
    while True:
        call.attempts += 1
        sent = False
        try:
            response = await http.post(url, json=body, headers=headers)
            sent = True
        except httpx.ConnectError as error:  # never reached the API: nothing was applied
            call.last_error = f"connect: {error}"
        except httpx.HTTPError as error:  # sent, answer lost: the API may have applied it
            call.last_error = f"{type(error).__name__}: {error}"
            if not call.keyed:
                call.outcome = "unknown"
                return
        if sent:
            if response.status_code == 200:
                call.outcome, call.item_ids = "acknowledged", response.json()["item_ids"]
                return
            stored = stored_anyway(response)
            if stored is not None:  # a step whose items were stored, its next request refused
                call.outcome, call.item_ids, call.last_error = "acknowledged", stored, response.text[:200]
                return
            call.last_error = f"{response.status_code} {response.text[:200]}"
            if not call.keyed and not not_applied(response):
                # 5xx saying outcome_unknown, or any other answer: the call is settled as the API says
                call.outcome = "unknown" if response.status_code >= 500 else "refused_final"
                return
            if response.status_code < 500 and response.status_code != 429 and response.status_code != 409:
                call.outcome = "refused_final"  # a 4xx for a well-formed call: reported
                return
        if time.monotonic() > deadline:
            call.outcome = "unknown" if call.keyed else "refused"
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


class Faults:
    """The two workers and the API process of the stack, and the faults injected into them."""

    WORKERS = ("worker-a", "worker-b")

    def __init__(self, stack: Stack, env: dict[str, str], rng: random.Random) -> None:
        self.stack, self.env, self.rng = stack, env, rng
        self.procs: dict[str, subprocess.Popen] = {}
        self.kills: Counter[str] = Counter()
        self.pauses = 0
        self.burners: list[subprocess.Popen] = []
        self.starts = 0

    def start(self, name: str) -> None:
        self.starts += 1
        argv = [sys.executable, "-m", "worker.worker"] if name != "api" else \
            [sys.executable, "-m", "worker.api.main", "--log-level", "warning"]
        self.procs[name] = self.stack.spawn(f"{name}-{self.starts}", argv, env=self.env, cwd=_results.REPO)

    def count(self) -> int:
        """Faults so far: kills and stalls."""
        return sum(self.kills.values()) + self.pauses

    async def kill(self, name: str) -> None:
        kill_process(self.procs[name], signal.SIGKILL, grace=5)
        self.kills["api" if name == "api" else "worker"] += 1
        await asyncio.sleep(1.0)
        self.start(name)

    async def pause(self, seconds: float) -> None:
        """Stop a worker (SIGSTOP) past the workflow task timeout, then let it go on: its tasks
        were handed to the other worker meanwhile, and the server refuses their completion."""
        proc = self.procs[self.rng.choice(self.WORKERS)]
        proc.send_signal(signal.SIGSTOP)
        self.pauses += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGCONT)

    async def loop(self, mode: str, args: argparse.Namespace, stop: asyncio.Event) -> None:
        n = 0
        every = args.kill_every if mode == "kill" else args.pause_every
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every)
                return
            except TimeoutError:
                pass
            n += 1
            if mode == "overload":
                await self.pause(args.pause_seconds)
            elif args.api_kill_every and n % args.api_kill_every == 0:
                await self.kill("api")
            else:
                await self.kill(self.rng.choice(self.WORKERS))

    def burn(self, count: int) -> None:
        self.burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]

    def cool(self) -> None:
        for proc in self.burners:
            proc.kill()
            proc.wait()
        self.burners = []


async def wait_ready(http: httpx.AsyncClient, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.3)
    raise SystemExit("the API did not become ready")


async def create_session(http: httpx.AsyncClient) -> str:
    for _ in range(100):
        try:
            response = await http.post("/v1/sessions", json={"mode": "external", "budget_tokens": BUDGET,
                                                              "system_prompt": "You are a chaos monkey's agent."})
            if response.status_code == 201:
                return str(response.json()["session_id"])
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.5)
    raise SystemExit("could not create a session")


async def run_mode(mode: str, args: argparse.Namespace, faults: Faults, http: httpx.AsyncClient,
                   rng: random.Random) -> tuple[str, list[Call]]:
    sid = await create_session(http)
    calls: list[Call] = []
    stop = asyncio.Event()
    if mode == "overload":
        faults.burn(args.burners)
    killer = asyncio.create_task(faults.loop(mode, args, stop))
    faults_before = faults.count()
    try:
        round_ = -1
        # the rounds asked for, and more (up to ten times as many) until --min-faults faults
        # happened in this mode: a fast machine must not finish a small run before the first
        while (round_ := round_ + 1) < args.rounds or (
                faults.count() - faults_before < args.min_faults and round_ < 10 * args.rounds):
            batch = []
            for index in range(args.calls):
                route = "step" if rng.random() < 0.5 else "append"
                batch.append(Call(mode, round_, index, route, rng.random() < args.keyed_share,
                                  make_items(mode, round_, index, route, rng)))
            await asyncio.gather(*(send(http, sid, call) for call in batch))
            calls += batch
            done = Counter(call.outcome for call in batch)
            print(f"  {mode} round {round_ + 1}/{args.rounds}: {dict(done)}", file=sys.stderr)
            if round_ + 1 >= args.rounds and faults.count() - faults_before < args.min_faults:
                await asyncio.sleep(1.0)  # let the fault loop reach its next fault
    finally:
        stop.set()
        await killer
        faults.cool()
    return sid, calls


async def stored_rows(dsn: str, session_id: str) -> tuple[list[asyncpg.Record], Counter[str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT item_id, seq, kind, content->'content'->>'text' AS text FROM items"
                                " WHERE session_id = $1 AND lane = 'main' ORDER BY seq", session_id)
        added = Counter(r["item_id"] for r in await conn.fetch(
            "SELECT payload->>'item_id' AS item_id FROM events WHERE session_id = $1 AND kind = 'item.added'"
            " AND lane = 'main'", session_id))
    finally:
        await conn.close()
    return rows, added


def judge(calls: list[Call], rows: list[asyncpg.Record], added: Counter[str]) -> dict:
    """Compare every acknowledged id with the stored rows (see the module's docstring)."""
    by_id = {r["item_id"]: r for r in rows}
    holders: Counter[str] = Counter(r["text"] for r in rows)
    counts: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    unknowns: Counter[str] = Counter()
    examples: list[str] = []
    for call in calls:
        counts[f"calls_{call.outcome}"] += 1
        counts["keyed" if call.keyed else "unkeyed"] += 1
        counts["retried"] += call.attempts > 1
        if call.outcome == "acknowledged":
            counts["items_acknowledged"] += len(call.items)
            for item_id, text in zip(call.item_ids, call.texts, strict=False):
                row = by_id.get(item_id)
                if row is None:
                    counts["lost"] += 1
                    examples.append(f"lost: {item_id} of {text[:40]}")
                elif row["text"] != text:
                    counts["misattributed"] += 1
                    examples.append(f"misattributed: {item_id} holds {str(row['text'])[:40]} not {text[:40]}")
            if len(call.item_ids) != len(call.items):
                counts["lost"] += abs(len(call.items) - len(call.item_ids))
                examples.append(f"{len(call.item_ids)} ids for {len(call.items)} items: {call.key}")
        elif call.outcome in ("refused", "refused_final"):
            refusals[call.last_error[:160]] += 1
            applied = sum(holders[text] > 0 for text in call.texts)
            counts["applied_though_refused"] += applied
            if applied:
                examples.append(f"applied though refused: {call.texts[0][:40]} ({call.last_error[:80]})")
        elif call.outcome == "unknown":
            unknowns[call.last_error[:100]] += 1
            counts["unknown_stored"] += any(holders[text] for text in call.texts)
        for text in call.texts:
            if holders[text] > 1:
                counts["duplicated"] += holders[text] - 1
                examples.append(f"duplicated x{holders[text]}: {text[:40]} ({call.route}, key {call.key}, "
                                f"{call.outcome} after {call.attempts} attempts, last error {call.last_error[:80]})")
    counts["unlogged"] = sum(added[r["item_id"]] != 1 for r in rows)
    counts["rows"] = len(rows)
    for key in ("lost", "misattributed", "duplicated", "applied_though_refused"):
        counts.setdefault(key, 0)
    return {**dict(sorted(counts.items())), "refusals": dict(refusals.most_common(10)),
            "unknown_because": dict(unknowns.most_common(10)), "examples": examples[:20]}


async def lost_tasks(settings: Settings, session_id: str) -> dict:
    """Workflow tasks the server timed out or failed, over every run of the session."""
    temporal = await connect(settings)
    counted: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    async for run in temporal.list_workflows(f'WorkflowId = "{session_id}"'):
        counted["runs"] += 1
        async for event in temporal.get_workflow_handle(session_id, run_id=run.run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                counted["workflow_task_timeouts"] += 1
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                counted["workflow_task_failures"] += 1
                failed = event.workflow_task_failed_event_attributes
                causes[f"{failed.cause}: {failed.failure.message[:150]}"] += 1
    return {**dict(counted), "workflow_task_failure_causes": dict(causes)}


def log_count(stack: Stack, words: str) -> int:
    return sum(path.read_text(errors="replace").count(words) for path in (stack.data_dir / "logs").glob("*.log"))


async def main_async(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lanes-extchaos-") as tmp, Stack(Path(tmp)) as stack:
        port = free_port()
        env = {**stack.env(), "LANES_API_PORT": str(port), "LANES_API_TOKENS": f"chaos:{TOKEN}",
               "LANES_LOG_LEVEL": "WARNING", "LANES_STORE_OUTAGE_SECONDS": "20"}
        faults = Faults(stack, env, rng)
        for name in (*Faults.WORKERS, "api"):
            faults.start(name)
        settings = Settings(temporal_address=stack.temporal_address, database_url=stack.dsn,
                            data_dir=Path(tmp) / "data")
        modes: dict[str, dict] = {}
        limits = httpx.Limits(max_connections=args.calls + 8)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            await wait_ready(http)
            for mode in args.modes:
                mode_started = time.monotonic()
                kills_before, pauses_before = Counter(faults.kills), faults.pauses
                sid, calls = await run_mode(mode, args, faults, http, rng)
                await wait_ready(http)
                rows, added = await stored_rows(stack.dsn, sid)
                modes[mode] = {
                    "session": sid, "seconds": round(time.monotonic() - mode_started, 1),
                    "kills": dict(faults.kills - kills_before), "pauses": faults.pauses - pauses_before,
                    **judge(calls, rows, added),
                    **await lost_tasks(settings, sid),
                }
        modes_conflicts = log_count(stack, "already taken by different content")
        refused_completions = log_count(stack, "Task not found")
    failures = sum(m[k] for m in modes.values()
                   for k in ("lost", "misattributed", "duplicated", "applied_though_refused", "unlogged"))
    return {"driver": "bench/external_chaos.py", "args": {k: v for k, v in vars(args).items() if k != "out"},
            "seconds": round(time.monotonic() - started, 1), "machine": _results.machine(),
            "failures": failures, "store_conflict_warnings": modes_conflicts,
            "refused_task_completions": refused_completions, "modes": modes,
            "sources": _results.sources_digest()}


def readme_block(result: dict) -> str:
    args = result["args"]
    command = (f".venv/bin/python bench/external_chaos.py --rounds {args['rounds']} --calls {args['calls']} "
               f"--modes {','.join(args['modes'])} --seed {args['seed']}")
    lines = [
        "## External agents under chaos: acknowledged means stored",
        "",
        f"Run with `{command}` ({result['seconds']:.0f} s on {result['machine']['cpus']} CPUs). One external "
        f"session per mode, {args['rounds']} rounds of {args['calls']} concurrent appends and steps (keyed and "
        "unkeyed), two workers; `kill`: a worker SIGKILLed every "
        f"{args['kill_every']:g} s (every {args['api_kill_every']}th kill the API instead); `overload`: "
        f"{args['burners']} CPU burners on the host and a worker stalled {args['pause_seconds']:g} s every "
        f"{args['pause_every']:g} s, no kills.",
        "",
        "| mode | calls acknowledged | unknown | refused | kills, stalls | lost workflow tasks | items acknowledged | "
        "lost | misattributed | duplicated | applied though refused | unlogged |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, m in result["modes"].items():
        kills = ", ".join([f"{k} {n}" for k, n in m["kills"].items()] + ([f"stall {m['pauses']}"] if m["pauses"] else [])) \
            or "none"
        lost_wft = m.get("workflow_task_timeouts", 0) + m.get("workflow_task_failures", 0)
        lines.append(f"| {mode} | {m.get('calls_acknowledged', 0)} | {m.get('calls_unknown', 0)} | "
                     f"{m.get('calls_refused', 0) + m.get('calls_refused_final', 0)} | {kills} | {lost_wft} | "
                     f"{m.get('items_acknowledged', 0)} | {m['lost']} | {m['misattributed']} | {m['duplicated']} | "
                     f"{m['applied_though_refused']} | {m['unlogged']} |")
    lines += ["", "Unknown: unkeyed calls whose answer was lost (their connection dropped with a killed API process); "
              "the client cannot tell whether they were applied, and the driver does not judge them. Keyed calls "
              "are sent again until answered and are never unknown."]
    lines += ["", f"Workflow task completions the server refused (worker logs, \"Task not found\"): "
              f"{result['refused_task_completions']}. Store warnings of an id taken by other content: "
              f"{result['store_conflict_warnings']}. "
              "What it cannot see: an unknown outcome is not judged (an unkeyed call whose connection dropped "
              "may hold its text once or not at all); rows of other lanes are not read."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=40, help="concurrent calls per round")
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["kill", "overload"])
    parser.add_argument("--kill-every", type=float, default=8.0)
    parser.add_argument("--api-kill-every", type=int, default=4, help="every Nth kill takes the API (0: never)")
    parser.add_argument("--burners", type=int, default=6, help="CPU burners in overload mode")
    parser.add_argument("--pause-every", type=float, default=20.0, help="overload: a worker stalls this often")
    parser.add_argument("--pause-seconds", type=float, default=12.0,
                        help="overload: how long it stalls (past the 10 s workflow task timeout)")
    parser.add_argument("--keyed-share", type=float, default=0.5)
    parser.add_argument("--min-faults", type=int, default=0,
                        help="run more rounds (at most 10x) until this many faults happened in each mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the result here only (not the committed results)")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    else:
        _results.write_json("external-chaos.json", result)
        _results.update_block("external-chaos", readme_block(result))
    print(readme_block(result))
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
