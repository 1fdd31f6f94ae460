"""The bulk paths of a compaction equal the item-by-item ones they replace.

Pass 1 moves thousands of items alike, so a draft records them in bulk
(``Draft.move_in_bulk``), a plan holds them as runs (``TransitionRun``) and ``apply_plan``
re-projects a run in bulk (``reproject.py``). Each is checked here against the
item-by-item definition: ``Draft.move_all``, one transition per item, and the full scan of
the working set after the plan is applied.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.sim import Sim, big
from tests.engine.test_incremental_plan import assert_laid_out_from_scratch
from workflows.context import engine as E
from workflows.context import passes
from workflows.context.budget import scan_working_set_tokens
from workflows.context.compaction_plan import TransitionRun
from workflows.context.draft import Draft
from workflows.context.items import Item, Kind, Lifecycle, Projection, ToolClass
from workflows.context.layout import rebuild_layout
from workflows.context.request_plan import plan_request_reference


def _session(sizes: list[int], budget: int) -> Sim:
    sim = Sim(budget_tokens=budget)
    sim.system()
    sim.user("go")
    for n, size in enumerate(sizes):
        sim.exchange(f"cat f{n}.py", big(size, str(n)))
    return sim


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(0, 3_000), min_size=6, max_size=30), limit=st.none() | st.integers(0, 120),
       changed_first=st.sampled_from([0, 0, 0, 1, 3]), shuffle=st.randoms(use_true_random=False))
def test_moving_in_bulk_equals_moving_item_by_item(sizes, limit, changed_first, shuffle):
    sim = _session(sizes, 200_000)  # nothing protected but the newest groups; nothing compacted yet
    bulk, single = Draft(sim.state, "fallback"), Draft(sim.state, "fallback")
    for draft in (bulk, single):  # some candidates already moved (to compact): move_all's path
        for item in passes._referenceable(draft).items[:changed_first]:
            draft.move(item, Lifecycle.RETAINED, Projection.COMPACT, "test:compact")
    found = passes._referenceable(bulk)
    order = list(range(len(found.items)))
    shuffle.shuffle(order)
    items, savings = [found.items[k] for k in order], [found.savings[k] for k in order]
    changes = [passes._PASS1_CHANGES[item.tool_class] for item in items]
    lane_limit = None if limit is None else bulk.lane_tokens * limit // 100  # percent of the lane
    moved = bulk.move_in_bulk([item.id for item in items], changes, savings, lane_limit)
    assert moved == single.move_all(zip(items, changes, strict=True), lane_limit)
    assert list(bulk.changes.items()) == list(single.changes.items())  # the same moves, in the same order
    assert bulk.lane_tokens == single.lane_tokens


def test_a_plan_holds_runs_of_alike_transitions_in_the_order_decided():
    sim = _session([2_000] * 12, 6_000)
    draft = Draft(sim.state, "fallback")
    passes.run_fallback_passes(draft)
    plan = draft.to_plan()
    assert plan.transition_count == len(draft.changes) > len(plan.runs)
    assert [(t.item_id, (t.lifecycle, t.projection, t.reason)) for t in plan.transitions] == list(draft.changes.items())
    for before, after in zip(plan.runs, plan.runs[1:], strict=False):  # maximal: neighbours differ
        assert (before.lifecycle, before.projection, before.reason) != (after.lifecycle, after.projection, after.reason)
    assert '"runs":[{"lifecycle":' in plan.model_dump_json()


def _unmeasured_session() -> Sim:
    """Tool outputs measured in full only: their reference cost is estimated (budget.cost_of)."""
    sim = _session([], 200_000)
    for n in range(6):
        call = sim.assistant(f"step {n}", [("bash", f'{{"command": "cat g{n}"}}')]).tool_call_ids[0]
        item = Item(id=f"out-{n}", seq=sim.seq + 1, kind=Kind.TOOL_RESULT.value, role="tool", tool_name="bash",
                    tool_call_ids=[call], tool_class=ToolClass.READ, observation_id=f"obs-g{n:04d}",
                    size_chars=4_000, tokens={Projection.FULL: 1_000})
        sim.seq += 1
        sim.contents[item.id] = E.ItemContent(text=big(4_000, str(n)), tool_call_id=call, tool_name="bash")
        E.add_item(sim.state, item)
    return sim


def test_a_run_re_projects_unmeasured_items_at_their_estimated_cost():
    sim = _unmeasured_session()
    E.plan_request(sim.state)  # the plan cache a patch starts from
    ids = [f"out-{n}" for n in range(4)]
    plan = E.plan_fallback(sim.state).model_copy(update={"runs": [
        TransitionRun(Lifecycle.RETAINED, Projection.REFERENCE, "test:reference", ids[:2]),
        TransitionRun(Lifecycle.RETAINED, Projection.MINIMAL_REFERENCE, "test:minimal", ids[2:])],
        "generated": [], "checkpoint": None, "summary": None, "archived_episodes": []})
    before = E.working_set_tokens(sim.state)
    assert sim.apply(plan).applied
    items = [sim.state.items[i] for i in ids]
    assert [i.projection for i in items] == [Projection.REFERENCE] * 2 + [Projection.MINIMAL_REFERENCE] * 2
    assert all(i.reason.startswith("test:") and i.lifecycle == Lifecycle.RETAINED for i in items)
    # the sums and the plan the patch made equal a full scan, with the estimated costs
    assert E.working_set_tokens(sim.state) == scan_working_set_tokens(sim.state) < before
    assert E.plan_request(sim.state).entries == plan_request_reference(sim.state).entries
    assert all(e.tokens < 1_000 for e in E.plan_request(sim.state).entries if e.item_id in ids)


def test_a_run_that_moves_items_out_of_the_pinned_lifecycle_re_lays_them_out():
    sim = _session([500] * 3, 200_000)
    note = sim.note("remember: the tests live in tests/")
    rebuild_layout(sim.state)  # laid out, as by an earlier compaction: pinned notes go to the stable segment
    E.plan_request(sim.state)
    assert sim.state.items[note.id].lifecycle == Lifecycle.PINNED
    assert sim.state.order.index(note.id) < sim.state.stable_len
    plan = E.plan_fallback(sim.state).model_copy(update={"runs": [
        TransitionRun(Lifecycle.RETAINED, Projection.FULL, "test:unpinned", [note.id])]})
    assert sim.apply(plan).applied
    assert sim.state.items[note.id].lifecycle == Lifecycle.RETAINED
    # out of the stable segment (pinned notes go there) to the end of history, as a re-layout puts it
    assert sim.state.order[-1] == note.id and sim.state.order.index(note.id) >= sim.state.stable_len
    assert_laid_out_from_scratch(sim.state)
    assert E.plan_request(sim.state).entries == plan_request_reference(sim.state).entries


def test_pass_1_evicts_by_class_priority_then_age_in_bulk():
    sim = Sim(budget_tokens=1_500)  # every candidate has to go: the whole order shows
    sim.user("go")
    classes = [ToolClass.RUN, ToolClass.WRITE, ToolClass.READ, ToolClass.ERROR, ToolClass.RUN, ToolClass.WRITE,
               ToolClass.READ]
    for n, tool_class in enumerate(classes):
        assistant = sim.assistant(f"step {n}", [("bash", f'{{"command": "x{n}"}}')])
        sim.tool(assistant.tool_call_ids[0], big(1_500, str(n)), tool_class=tool_class)
    for n in range(3):  # the protected newest groups
        sim.exchange(f"ls {n}", "a b c")
    draft = Draft(sim.state, "fallback")
    candidates = passes._referenceable(draft).items
    passes.reference_tool_outputs(draft)
    moved = [i for i, c in draft.changes.items() if c.reason.startswith("pass1:")]
    expected = sorted(candidates, key=lambda i: (passes._PRIORITY[i.tool_class], i.seq))
    assert len(moved) >= 5 and moved == [i.id for i in expected[:len(moved)]]
    assert all(draft.changes[i.id] == passes._PASS1_CHANGES[i.tool_class] for i in expected[:len(moved)])
