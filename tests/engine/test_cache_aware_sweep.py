"""The cache-aware sweep: after the passes meet the target, the fallback also reduces what the
compaction re-bills anyway (every request entry from the first change on), and nothing before."""

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Lifecycle, Projection


def _reasons(plan: E.CompactionPlan) -> dict[str, str]:
    return {t.item_id: t.reason for t in plan.transitions}


def _recent_groups(sim: Sim) -> set[str]:
    return {i.id for n in range(4) for i in sim.exchange(f"echo recent {n}", f"recent {n}")}


def _reads_session(**config):
    """Six ~730-token reads: referencing the oldest few meets the 60 % target."""
    sim = Sim(budget_tokens=6_000, **config)
    sim.user("go")
    reads = [sim.exchange(f"cat f{n}.py", big(2_900, f"r{n}"))[1] for n in range(6)]
    return sim, reads, _recent_groups(sim)


def test_compaction_also_references_outputs_after_the_first_change():
    sim, reads, recent = _reads_session(cache_aware_sweep=False)
    passes_only = E.plan_fallback(sim.state)
    by_pass = [t.item_id for t in passes_only.transitions]
    assert 0 < len(by_pass) < len(reads)  # the passes stop at the target

    sim, reads, recent = _reads_session()
    plan = E.plan_fallback(sim.state)
    reasons = _reasons(plan)
    assert plan.passes_run == ["pass1", "pass1:cache-sweep"]
    assert [reasons[r.id] for r in reads[:len(by_pass)]] == ["pass1:read→reference"] * len(by_pass)
    assert [reasons[r.id] for r in reads[len(by_pass):]] == ["pass1:cache-sweep→reference"] * (6 - len(by_pass))
    assert all(t.projection == Projection.REFERENCE and t.lifecycle == Lifecycle.RETAINED for t in plan.transitions)
    assert not recent & set(reasons)  # the newest groups stay whole
    assert not plan.archived_episodes and plan.checkpoint is None  # first change inside history: no archiving
    assert plan.tokens_after_estimate < passes_only.tokens_after_estimate


def test_compaction_leaves_outputs_before_the_first_change_as_they_were():
    # pass 1 meets the target with the write alone: the older read stays in the cached prefix
    sim = Sim(budget_tokens=3_000, preview_chars=16_000)
    sim.user("go")
    _, old_read = sim.exchange("cat a.py", big(2_000, "old"))
    _, write = sim.exchange("sed -i 's/a/b/' a.py", big(6_000, "write"))
    _, new_read = sim.exchange("cat b.py", big(2_000, "new"))
    recent = _recent_groups(sim)
    plan = E.plan_fallback(sim.state)
    reasons = _reasons(plan)
    assert reasons == {write.id: "pass1:write→reference", new_read.id: "pass1:cache-sweep→reference"}
    assert old_read.id not in reasons and not recent & set(reasons)
    sim.apply(plan)
    assert sim.state.items[old_read.id].projection == Projection.FULL


def test_compaction_that_rewrites_the_checkpoint_archives_every_eligible_group_it_rebills():
    sim = Sim(budget_tokens=5_000)
    user = sim.user("go")
    old = [sim.exchange(f"cat f{n}.py", big(400, f"o{n}"), text=big(2_400, f"prose {n}")) for n in range(6)]
    recent = _recent_groups(sim)
    plan = E.plan_fallback(sim.state)
    assert plan.passes_run[-1] == "pass2:cache-sweep" and "pass2-groups" in plan.passes_run
    reasons = _reasons(plan)
    by_pass = [i.id for pair in old for i in pair if reasons.get(i.id) == "pass2:group-archived"]
    swept = [i.id for pair in old for i in pair if reasons.get(i.id) == "pass2:cache-sweep→archived"]
    assert by_pass and swept and by_pass + swept == [i.id for pair in old for i in pair]  # oldest first, whole groups
    assert not recent & set(reasons) and user.id not in reasons
    result = sim.apply(plan)
    text = sim.contents[sim.state.checkpoint_id].text
    assert f"items seq {old[0][0].seq}–{old[-1][1].seq}" in text  # everything archived is in the checkpoint
    assert f"observation://{old[-1][1].observation_id}" in text
    assert len(result.archived) >= 12


def test_sweep_never_archives_an_active_episode_or_an_exploration_its_actions_still_need():
    sim = Sim(budget_tokens=7_000)
    sim.user("fix auth")
    plain = [i.id for n in range(6) for i in sim.exchange(f"cat f{n}.py", big(400, f"o{n}"), text=big(2_400, "p"))]
    E.begin_episode(sim.state, "inspect", "exploration", "read auth")
    inspect = [i.id for n in range(2) for i in sim.exchange(f"cat a{n}.ts", big(1_200, f"i{n}"), text=big(1_500, "t"))]
    E.end_episode(sim.state, "inspect", "JWT runs first")
    E.begin_episode(sim.state, "fix", "action", "edit auth", depends_on=["inspect"])  # still active
    active = [i.id for n in range(2) for i in sim.exchange(f"sed -i 's/{n}/x/' a.ts", big(1_200, f"e{n}"), text="e")]
    active += _recent_groups(sim)
    plan = E.plan_fallback(sim.state)
    reasons = _reasons(plan)
    assert "pass2:cache-sweep" in plan.passes_run
    assert {reasons[i] for i in plain} == {"pass2:group-archived", "pass2:cache-sweep→archived"}
    assert not set(active) & set(reasons)
    assert all(reasons.get(i, "").startswith("pass1:") or i not in reasons for i in inspect)  # referenced at most
    assert "inspect" not in plan.archived_episodes
