"""Episode rules: explorations conclude, actions depend on completed explorations."""

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E


def test_exploration_must_end_with_a_conclusion():
    sim = Sim()
    E.begin_episode(sim.state, "inspect-auth", "exploration", "find where JWT is validated")
    with pytest.raises(E.EpisodeError, match="concise conclusion"):
        E.end_episode(sim.state, "inspect-auth")
    with pytest.raises(E.EpisodeError, match="keep it concise"):
        E.end_episode(sim.state, "inspect-auth", "x" * 5000)
    episode = E.end_episode(sim.state, "inspect-auth", "JWT validation runs before route dispatch")
    assert episode.status == "completed"


def test_action_must_name_completed_explorations():
    sim = Sim()
    with pytest.raises(E.EpisodeError, match="must name the completed explorations"):
        E.begin_episode(sim.state, "fix-auth", "action", "fix it")
    E.begin_episode(sim.state, "inspect-auth", "exploration", "look")
    E.end_episode(sim.state, "inspect-auth", "found it")
    episode = E.begin_episode(sim.state, "fix-auth", "action", "fix it", depends_on=["inspect-auth"])
    assert episode.depends_on == ["inspect-auth"]
    E.end_episode(sim.state, "fix-auth")  # an action's conclusion is optional


def test_unknown_dependency_is_rejected():
    sim = Sim()
    with pytest.raises(E.EpisodeError, match="unknown episode 'ghost'"):
        E.begin_episode(sim.state, "fix", "action", "fix", depends_on=["ghost"])
    assert sim.state.episodes == {}


def test_still_active_dependency_is_rejected():
    sim = Sim()
    E.begin_episode(sim.state, "inspect", "exploration", "look")
    with pytest.raises(E.EpisodeError, match="still active"):
        E.begin_episode(sim.state, "fix", "action", "fix", depends_on=["inspect"])


def test_action_dependency_is_rejected():
    sim = Sim()
    E.begin_episode(sim.state, "inspect", "exploration", "look")
    E.end_episode(sim.state, "inspect", "seen")
    E.begin_episode(sim.state, "fix", "action", "fix", depends_on=["inspect"])
    E.end_episode(sim.state, "fix")
    with pytest.raises(E.EpisodeError, match="an action; only explorations"):
        E.begin_episode(sim.state, "fix2", "action", "again", depends_on=["fix"])


def test_dependencies_are_acyclic():
    sim = Sim()
    with pytest.raises(E.EpisodeError, match="cannot depend on itself"):
        E.begin_episode(sim.state, "loop", "action", "x", depends_on=["loop"])
    # a dependency must already be finished, so an edge always points to an older episode
    E.begin_episode(sim.state, "a", "exploration", "x")
    with pytest.raises(E.EpisodeError):
        E.begin_episode(sim.state, "b", "exploration", "y", depends_on=["a"])


def test_episode_ids_are_unique_and_kinds_checked():
    sim = Sim()
    E.begin_episode(sim.state, "a", "exploration", "x")
    with pytest.raises(E.EpisodeError, match="already exists"):
        E.begin_episode(sim.state, "a", "exploration", "x")
    with pytest.raises(E.EpisodeError, match="'exploration' or 'action'"):
        E.begin_episode(sim.state, "b", "research", "x")
    E.end_episode(sim.state, "a", "done")
    with pytest.raises(E.EpisodeError, match="not active"):
        E.end_episode(sim.state, "a", "again")
    with pytest.raises(E.EpisodeError, match="unknown episode"):
        E.end_episode(sim.state, "zzz", "x")


def test_items_belong_to_the_active_episode_and_episodes_do_not_nest():
    sim = Sim()
    sim.user("go")
    E.begin_episode(sim.state, "outer", "exploration", "x")
    first, _ = sim.exchange("ls", "a")
    before = sim.state.model_dump_json()
    with pytest.raises(E.EpisodeError, match="do not nest") as refused:
        E.begin_episode(sim.state, "inner", "exploration", "y")
    assert refused.value.conflict and sim.state.model_dump_json() == before
    E.end_episode(sim.state, "outer", "seen a")
    second, _ = sim.exchange("ls", "b")
    assert (first.episode, second.episode) == ("outer", None)


