"""Incremental planning equals full recomputation, byte for byte, on generated sessions.

``plan_request`` extends the previous plan by what was appended (``plan_cache``) and
``RequestRenderer`` reuses the previous request's messages; ``plan_request_reference`` and
``render_messages`` recompute everything. Every step of every generated session compares
them, and the sums behind ``budget`` / ``working_set_tokens`` with their full scans; a
fallback plan made with the cache equals one made on a copy of the state without it.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.engine.sim import big
from tests.engine.test_properties import SETTINGS, Driver, op, swept_sessions
from workflows.context import compaction, plan_cache, request_plan
from workflows.context import engine as E
from workflows.context.budget import scan_capability_tokens, scan_working_set_tokens
from workflows.context.items import Projection
from workflows.context.layout import rebuild_layout
from workflows.context.render_cache import RequestRenderer
from workflows.context.request_plan import plan_request_reference

# the property tests' operations, plus capability context (it changes the plan without an append)
ops = st.one_of(op, st.tuples(st.just("skill"), st.sampled_from(["step", "task"]), st.integers(1, 400)),
                st.tuples(st.just("end_step")), st.tuples(st.just("replan")))
sessions = st.tuples(st.sampled_from([1_500, 3_000, 6_000, 12_000]), st.booleans(), st.lists(ops, min_size=10, max_size=60))


class Checker(Driver):
    """Plays a script; before and after every compaction, incremental equals full."""

    def __init__(self, budget: int, llm: bool):
        super().__init__(budget, llm)
        self.renderer = RequestRenderer()
        self.skills = 0
        self.checked = 0

    def op_skill(self, scope, tokens):
        self.skills += 1
        self.capability(f"skill-{self.skills}", tokens, scope)

    def op_end_step(self):
        E.end_step(self.state)

    def op_replan(self):  # two plans without a change in between
        self.check()

    def check(self) -> None:
        state = self.state
        assert E.working_set_tokens(state) == scan_working_set_tokens(state)
        assert E.budget(state) == max(0, state.config.base_budget - scan_capability_tokens(state) - state.shared_tokens)
        for ladder in (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE):
            incremental, reference = E.plan_request(state, ladder), plan_request_reference(state, ladder)
            assert incremental.model_dump_json() == reference.model_dump_json()
            assert incremental == reference
        plan = E.plan_request(state)
        assert plan_cache.current(state) is not None  # the next step can extend it
        items = dict(state.items)
        rendered = self.renderer.render(plan.entries, items, self.contents, self.preview)
        assert json.dumps(rendered) == json.dumps(E.render_messages(plan.pairs, items, self.contents, self.preview))
        self.checked += 1

    def compact(self) -> None:
        self.check()
        if E.needs_compaction(self.state):
            cold = self.state.model_copy(deep=True)  # a copy has no cache: every sum by a full scan
            assert plan_cache.current(cold) is None
            plan = E.plan_fallback(self.state)
            assert plan.model_dump_json() == E.plan_fallback(cold).model_dump_json()
            assert self.apply(plan).applied
            if not plan.is_empty:  # an empty plan changes nothing, its layout included
                assert_laid_out_from_scratch(self.state)
        self.check()


def assert_laid_out_from_scratch(state) -> None:
    """The layout a compaction left (kept in place or rebuilt) is the one a rebuild gives."""
    fresh = state.model_copy(deep=True)
    rebuild_layout(fresh)
    assert (state.order, state.stable_len, state.memory_len, state.laid_out_len) == (
        fresh.order, fresh.stable_len, fresh.memory_len, fresh.laid_out_len)


@SETTINGS
@given(sessions)
def test_incremental_plans_equal_full_recomputation(session):
    budget, llm, script = session
    checker = Checker(budget, llm)
    checker.run(script)
    assert checker.checked >= 2 * len(script)


@SETTINGS
@given(swept_sessions)
def test_incremental_plans_equal_full_recomputation_across_sweeping_compactions(session):
    budget, llm, script = session
    Checker(budget, llm).run(script)


def test_an_append_extends_the_cached_plan_and_any_other_change_rebuilds_it():
    checker = Checker(3_000, False)
    checker.exchange("cat a.py", big(200, "o"))
    checker.check()
    cache = plan_cache.current(checker.state)
    checker.exchange("pytest -q", big(300, "o"))
    assert plan_cache.current(checker.state) is cache and len(cache.pending) == 2  # extended, not rebuilt
    checker.check()
    E.begin_episode(checker.state, "ep1", "exploration", "look around")  # not an append
    assert plan_cache.current(checker.state) is None
    checker.check()
    # a new config (e.g. another budget): costs of unmeasured projections change with the preview
    checker.state.config = checker.state.config.model_copy(update={"preview_chars": 64})
    assert plan_cache.current(checker.state) is None
    checker.check()


def test_a_copied_state_does_not_share_the_cache():
    checker = Checker(3_000, False)
    checker.exchange("cat a.py", big(200, "o"))
    checker.check()
    copy = checker.state.model_copy(deep=True)
    assert plan_cache.current(copy) is None
    assert E.plan_request(copy) == E.plan_request(checker.state)


def test_the_renderer_re_renders_from_the_first_changed_segment():
    checker = Checker(100_000, False)
    for n in range(6):
        checker.exchange(f"cat f{n}.py", big(300, "o"), text=f"step {n}")
    plan = E.plan_request(checker.state)
    first = checker.renderer.render(plan.pairs, checker.state.items, checker.contents, checker.preview)
    pairs = list(plan.pairs)
    pairs[5] = (pairs[5][0], Projection.REFERENCE)  # a compaction re-projected an old result
    again = checker.renderer.render(pairs, checker.state.items, checker.contents, checker.preview)
    assert again == E.render_messages(pairs, checker.state.items, checker.contents, checker.preview)
    assert again[:4] == first[:4] and again[5] != first[5]
    shorter = checker.renderer.render(pairs[:7], checker.state.items, checker.contents, checker.preview)
    assert shorter == E.render_messages(pairs[:7], checker.state.items, checker.contents, checker.preview)


def test_a_compaction_that_only_re_projects_patches_the_cached_plan_and_keeps_the_layout(monkeypatch):
    checker = Checker(6_000, False)
    checker.user("go")
    for n in range(8):
        checker.exchange(f"cat f{n}.py", big(2_000, f"o{n}"))
    rebuild_layout(checker.state)  # laid out, as by an earlier compaction ...
    checker.exchange("pytest -q", big(300, "o"))  # ... and appended to since
    checker.check()  # the plan cache of the step before
    plan = E.plan_fallback(checker.state)
    assert plan.transitions and all(t.lifecycle != "archived" for t in plan.transitions) and not plan.generated
    monkeypatch.setattr(request_plan, "_scan", None)  # a full scan would fail
    monkeypatch.setattr(compaction, "rebuild_layout", None)  # and so would a re-layout
    assert checker.apply(plan).applied
    monkeypatch.undo()
    assert_laid_out_from_scratch(checker.state)
    assert plan_cache.current(checker.state) is not None
    checker.check()  # the patched plan equals the full recomputation
