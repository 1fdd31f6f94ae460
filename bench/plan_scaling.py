"""Planning time against working-set size: does one request cost O(n) in the items held?

Synthetic lane items (a system prompt, a task, then alternating assistant turns and tool
results with observation addresses, costs set directly so no tokeniser runs) are fed
straight to the engine. Two series per size, 1k / 10k / 100k items:

* ``request``: the budget holds every item (no compaction); each step appends one
  exchange (untimed) and pays ``needs_compaction`` + ``plan_request`` + rendering -- what
  every model step pays between compactions;
* ``compaction``: the same working set with a budget of half its tokens; the previous
  step's request was planned (untimed), the step appends one exchange and the
  deterministic fallback has to run: ``needs_compaction`` + ``plan_fallback`` +
  ``apply_plan`` + ``plan_request`` + rendering -- what a compaction step pays.

Each series runs incrementally (the plan cache and a ``RequestRenderer`` kept by the
session, as the engine plans now) and as a full recomputation (``plan_request_reference``,
full scans, ``render_messages``: the engine before the plan cache), timed per step
(time.perf_counter): median and p99 (nearest rank). Writes ``bench/results/plan-scaling.json``
and the ``plan-scaling`` block of ``bench/results/README.md``.

    .venv/bin/python bench/plan_scaling.py [--sizes 1000 10000 100000] [--steps 100] [--repeat 100]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time

from _results import machine, sources_digest, update_block, write_json

from workflows.context import (
    EngineConfig,
    Item,
    ItemContent,
    Kind,
    Projection,
    RequestRenderer,
    ToolCall,
    ToolClass,
    engine,
    plan_request_reference,
    render_messages,
    scan_capability_tokens,
    scan_working_set_tokens,
)

SIZES = [1_000, 10_000, 100_000]
ASSISTANT_TOKENS = {Projection.FULL: 60, Projection.COMPACT: 60, Projection.REFERENCE: 40,
                    Projection.MINIMAL_REFERENCE: 20}
RESULT_TOKENS = {Projection.FULL: 400, Projection.COMPACT: 400, Projection.REFERENCE: 24,
                 Projection.MINIMAL_REFERENCE: 12}
TOOL_CLASSES = [ToolClass.READ, ToolClass.RUN, ToolClass.WRITE, ToolClass.ERROR]


def working_set(n: int, first_seq: int = 0) -> tuple[list[Item], dict[str, ItemContent]]:
    """``n`` lane items: system, task, then (assistant, tool result) pairs (from ``first_seq``
    > 0: pairs only, the continuation of a session)."""
    items, contents = [], {}
    if first_seq == 0:
        items = [
            Item(id="itm-0", seq=0, kind=Kind.SYSTEM, role="system", tokens={Projection.FULL: 200}, size_chars=800,
                 digest="system"),
            Item(id="itm-1", seq=1, kind=Kind.USER, role="user", tokens={Projection.FULL: 300}, size_chars=1200,
                 digest="the task"),
        ]
        contents = {"itm-0": ItemContent(text="You are a careful engineer."), "itm-1": ItemContent(text="Fix the bug.")}
    seq = max(first_seq, 2)
    while len(items) < n:
        call = f"call-{seq}"
        items.append(Item(id=f"itm-{seq}", seq=seq, kind=Kind.ASSISTANT, role="assistant", group=seq,
                          tool_call_ids=[call], tokens=dict(ASSISTANT_TOKENS), size_chars=120,
                          digest=f"step {seq}: run the tests"))
        contents[f"itm-{seq}"] = ItemContent(text=f"Step {seq}: run the tests.",
                                             tool_calls=[ToolCall(id=call, name="bash", arguments='{"command":"pytest -q"}')])
        if len(items) < n:
            rid = f"itm-{seq + 1}"
            items.append(Item(id=rid, seq=seq + 1, kind=Kind.TOOL_RESULT, role="tool", group=seq, tool_name="bash",
                              tool_call_ids=[call], tool_class=TOOL_CLASSES[seq % 4], exit_code=0,
                              observation_id=f"obs-bench-{seq + 1:06d}", tokens=dict(RESULT_TOKENS),
                              size_chars=1600, digest="3 passed"))
            contents[rid] = ItemContent(text=f"{seq} passed in 0.1s", tool_call_id=call, tool_name="bash")
        seq += 2
    return items, contents


def fed_state(items: list[Item], budget: int) -> engine.ContextState:
    config = EngineConfig(context_window=max(budget, 128_000), max_output_tokens=4096, budget_tokens=budget,
                          llm_condensation=False)
    state = engine.new_state(config)
    for item in items:
        if item.kind == Kind.USER:
            engine.begin_task(state, "task-0")
        engine.add_item(state, item)
    return state


class Session:
    """One lane as a caller drives it: the state, the contents, and (incremental) its renderer."""

    def __init__(self, state: engine.ContextState, contents: dict[str, ItemContent], incremental: bool) -> None:
        self.state, self.contents, self.incremental = state, contents, incremental
        self.renderer = RequestRenderer()

    def step(self) -> tuple[float, bool, int, float]:
        """One timed model step: (seconds, compacted, entries in the request, CPU seconds).

        Garbage left by earlier work is collected first, so that each step pays only for its
        own allocations (collections during the step still count)."""
        state, contents = self.state, self.contents
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        compacted = False
        over = engine.needs_compaction(state) if self.incremental else scan_working_set_tokens(state) > max(
            0, state.config.base_budget - scan_capability_tokens(state) - state.shared_tokens)
        if over:
            plan = engine.plan_fallback(state)
            result = engine.apply_plan(state, plan)  # generated texts charged at their estimates
            for created in result.created:
                contents[created.item_id] = ItemContent(text=created.text)
            compacted = True
        if self.incremental:
            request = engine.plan_request(state)
            self.renderer.render(request.entries, state.items, contents, state.config.effective_preview_chars)
        else:
            request = plan_request_reference(state)
            render_messages(request.pairs, state.items, contents, state.config.effective_preview_chars)
        return time.perf_counter() - start, compacted, len(request.entries), time.process_time() - cpu

    def warm(self) -> None:
        """The previous step's request (untimed): what an incremental step builds on."""
        if self.incremental:
            request = engine.plan_request(self.state)
            self.renderer.render(request.entries, self.state.items, self.contents,
                                 self.state.config.effective_preview_chars)


