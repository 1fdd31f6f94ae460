"""prefix.py: where the request after a compaction plan first differs from the current one."""

from hypothesis import given
from hypothesis import strategies as st

from tests.engine.sim import Sim, big
from tests.engine.test_properties import SETTINGS, Driver, sessions, swept_sessions
from workflows.context import engine as E
from workflows.context.draft import Draft
from workflows.context.items import Projection
from workflows.context.passes import run_fallback_passes
from workflows.context.prefix import (
    current_entries,
    first_change,
    planned_entries,
    rebilled,
)


def _recent_groups(sim: Sim) -> None:
    for n in range(4):
        sim.exchange(f"echo recent {n}", f"recent {n}")


def test_first_change_is_the_first_entry_that_differs():
    full, ref = Projection.FULL, Projection.REFERENCE
    assert first_change([("a", full), ("b", full)], [("a", full), ("b", ref)]) == 1
    assert first_change([("a", full), ("b", full)], [("b", full)]) == 0  # a removed
    assert first_change([("a", full)], [("a", full), ("b", full)]) == 1  # only appended
    assert first_change([("a", full)], [("a", full)]) == 1  # nothing changed


def test_rebilled_starts_at_the_first_output_pass1_references():
    sim = Sim(budget_tokens=6_000, cache_aware_sweep=False)
    sim.user("go")
    reads = [sim.exchange(f"cat f{n}.py", big(2_900, f"r{n}"))[1] for n in range(6)]
    _recent_groups(sim)
    draft = Draft(sim.state, "fallback")
    run_fallback_passes(draft)
    rebill = rebilled(draft)
    entries = [e.item_id for e in sim.request().entries]
    assert rebill.ids == frozenset(entries[entries.index(reads[0].id):])  # the oldest read is the first change
    assert not rebill.from_history_start  # the first assistant turn before it stays cached
    assert not rebilled(Draft(sim.state, "fallback")).ids  # an empty draft changes nothing


def test_predicted_layout_matches_the_applied_one():
    sim = Sim(budget_tokens=5_000)
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}.py", big(400, f"o{n}"), text=big(2_400, f"prose {n}"))
    sim.decision("use v2")  # pinned, appended: moves into the stable segment at the re-layout
    _recent_groups(sim)
    draft = Draft(sim.state, "fallback")
    run_fallback_passes(draft)
    predicted, history_start = planned_entries(draft)
    assert first_change(current_entries(draft), predicted) <= history_start
    sim.apply(draft.to_plan())
    actual = [(e.item_id, e.projection) for e in sim.request().entries]
    generated = {i.id for i in sim.state.items.values() if i.kind in ("checkpoint", "summary", "episodes")}
    assert [(i, p) for i, p in actual if i not in generated] == [(i, p) for i, p in predicted if not i.startswith("(new ")]
    assert len(actual) == len(predicted)


class _Predictions(Driver):
    """Before every fallback compaction: the sweep's first change, found in place, is the one
    of the entry lists (``current_entries`` and ``planned_entries``) it stands for."""

    def compact(self) -> None:
        if E.needs_compaction(self.state):
            draft = Draft(self.state, "fallback")
            run_fallback_passes(draft)
            predicted, history_start = planned_entries(draft)
            changed = first_change(current_entries(draft), predicted)
            rebill = rebilled(draft)
            if changed == len(predicted):
                assert not rebill.ids and not rebill.from_history_start
            else:
                assert rebill.ids == frozenset(item_id for item_id, _ in predicted[changed:])
                assert rebill.from_history_start == (changed <= history_start)
        super().compact()


@SETTINGS
@given(st.one_of(sessions, swept_sessions))
def test_the_first_change_found_in_place_is_that_of_the_entry_lists(session):
    budget, llm, script = session
    _Predictions(budget, llm).run(script)
