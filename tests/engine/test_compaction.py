"""The deterministic fallback: three passes, protections, the checkpoint, two-phase apply."""

import json

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Kind, Lifecycle, Projection
from workflows.context.text import estimate_tokens


def _pass1_order(plan: E.CompactionPlan) -> list[str]:
    return [t.item_id for t in plan.transitions if t.reason.startswith("pass1:")]


def _small_recent_groups(sim: Sim, count: int = 4) -> None:
    for n in range(count):
        sim.exchange(f"echo recent {n}", f"recent {n}")


def _class_session(budget: int):
    sim = Sim(budget_tokens=budget)
    sim.user("fix the bug")
    _, run = sim.exchange("pytest -q", big(1_900, "run"))  # about 480 tokens each, below the preview
    _, error = sim.exchange("pytest -x", big(1_900, "err"), exit_code=1)
    _, read = sim.exchange("cat auth.py", big(1_900, "read"))
    _, write = sim.exchange("sed -i 's/a/b/' auth.py", big(1_900, "write"))
    _small_recent_groups(sim)
    return sim, run, error, read, write


def test_writes_and_edits_compacted_before_reads_and_shell_output():
    sim, run, error, read, write = _class_session(budget=1_000)  # everything must go
    assert _pass1_order(E.plan_fallback(sim.state)) == [write.id, read.id, run.id, error.id]
    sim, run, error, read, write = _class_session(budget=2_500)  # two are enough
    plan = E.plan_fallback(sim.state)
    assert _pass1_order(plan) == [write.id, read.id]
    reasons = {t.item_id: t.reason for t in plan.transitions}
    assert reasons[write.id] == "pass1:write→reference" and reasons[read.id] == "pass1:read→reference"


def test_shell_output_and_errors_are_kept_longest_oldest_first():
    sim, run, error, read, write = _class_session(budget=1_000)
    order = _pass1_order(E.plan_fallback(sim.state))
    assert order.index(run.id) > order.index(read.id) and order.index(run.id) < order.index(error.id)


def test_reads_compacted_oldest_first_within_a_class():
    sim = Sim(budget_tokens=1_000)
    sim.user("go")
    reads = [sim.exchange(f"cat f{n}.py", big(1_900, f"r{n}"))[1] for n in range(3)]
    _small_recent_groups(sim)
    assert _pass1_order(E.plan_fallback(sim.state)) == [r.id for r in reads]


def test_fallback_stops_as_soon_as_the_target_is_met():
    # the passes alone: the cache-aware sweep that may follow them is tested in test_cache_aware_sweep.py
    sim = Sim(budget_tokens=6_000, cache_aware_sweep=False)
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}.py", big(2_900, f"r{n}"))  # about 730 tokens each
    _small_recent_groups(sim)
    assert E.working_set_tokens(sim.state) > 0.6 * 6_000
    plan = E.plan_fallback(sim.state)
    assert plan.passes_run == ["pass1"] and plan.reaches_target
    assert plan.tokens_after_estimate <= plan.target == int(0.6 * 6_000)
    assert 0 < len(_pass1_order(plan)) < 6


def test_newest_four_groups_are_protected():
    # four ~750-token groups fit the 4,000 budget but not its 60 % target: they stay whole
    sim = Sim(budget_tokens=4_000, preview_chars=16_000)
    sim.user("go")
    recent = [sim.exchange(f"cat f{n}.py", big(3_000, f"r{n}")) for n in range(4)]
    sim.user("next")  # over the budget only through an unprotected pinned message
    plan = E.plan_fallback(sim.state)
    protected = {i.id for pair in recent for i in pair}
    assert not protected & {t.item_id for t in plan.transitions}