def append_pair(state: engine.ContextState, contents: dict[str, ItemContent]) -> None:
    """One more exchange (assistant turn and its tool result), as a step appends it."""
    items, more = working_set(2, state.last_seq + 1)
    for item in items:
        engine.add_item(state, item)
    contents.update(more)


def summary(runs: list[float], cpu: list[float]) -> dict:
    """Wall time (what the targets are about) and this process's CPU time (less sensitive to
    other work on a shared machine)."""
    ms, cpu_ms = [s * 1000 for s in runs], [s * 1000 for s in cpu]
    return {"runs": len(ms), "ms_median": round(statistics.median(ms), 3), "ms_p99": round(percentile(ms, 99), 3),
            "ms_max": round(max(ms), 3), "cpu_ms_median": round(statistics.median(cpu_ms), 3),
            "cpu_ms_p99": round(percentile(cpu_ms, 99), 3)}


def python_calls(session: Session) -> int:
    """Python function calls of one step (cProfile, untimed): an operation count that does
    not depend on the machine, so it shows the algorithm's growth on its own."""
    profile = cProfile.Profile()
    profile.enable()
    session.step()
    profile.disable()
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]  # set by Stats, not declared


def request_series(items, contents, budget: int, incremental: bool, steps: int) -> dict:
    session = Session(fed_state(items, budget), dict(contents), incremental)
    session.warm()
    runs, cpu, entries = [], [], 0
    for _ in range(steps):
        append_pair(session.state, session.contents)
        seconds, compacted, entries, cpu_seconds = session.step()
        assert not compacted
        runs.append(seconds)
        cpu.append(cpu_seconds)
    append_pair(session.state, session.contents)
    calls = python_calls(session)
    return {**summary(runs, cpu), "budget": budget, "entries": entries, "python_calls_per_item": round(calls / len(items), 2)}


def compaction_series(items, contents, budget: int, incremental: bool, repeat: int) -> dict:
    base = fed_state(items[:-2], budget)
    runs, cpu, after, calls = [], [], 0, 0
    for run in range(repeat + 1):  # the last run is profiled, not timed
        session = Session(base.model_copy(deep=True), dict(contents), incremental)
        session.warm()
        for item in items[-2:]:
            engine.add_item(session.state, item)
        if run == repeat:
            calls = python_calls(session)
            break
        seconds, compacted, after, cpu_seconds = session.step()
        assert compacted
        runs.append(seconds)
        cpu.append(cpu_seconds)
    return {**summary(runs, cpu), "budget": budget, "entries_after": after, "python_calls_per_item": round(calls / len(items), 2)}


