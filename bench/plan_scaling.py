"""Planning time against working-set size: does one request cost O(n) in the items held?

Synthetic lane items (a system prompt, a task, then alternating assistant turns and tool
results with observation addresses, costs set directly so no tokeniser runs) are fed
straight to the engine. Two series per size, 1k / 10k / 100k items:

* ``request``: the budget holds every item (no compaction): ``needs_compaction`` +
  ``plan_request`` + ``render_messages`` from in-memory contents -- what every model
  step pays between compactions;
* ``compaction``: the same working set with a budget of half its tokens, so the
  deterministic fallback has to run: ``needs_compaction`` + ``plan_fallback`` +
  ``apply_plan`` + ``plan_request`` + ``render_messages`` -- what a compaction step pays.

Each figure is the median of several runs (time.perf_counter), on a fresh copy of the
state for the compaction series. Writes ``bench/results/plan-scaling.json`` and the
``plan-scaling`` block of ``bench/results/README.md``.

    .venv/bin/python bench/plan_scaling.py [--sizes 1000 10000 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time

from _results import machine, sources_digest, update_block, write_json

from workflows.context import engine
from workflows.context.config import EngineConfig
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind, Projection, ToolClass
from workflows.context.render import render_messages

SIZES = [1_000, 10_000, 100_000]
ASSISTANT_TOKENS = {Projection.FULL: 60, Projection.COMPACT: 60, Projection.REFERENCE: 40,
                    Projection.MINIMAL_REFERENCE: 20}
RESULT_TOKENS = {Projection.FULL: 400, Projection.COMPACT: 400, Projection.REFERENCE: 24,
                 Projection.MINIMAL_REFERENCE: 12}
TOOL_CLASSES = [ToolClass.READ, ToolClass.RUN, ToolClass.WRITE, ToolClass.ERROR]


def working_set(n: int) -> tuple[list[Item], dict[str, ItemContent]]:
    """``n`` lane items: system, task, then (assistant, tool result) pairs."""
    items = [
        Item(id="itm-0", seq=0, kind=Kind.SYSTEM, role="system", tokens={Projection.FULL: 200}, size_chars=800,
             digest="system"),
        Item(id="itm-1", seq=1, kind=Kind.USER, role="user", tokens={Projection.FULL: 300}, size_chars=1200,
             digest="the task"),
    ]
    contents = {"itm-0": ItemContent(text="You are a careful engineer."), "itm-1": ItemContent(text="Fix the bug.")}
    seq = 2
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
    config = EngineConfig(context_window=max(budget, 128_000), max_output_tokens=4096, budget_override=budget,
                          llm_condensation=False)
    state = engine.new_state(config)
    for item in items:
        if item.kind == Kind.USER:
            engine.begin_task(state, "task-0")
        engine.add_item(state, item)
    return state


def step(state: engine.ContextState, contents: dict[str, ItemContent]) -> tuple[float, bool, int]:
    """One timed model step: (seconds, compacted, entries in the request).

    Garbage left by building the state is collected first, so that each run pays only for
    its own allocations (collections during the step still count)."""
    gc.collect()
    start = time.perf_counter()
    compacted = False
    if engine.needs_compaction(state):
        plan = engine.plan_fallback(state)
        result = engine.apply_plan(state, plan)  # generated texts charged at their estimates
        for created in result.created:
            contents[created.item_id] = ItemContent(text=created.text)
        compacted = True
    request = engine.plan_request(state)
    render_messages(request.pairs, state.items, contents, state.config.effective_preview_chars)
    return time.perf_counter() - start, compacted, len(request.entries)


def python_calls(state: engine.ContextState, contents: dict[str, ItemContent]) -> int:
    """Python function calls of one step (cProfile, untimed): an operation count that does
    not depend on the machine, so it shows the algorithm's growth on its own."""
    profile = cProfile.Profile()
    profile.enable()
    step(state, contents)
    profile.disable()
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]  # set by Stats, not declared