def test_when_the_newest_groups_alone_overflow_only_the_newest_stays_protected():
    sim = Sim(budget_tokens=2_000, preview_chars=16_000)
    sim.user("go")
    recent = [sim.exchange(f"cat f{n}.py", big(3_000, f"r{n}")) for n in range(4)]
    plan = E.plan_fallback(sim.state)
    changed = {t.item_id for t in plan.transitions}
    assert "emergency:newest-group-only" in plan.passes_run
    assert not {i.id for i in recent[-1]} & changed  # the exchange in progress is untouched
    assert {i.id for pair in recent[:-1] for i in pair} & changed
    assert plan.fits_budget


def _active_exploration(**config) -> tuple[Sim, list]:
    sim = Sim(budget_tokens=3_000, **config)
    sim.user("go")
    E.begin_episode(sim.state, "explore", "exploration", "read everything")
    active = [sim.exchange(f"cat f{n}.py", big(2_000, f"a{n}"), text=big(800, "prose")) for n in range(3)]
    _small_recent_groups(sim)
    return sim, active


def test_an_active_episode_is_bounded_but_never_evicted():
    """Nothing else brings the working set to the target: the exploration's oldest outputs
    become references (their exact text at the address shown), oldest first, until it is met;
    none of its items is archived, its own turns and its newest output stay whole."""
    sim, active = _active_exploration()
    plan = E.plan_fallback(sim.state)
    moved = {t.item_id: t for t in plan.transitions if t.item_id in {i.id for pair in active for i in pair}}
    outputs = [result.id for _, result in active]
    assert list(moved) == outputs[:len(moved)] and 0 < len(moved) < len(outputs)
    assert {(t.lifecycle, t.projection, t.reason) for t in moved.values()} == {
        (Lifecycle.RETAINED, Projection.REFERENCE, "pass2-active:older-output→reference")}
    assert plan.passes_run.index("pass2-active") < plan.passes_run.index("pass3") if "pass3" in plan.passes_run else True
    assert plan.reaches_target and not plan.archived_episodes
    sim.apply(plan)
    assert sim.state.active_episodes == ["explore"]
    assert all(sim.state.items[i.id].projection == Projection.FULL for i, _ in active)  # its turns whole


def test_runs_recorded_before_bounded_episodes_leave_an_active_episode_alone():
    sim, active = _active_exploration(bound_active_episodes=False)
    plan = E.plan_fallback(sim.state)
    touched = {t.item_id for t in plan.transitions}
    assert not touched & {i.id for pair in active for i in pair} and "pass2-active" not in plan.passes_run


def _episode_session(sim: Sim, action_done: bool = True) -> None:
    sim.user("fix auth")
    E.begin_episode(sim.state, "inspect-auth", "exploration", "read auth.ts and callers")
    for n in range(2):
        sim.exchange(f"cat auth{n}.ts", big(1_200, f"i{n}"), text=big(3_000, f"thinking {n}"))
    E.end_episode(sim.state, "inspect-auth", "JWT validation runs before route dispatch")
    E.begin_episode(sim.state, "fix-auth", "action", "edit auth.ts", depends_on=["inspect-auth"])
    for n in range(2):
        sim.exchange(f"sed -i 's/{n}/x/' auth.ts", big(1_200, f"e{n}"), text=big(3_000, f"editing {n}"))
    if action_done:
        E.end_episode(sim.state, "fix-auth")


def test_completed_episodes_archived_actions_before_explorations():
    sim = Sim(budget_tokens=2_500)
    _episode_session(sim)
    _small_recent_groups(sim)
    plan = E.plan_fallback(sim.state)
    assert plan.archived_episodes == ["fix-auth", "inspect-auth"]
    assert "pass2" in plan.passes_run
    assert {t.reason for t in plan.transitions if t.lifecycle == Lifecycle.ARCHIVED} >= {"pass2:episode-archived"}


def test_exploration_kept_until_dependent_actions_archived():
    sim = Sim(budget_tokens=2_500)
    _episode_session(sim, action_done=False)  # the action is still active
    _small_recent_groups(sim)
    plan = E.plan_fallback(sim.state)
    assert "inspect-auth" not in plan.archived_episodes
    exploration_items = [i.id for i in sim.state.items.values() if i.episode == "inspect-auth"]
    archived = {t.item_id for t in plan.transitions if t.lifecycle == Lifecycle.ARCHIVED}
    assert exploration_items and not archived & set(exploration_items)


