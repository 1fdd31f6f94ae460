"""Request planning: segments, cache-friendly growth, the overflow ladder, linear work."""

import cProfile

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Projection


def _ids(plan: E.RequestPlan) -> list[tuple[str, str, int]]:
    return [(e.item_id, e.projection.value, e.tokens) for e in plan.entries]


def test_request_only_grows_at_its_end_between_compactions():
    sim = Sim(budget_tokens=6_000)
    sim.system()
    sim.user("go")
    previous, previous_messages, epoch, checked = None, None, None, 0
    for n in range(120):
        sim.exchange(f"cat f{n}.py", big(700 + (n * 53) % 4_000, str(n)), text=f"step {n}")
        if n % 17 == 5:
            sim.note(f"note {n}")  # pinned items append at the end too
        if n % 29 == 7:
            assert sim.capability(f"schema-{n}", 50).admitted
        sim.compact_if_needed()
        plan = sim.request()
        assert plan.fits
        if previous is not None and plan.layout_epoch == epoch:
            assert _ids(plan)[: len(previous)] == previous
            messages = sim.messages(plan)
            assert messages[: len(previous_messages)] == previous_messages
            checked += 1
        previous, epoch, previous_messages = _ids(plan), plan.layout_epoch, sim.messages(plan)
    assert checked > 60 and sim.state.counters.compactions > 5


def test_large_output_projection_is_fixed_until_a_compaction():
    sim = Sim(budget_tokens=8_000)
    sim.user("go")
    _, large = sim.exchange("cat big.log", big(10_000))
    assert large.projection == Projection.COMPACT
    for n in range(3):
        sim.exchange(f"echo {n}", "ok")
        assert sim.state.items[large.id].projection == Projection.COMPACT


def test_request_segments_are_stable_memory_history():
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("go")
    sim.decision("Never touch the migrations.")
    for n in range(8):
        sim.exchange(f"cat f{n}", big(1_200, str(n)), text=f"step {n}")
    sim.apply(E.plan_condense(sim.state, E.MemoryDoc(completed_work=["read the files"])))
    plan = sim.request()
    kinds = [sim.state.items[e.item_id].kind for e in plan.entries]
    stable, memory = plan.stable_entries, plan.memory_entries
    assert kinds[:stable] == ["system", "user", "decision"]
    assert kinds[stable:stable + memory] == ["memory"]
    assert kinds[stable + memory] == "checkpoint"
    assert plan.stable_entries + plan.memory_entries + plan.history_entries + plan.step_entries == len(plan.entries)


def test_overflow_ladder_reference_does_not_mutate_state():
    sim = Sim(budget_tokens=40_000)
    sim.user("go")
    pairs = [sim.exchange(f"cat f{n}", big(3_000, str(n)), text=f"step {n}") for n in range(6)]
    before = sim.state.model_dump_json()
    plan = sim.request(Projection.REFERENCE)
    assert sim.state.model_dump_json() == before
    by_id = {e.item_id: e.projection for e in plan.entries}
    for assistant, tool in pairs[:-1]:
        assert by_id[tool.id] == Projection.REFERENCE and by_id[assistant.id] == Projection.FULL
    newest_assistant, newest_tool = pairs[-1]
    assert by_id[newest_tool.id] == Projection.FULL
    assert plan.total_tokens < sim.request().total_tokens


def test_overflow_ladder_minimal_reference_minimises_old_assistant_prose():
    sim = Sim(budget_tokens=40_000)
    sim.user("go")
    pairs = [sim.exchange(f"cat f{n}", big(3_000, str(n)), text=big(2_000, f"prose{n}")) for n in range(4)]
    plan = sim.request(Projection.MINIMAL_REFERENCE)
    by_id = {e.item_id: e.projection for e in plan.entries}
    assert by_id[pairs[0][0].id] == by_id[pairs[0][1].id] == Projection.MINIMAL_REFERENCE
    assert by_id[pairs[-1][0].id] == Projection.FULL
    messages = sim.messages(plan)
    assert messages[2] == {"role": "tool", "tool_call_id": pairs[0][0].tool_call_ids[0],
                           "content": f"Full output: observation://{pairs[0][1].observation_id}"}
    assert plan.total_tokens < sim.request(Projection.REFERENCE).total_tokens


def test_overflow_recovery_is_full_then_reference_then_minimal_then_terminal():
    assert E.OVERFLOW_LADDER == (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE)
    with pytest.raises(ValueError, match="ladder must be"):
        E.plan_request(Sim().state, ladder=Projection.COMPACT)


def test_request_that_cannot_fit_names_the_protected_items():
    sim = Sim(budget_tokens=1_000)
    sim.system(big(8_000, "rules"))
    sim.user("go")
    sim.exchange("ls", "a.py")
    for ladder in (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE):
        plan = sim.request(ladder)
        assert not plan.fits
        assert "protected items alone need" in plan.reason and "sys-1 (system, pinned" in plan.reason


def test_over_budget_request_without_compaction_says_so():
    sim = Sim(budget_tokens=2_000)
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}", big(1_900, str(n)))
    plan = sim.request()
    assert not plan.fits and "compact first" in plan.reason


def _calls(fn) -> int:
    """Python function calls of ``fn()``: an operation count, the same on every machine
    (times are measured by bench/plan_scaling.py, never asserted here)."""
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    return sum(stat.callcount for stat in profile.getstats())


def _session(exchanges: int, *, over_budget: bool) -> Sim:
    sim = Sim(budget_tokens=10_000_000, preview_chars=16_000)
    sim.system()
    sim.user("go")
    for n in range(exchanges):
        sim.exchange(f"cat f{n}", big(500, str(n)), text=f"step {n}")
    if over_budget:  # half the working set: the fallback has real work to do
        half = E.working_set_tokens(sim.state) // 2
        sim.state.config = sim.state.config.model_copy(update={"budget_tokens": half})
    return sim


def test_planning_work_grows_linearly_with_the_working_set():
    small, large = _session(100, over_budget=False), _session(400, over_budget=False)
    ratio = _calls(lambda: E.plan_request(large.state)) / _calls(lambda: E.plan_request(small.state))
    assert ratio < 4 * 1.2  # four times the items, about four times the work (quadratic would be 16)


def test_compaction_work_grows_linearly_with_the_working_set():
    small, large = _session(100, over_budget=True), _session(400, over_budget=True)
    plans = []
    ratio = _calls(lambda: plans.append(E.plan_fallback(large.state))) / \
        _calls(lambda: plans.append(E.plan_fallback(small.state)))
    assert all(plan.transitions for plan in plans)
    assert ratio < 4 * 1.3