def measure_size(n: int, repeat: int) -> dict:
    items, contents = working_set(n)
    total = sum(i.tokens[Projection.FULL] for i in items)
    roomy = fed_state(items, total * 2)
    request_runs = []
    entries = 0
    for _ in range(repeat):
        seconds, compacted, entries = step(roomy, contents)
        assert not compacted
        request_runs.append(seconds)
    tight_budget = total // 2
    base = fed_state(items, tight_budget)
    compaction_runs = []
    after = 0
    for _ in range(repeat):
        state = base.model_copy(deep=True)
        seconds, compacted, after = step(state, dict(contents))
        assert compacted
        compaction_runs.append(seconds)
    request_calls = python_calls(roomy, contents)
    compaction_calls = python_calls(base.model_copy(deep=True), dict(contents))
    request_ms = statistics.median(request_runs) * 1000
    compaction_ms = statistics.median(compaction_runs) * 1000
    return {
        "items": n,
        "working_set_tokens": total,
        "request": {"budget": total * 2, "entries": entries, "ms_median": round(request_ms, 3),
                    "us_per_item": round(request_ms * 1000 / n, 3), "python_calls_per_item": round(request_calls / n, 2),
                    "runs_ms": [round(s * 1000, 3) for s in request_runs]},
        "compaction": {"budget": tight_budget, "entries_after": after, "ms_median": round(compaction_ms, 3),
                       "us_per_item": round(compaction_ms * 1000 / n, 3),
                       "python_calls_per_item": round(compaction_calls / n, 2),
                       "runs_ms": [round(s * 1000, 3) for s in compaction_runs]},
    }


def readme_block(data: dict) -> str:
    rows = data["sizes"]
    lines = [
        "## Planning time vs working-set size",
        "",
        "Driver `bench/plan_scaling.py`: synthetic items fed straight to the engine (costs preset, no tokeniser). "
        "*request*: budget = 2× the working set, so nothing is compacted (needs_compaction + plan_request + "
        "render_messages); *compaction*: budget = ½ the working set, so the deterministic fallback runs once "
        "(plus apply_plan, then the request). Medians of "
        f"{data['repeat']} runs.",
        "",
        "| items | request ms | µs/item | calls/item | compaction ms | µs/item | calls/item |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        q, c = r["request"], r["compaction"]
        lines.append(f"| {r['items']:,} | {q['ms_median']:.2f} | {q['us_per_item']:.2f} | {q['python_calls_per_item']:.1f} "
                     f"| {c['ms_median']:.1f} | {c['us_per_item']:.2f} | {c['python_calls_per_item']:.1f} |")
    growth = data["growth"]
    lines += ["", f"Growth from {rows[0]['items']:,} to {rows[-1]['items']:,} items "
                  f"({rows[-1]['items'] // rows[0]['items']}× the items): request ×{growth['request']:.1f}, "
                  f"compaction ×{growth['compaction']:.1f} (linear = ×{rows[-1]['items'] // rows[0]['items']}). "
                  "calls/item = Python function calls per item of one step (cProfile, untimed): a machine-"
                  "independent operation count; constant calls/item means the work is linear in the items, "
                  "and a rising µs/item at constant calls/item is the memory hierarchy, not the algorithm."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        started = time.perf_counter()
        rows.append(measure_size(n, args.repeat))
        r = rows[-1]
        print(f"{n:>7,} items: request {r['request']['ms_median']:.2f} ms, compaction {r['compaction']['ms_median']:.1f} ms"
              f" ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    data = {
        "sizes": rows,
        "repeat": args.repeat,
        "growth": {
            "items": rows[-1]["items"] / rows[0]["items"],
            "request": round(rows[-1]["request"]["ms_median"] / rows[0]["request"]["ms_median"], 2),
            "compaction": round(rows[-1]["compaction"]["ms_median"] / rows[0]["compaction"]["ms_median"], 2),
        },
        "machine": machine(),
        "code": sources_digest(),
    }
    write_json("plan-scaling.json", data)
    update_block("plan-scaling", readme_block(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