def test_archived_exploration_keeps_its_conclusion_and_observation_addresses():
    sim = Sim(budget_tokens=2_500)
    _episode_session(sim)
    _small_recent_groups(sim)
    observations = [i.observation_id for i in sim.state.items.values() if i.episode == "inspect-auth" and i.observation_id]
    sim.apply(E.plan_fallback(sim.state))
    text = sim.contents[sim.state.checkpoint_id].text
    assert "inspect-auth (exploration)" in text and "JWT validation runs before route dispatch" in text
    for obs in observations:
        assert f"observation://{obs}" in text
    assert sim.state.episodes["inspect-auth"].status == "archived"


def test_sessions_without_episodes_archive_oldest_groups_into_the_checkpoint():
    sim = Sim(budget_tokens=5_000, cache_aware_sweep=False)  # pass 2 alone, stopping at the target
    sim.user("go")
    old = [sim.exchange(f"cat f{n}.py", big(400, f"o{n}"), text=big(2_400, f"prose {n}")) for n in range(6)]
    _small_recent_groups(sim)
    result = sim.apply(E.plan_fallback(sim.state))
    assert "pass2-groups" in sim.applied[-1].passes_run
    archived = [i for i in result.archived if i.reason == "pass2:group-archived"]
    assert archived[0].id == old[0][0].id  # the oldest group first, whole
    assert {i.group for i in archived} == {i.group for i in archived if i.kind == "assistant"}
    text = sim.contents[sim.state.checkpoint_id].text
    first, last = min(i.seq for i in archived), max(i.seq for i in archived)
    assert f"items seq {first}–{last}" in text
    assert f"observation://{old[0][1].observation_id}" in text


def test_pinned_user_messages_and_notes_roll_into_one_summary_keeping_two_recent():
    sim = Sim(budget_tokens=3_000)
    users = [sim.user(f"instruction {n}: " + big(1_500, f"u{n}")) for n in range(4)]
    notes = [sim.note(f"note {n}: " + big(900, f"n{n}")) for n in range(2)]
    sim.exchange("ls", "a.py")
    result = sim.apply(E.plan_fallback(sim.state))
    rolled = [i.id for i in result.archived if i.reason == "pass3:rolled-into-summary"]
    assert users[0].id == rolled[0]
    assert users[2].id not in rolled and users[3].id not in rolled
    assert set(rolled) <= {users[0].id, users[1].id, notes[0].id, notes[1].id}
    summary_id = sim.state.summary_id
    text = sim.contents[summary_id].text
    assert text.startswith("[Rolling summary]") and "instruction 0" in text
    assert estimate_tokens(text) <= sim.state.config.summary_tokens + 20
    assert [i.id for i in sim.state.items.values() if i.kind == "summary"] == [summary_id]


def test_summary_is_rolling_and_single():
    sim = Sim(budget_tokens=3_000)
    for round_ in range(3):
        for n in range(3):
            sim.user(f"round {round_} instruction {n}: " + big(1_500, f"u{round_}{n}"))
        sim.compact_if_needed()
    summaries = [i for i in sim.state.items.values() if i.kind == "summary"]
    assert len(summaries) == 1
    assert sim.state.summary.rolled >= 4


def test_needs_compaction_at_80_percent_with_llm_and_only_over_budget_without():
    with_llm = Sim(budget_tokens=10_000, llm_condensation=True)
    without = Sim(budget_tokens=10_000)
    for sim in (with_llm, without):
        sim.user(big(4 * 8_500))  # about 8,500 tokens: 85 % pressure
    assert E.needs_compaction(with_llm.state)
    assert not E.needs_compaction(without.state)
    without.user(big(4 * 2_000))
    assert E.needs_compaction(without.state)