def test_explorations_have_no_dependencies_and_actions_no_conclusion():
    sim = Sim()
    E.begin_episode(sim.state, "look", "exploration", "x")
    E.end_episode(sim.state, "look", "seen")
    with pytest.raises(E.EpisodeError, match="cannot depend on other episodes"):
        E.begin_episode(sim.state, "look2", "exploration", "y", depends_on=["look"])
    E.begin_episode(sim.state, "fix", "action", "z", depends_on=["look"])
    with pytest.raises(E.EpisodeError, match="conclusions belong to explorations"):
        E.end_episode(sim.state, "fix", "done")
    E.end_episode(sim.state, "fix")
    assert sim.state.episodes["fix"].conclusion is None


def test_rules_1_kept_nesting_and_action_conclusions():
    """Runs recorded before the stricter rules replay with the old ones."""
    sim = Sim(rules_version=1)
    E.begin_episode(sim.state, "outer", "exploration", "x")
    E.begin_episode(sim.state, "inner", "exploration", "y", depends_on=[])
    E.end_episode(sim.state, "inner", "seen")
    E.end_episode(sim.state, "outer", "seen")
    E.begin_episode(sim.state, "fix", "action", "z", depends_on=["outer"])
    E.end_episode(sim.state, "fix", "a conclusion")


def _request_text(sim: Sim) -> str:
    plan = E.plan_assembly(sim.state)
    if plan is not None:
        sim.apply(plan)
    return "\n".join(str(m.get("content")) for m in sim.messages(sim.request()))


def _task_with_exploration(sim: Sim, conclusion: str) -> None:
    sim.system()
    E.begin_task(sim.state, "task-1")
    sim.user("Why does login fail?")
    E.begin_episode(sim.state, "inspect-auth", "exploration", "find where JWT is validated")
    sim.exchange("grep -rn jwt src/", big(3_000, "grep"))
    E.end_episode(sim.state, "inspect-auth", conclusion)
    sim.assistant("Login fails because the token is checked before the clock sync.")
    E.end_task(sim.state, "task-1")


def test_a_concluded_exploration_stays_in_the_request_after_its_task_ended():
    """Its traffic is omitted at the task end; until a compaction archives it (and puts the
    conclusion in the checkpoint) the markers carry the conclusion."""
    sim = Sim(budget_tokens=300)
    conclusion = "JWT validation runs in middleware/auth.py before route dispatch"
    _task_with_exploration(sim, conclusion)
    E.begin_task(sim.state, "task-2")
    sim.user("Now fix it.")
    text = _request_text(sim)
    assert conclusion in text and "grep line of output" not in text  # the traffic left, the conclusion stayed
    assert sim.state.episodes["inspect-auth"].status == "completed"  # not archived yet

    # once archived, the checkpoint keeps the conclusion and the markers drop it (in the same plan)
    sim.apply(E.plan_fallback(sim.state))
    assert sim.state.episodes["inspect-auth"].status == "archived"
    assert [n.conclusion for n in sim.state.checkpoint.episodes] == [conclusion]
    assert "episodes" not in sim.state.generated  # nothing left to mark: the markers item retired
    assert E.plan_assembly(sim.state) is None  # and the next request needs no other layout change


def test_runs_recorded_before_the_conclusion_markers_keep_the_old_requests():
    sim = Sim(concluded_in_markers=False)
    conclusion = "JWT validation runs in middleware/auth.py before route dispatch"
    _task_with_exploration(sim, conclusion)
    E.begin_task(sim.state, "task-2")
    sim.user("Now fix it.")
    assert conclusion not in _request_text(sim)  # the gap those runs had (they replay as recorded)