def measure_size(n: int, steps: int, repeat: int, reference_repeat: int) -> dict:
    items, contents = working_set(n)
    total = sum(i.tokens[Projection.FULL] for i in items)
    row: dict = {"items": n, "working_set_tokens": total}
    row["request"] = request_series(items, contents, total * 2, True, steps)
    row["request_reference"] = request_series(items, contents, total * 2, False, reference_repeat)
    row["compaction"] = compaction_series(items, contents, total // 2, True, repeat)
    row["compaction_reference"] = compaction_series(items, contents, total // 2, False, reference_repeat)
    return row


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, int(-(-len(ordered) * pct // 100))) - 1]


def readme_block(data: dict) -> str:
    rows = data["sizes"]
    lines = [
        "## Planning time vs working-set size",
        "",
        "Driver `bench/plan_scaling.py`: synthetic items fed straight to the engine (costs preset, no tokeniser), "
        "one model step timed at a time. *request*: budget = 2× the working set, so nothing is compacted; the "
        "step appends one exchange (untimed) then runs needs_compaction + plan_request + rendering, "
        f"{data['steps']} consecutive steps. *compaction*: budget = ½ the working set; the step before it was "
        "planned and rendered (untimed), the step appends one exchange, then the deterministic fallback runs "
        f"(needs_compaction + plan_fallback + apply_plan + plan_request + rendering), {data['repeat']} runs on fresh "
        f"copies ({max(3, data['repeat'] // 4)} at 100,000 items: each needs a deep copy). *incremental*: "
        "`plan_request` (plan cache) and a `RequestRenderer` kept by the session; "
        "*full*: the same step recomputed from scratch (`plan_request_reference`, the working-set sums by full "
        f"scans, `render_messages`: the engine before issue 16), {data['reference_repeat']} runs. p99 = nearest "
        "rank (of the full runs: their maximum); CPU = this process's CPU time (time.process_time) of the same steps.",
        "",
        "| items | request p50 ms | request p99 ms | CPU p50 / p99 ms | full: p50 / p99 ms | calls/item "
        "| compaction p50 ms | compaction p99 ms | CPU p50 / p99 ms | full: p50 / p99 ms | calls/item |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        q, qr, c, cr = r["request"], r["request_reference"], r["compaction"], r["compaction_reference"]
        lines.append(f"| {r['items']:,} | {q['ms_median']:.2f} | {q['ms_p99']:.2f} | {q['cpu_ms_median']:.2f} / "
                     f"{q['cpu_ms_p99']:.2f} | {qr['ms_median']:.1f} / {qr['ms_p99']:.1f} | "
                     f"{q['python_calls_per_item']:.2f} | {c['ms_median']:.1f} | {c['ms_p99']:.1f} | "
                     f"{c['cpu_ms_median']:.1f} / {c['cpu_ms_p99']:.1f} | {cr['ms_median']:.1f} / {cr['ms_p99']:.1f} | "
                     f"{c['python_calls_per_item']:.1f} |")
    targets = data["targets"]
    lines += ["", "| target | measured | met |", "|---|---:|:---:|"]
    lines += [f"| {t['target']} | {t['measured']:.2f} ms | {'yes' if t['met'] else '**no**'} |" for t in targets]
    m = data["machine"]
    lines += ["", "calls/item = Python function calls of one step per item held (cProfile, untimed): a machine-"
                  "independent operation count; falling with the items means the step's work does not grow with "
                  f"the working set. Run on {m['cpus']} CPUs shared with other work (load average "
                  f"{m['load_average_1m']} at the start, {data['load_average_end']} at the end)."]
    return "\n".join(lines)


TARGETS = [("request", 10_000, 5.0), ("compaction", 10_000, 50.0)]  # issue 16: p99 at 10,000 items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--steps", type=int, default=100, help="incremental request steps per size")
    parser.add_argument("--repeat", type=int, default=100, help="incremental compaction runs per size")
    parser.add_argument("--reference-repeat", type=int, default=5, help="runs of the full recomputation")
    args = parser.parse_args(argv)
    load = machine()
    rows = []
    for n in args.sizes:
        started = time.perf_counter()
        repeat = args.repeat if n <= 10_000 else max(3, args.repeat // 4)  # a deep copy of 100k items is slow
        rows.append(measure_size(n, args.steps, repeat, args.reference_repeat))
        r = rows[-1]
        print(f"{n:>7,} items: request p50 {r['request']['ms_median']:.2f} p99 {r['request']['ms_p99']:.2f} ms "
              f"(full {r['request_reference']['ms_median']:.1f}), compaction p50 {r['compaction']['ms_median']:.1f} "
              f"p99 {r['compaction']['ms_p99']:.1f} ms (full {r['compaction_reference']['ms_median']:.1f}) "
              f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    targets = []
    for series, n, limit in TARGETS:
        row = next((r for r in rows if r["items"] == n), None)
        if row is not None:
            measured = row[series]["ms_p99"]
            targets.append({"target": f"{series} p99 < {limit:g} ms at {n:,} items", "measured": measured,
                            "met": measured < limit})
    data = {
        "sizes": rows,
        "steps": args.steps,
        "repeat": args.repeat,
        "reference_repeat": args.reference_repeat,
        "targets": targets,
        "machine": load,
        "load_average_end": round(os.getloadavg()[0], 2),
        "code": sources_digest(),
    }
    write_json("plan-scaling.json", data)
    update_block("plan-scaling", readme_block(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