def test_apply_refuses_a_stale_plan():
    sim = Sim(budget_tokens=3_000)
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}", big(2_000, str(n)))
    plan = E.plan_fallback(sim.state)
    sim.exchange("ls", "late arrival")
    before = sim.state.model_dump_json()
    result = E.apply_plan(sim.state, plan)
    assert not result.applied and result.stale and "replan" in result.reason
    assert sim.state.model_dump_json() == before
    assert sim.apply(E.plan_fallback(sim.state)).applied


def test_apply_charges_measured_tokens_of_generated_texts():
    sim = Sim(budget_tokens=4_000)
    sim.user("go")
    for n in range(8):
        sim.exchange(f"cat f{n}", big(300, str(n)), text=big(1_500, f"p{n}"))
    plan = E.plan_fallback(sim.state)
    assert any(g.key == "checkpoint" for g in plan.generated)
    result = E.apply_plan(sim.state, plan, {"checkpoint": {Projection.FULL: 123}})
    checkpoint = sim.state.items[sim.state.checkpoint_id]
    assert checkpoint.tokens[Projection.FULL] == 123 and checkpoint.kind == "checkpoint"
    assert result.created[0].item_id == sim.state.checkpoint_id


def test_apply_rejects_measurements_for_texts_it_does_not_generate():
    sim = Sim(budget_tokens=3_000)
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}", big(2_000, str(n)))
    plan = E.plan_fallback(sim.state)
    before = sim.state.model_dump_json()
    with pytest.raises(E.EngineError, match="does not generate"):
        E.apply_plan(sim.state, plan, {"bogus": {Projection.FULL: 1}})
    assert sim.state.model_dump_json() == before


def test_every_transition_records_a_reason():
    sim = Sim(budget_tokens=3_000)
    sim.user("go")
    E.begin_task(sim.state, "t")
    for n in range(10):
        sim.exchange(f"cat f{n}", big(1_500, str(n)), text=f"step {n}")
        sim.user(f"hint {n}: " + big(400, str(n)))
        sim.compact_if_needed()
    E.end_task(sim.state, "t")
    known = ("pass1:", "pass2:episode-archived", "pass2:group-archived", "pass2:cache-sweep→archived",
             "pass3:rolled-into-summary",
             "archived:omitted-at-task-end", "checkpoint:replaced-by-", "summary:replaced-by-", "task-ended:",
             "pinned:", "added", "fallback:generated")
    everything = list(sim.state.items.values()) + list(sim.archived.values())
    prefixes = {i.reason.split(":")[0] for i in everything}
    assert {"pass2", "pass3", "task-ended", "pinned"} <= prefixes
    for item in everything:
        assert item.reason.startswith(known), item.reason
        if item.lifecycle == Lifecycle.ARCHIVED or item.projection in (Projection.REFERENCE, Projection.OMITTED):
            assert not item.reason.startswith("added"), item


def test_checkpoint_text_is_bounded():
    sim = Sim(budget_tokens=6_000)
    sim.user("go")
    for n in range(200):
        sim.exchange(f"grep -rn pattern{n} src/", big(900, str(n)), text=f"searching for pattern {n} " * 5)
        sim.compact_if_needed()
    checkpoint = sim.contents[sim.state.checkpoint_id].text
    assert estimate_tokens(checkpoint) <= min(1_200, 6_000 // 10) + 5
    assert "older observation(s) not listed" in checkpoint
    assert len(sim.state.checkpoint.observations) <= 24


def test_task_traffic_omitted_at_task_end_leaves_the_state_at_the_next_compaction():
    sim = Sim(budget_tokens=3_000)
    sim.user("one")
    E.begin_task(sim.state, "t1")
    _, tool = sim.exchange("cat a.py", big(1_000))
    sim.assistant("done")
    E.end_task(sim.state, "t1")
    sim.user("two: " + big(9_000))
    result = sim.apply(E.plan_fallback(sim.state))
    assert tool.id in {i.id for i in result.archived if i.reason == "archived:omitted-at-task-end"}


def test_active_episode_markers_sit_in_the_stable_segment_after_a_compaction():
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("go")
    for n in range(6):
        sim.exchange(f"cat f{n}", big(1_500, str(n)))
    E.begin_episode(sim.state, "probe", "exploration", "find the failing import")
    sim.exchange("python -c 'import x'", "ImportError")
    sim.apply(E.plan_fallback(sim.state))
    plan = sim.request()
    stable = [sim.state.items[e.item_id] for e in plan.entries[: plan.stable_entries]]
    assert stable[-1].kind == Kind.EPISODES.value
    assert "probe (exploration): find the failing import" in sim.contents[stable[-1].id].text


def test_pinned_items_move_into_the_stable_segment_only_at_a_compaction():
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("go")
    for n in range(3):
        sim.exchange(f"cat f{n}", big(1_500, str(n)))
    decision = sim.decision("Use the v2 API only.")
    assert sim.request().entries[-1].item_id == decision.id  # appended at the end first
    for n in range(3):
        sim.exchange(f"cat g{n}", big(1_500, str(n)))
    sim.apply(E.plan_fallback(sim.state))
    plan = sim.request()
    assert decision.id in [e.item_id for e in plan.entries[: plan.stable_entries]]


def test_fallback_is_deterministic():
    def run() -> str:
        sim = Sim(budget_tokens=4_000)
        sim.user("go")
        for n in range(12):
            sim.exchange(f"cat f{n}", big(700 + 31 * n, str(n)), text=f"step {n}")
        return E.plan_fallback(sim.state).model_dump_json()

    assert run() == run()
    assert json.loads(run())["runs"]


def _instructions(**config) -> Sim:
    """Five tasks' instructions of about 420 tokens each under a 1,000-token budget: the three
    newest, which pass 3 keeps verbatim, overflow it alone."""
    sim = Sim(budget_tokens=1_000, **config)
    sim.system()
    for n in range(5):
        sim.user(f"instruction {n}: " + big(1_600, f"u{n}"))
        sim.note(f"note {n}: " + big(600, f"n{n}"))
        sim.compact_if_needed()
    return sim


def test_pinned_content_alone_over_the_budget_rolls_the_kept_user_messages_but_the_current_one():
    sim = _instructions()
    assert "pass3:kept-users-rolled" in sim.applied[-1].passes_run and sim.applied[-1].fits_budget
    request = sim.request()
    assert request.fits, request.reason
    users = [i for i in sim.state.items.values() if i.kind == Kind.USER.value]
    assert [i.id for i in users] == [i.id for i in sim.added.values() if i.kind == Kind.USER.value][-1:]
    assert sim.state.summary.rolled  # the others are in the rolling summary


def test_runs_recorded_before_refuse_the_request_when_pinned_content_alone_overflows():
    sim = _instructions(roll_kept_when_unfit=False)
    request = sim.request(Projection.MINIMAL_REFERENCE)  # the ladder's last rung
    assert not request.fits and "protected items alone need" in request.reason


@pytest.mark.parametrize("keep", [False, True])
def test_a_conversation_task_keeps_its_statement_when_its_user_messages_roll(keep: bool):
    """One task whose turns come back as user messages (a gateway conversation): pass 3 rolls
    them oldest first, and with ``keep_task_statement`` the task's first one stays verbatim."""
    sim = Sim(budget_tokens=3_000, keep_task_statement=keep)
    E.begin_task(sim.state, "task-1")
    statement = sim.user("the task: " + big(600, "statement"), task="task-1")
    outputs = [sim.user(f"<output> {n} " + big(1_500, f"o{n}"), task="task-1") for n in range(5)]
    result = sim.apply(E.plan_fallback(sim.state))
    rolled = {i.id for i in result.archived if i.reason == "pass3:rolled-into-summary"}
    assert outputs[0].id in rolled and outputs[-1].id not in rolled  # oldest first, the newest kept
    assert (statement.id in rolled) is not keep
    assert sim.applied[-1].fits_budget
