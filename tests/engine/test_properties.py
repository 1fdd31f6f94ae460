"""Invariants of the engine over random sessions (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.config import cost_profile
from workflows.context.items import Kind, Lifecycle, Projection, is_tool_output
from workflows.context.ledger import GENERATED_KINDS, protected_groups

COMMANDS = ["cat src/a.py", "sed -i 's/a/b/' a.py", "pytest -q", "grep -rn foo .", "python run.py", "ls"]

exchange = st.tuples(st.just("exchange"), st.sampled_from(COMMANDS), st.integers(0, 16_000), st.integers(0, 4_000),
                     st.sampled_from([0, 0, 0, 1]), st.booleans())
op = st.one_of(
    exchange, exchange, exchange,  # most steps are tool exchanges
    st.tuples(st.just("user"), st.integers(1, 8_000)),
    st.tuples(st.just("note"), st.integers(1, 3_000)),
    st.tuples(st.just("decision"), st.integers(1, 300)),
    st.tuples(st.just("explore")),
    st.tuples(st.just("act")),
    st.tuples(st.just("end_episode")),
    st.tuples(st.just("task")),
    st.tuples(st.just("condense")),
)
sessions = st.tuples(st.sampled_from([1_500, 3_000, 6_000, 12_000]), st.booleans(),
                     st.lists(op, min_size=10, max_size=60))
# Longer sessions of moderate exchanges (the sessions above mostly overflow their protected
# window or sit in open episodes): the fallback meets its target early and the cache-aware
# sweep has something to take, so its invariants are exercised too.
_moderate = st.tuples(st.just("exchange"), st.sampled_from(COMMANDS), st.integers(0, 3_000), st.integers(0, 600),
                      st.sampled_from([0, 0, 0, 1]), st.booleans())
_other = {"user": st.tuples(st.just("user"), st.integers(1, 1_000)), "note": st.tuples(st.just("note"), st.integers(1, 500))}
swept_sessions = st.tuples(
    st.sampled_from([4_000, 8_000]), st.booleans(),
    st.lists(st.sampled_from(["exchange"] * 12 + ["user", "note", "explore", "act", "end_episode", "end_episode", "task"])
             .flatmap(lambda kind: _moderate if kind == "exchange" else _other.get(kind, st.just((kind,)))),
             min_size=20, max_size=80))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Driver(Sim):
    """Plays a random script, checking invariants around every compaction."""

    def __init__(self, budget: int, llm: bool, episodes: bool = True, profile: bool = False):
        # profile: the cost profile a new session runs with (workflows.context.config.cost_profile)
        super().__init__(budget_tokens=budget, llm_condensation=llm, **(cost_profile(llm) if profile else {}))
        self.episodes_on = episodes
        self.system("rules")
        self.user("first task")
        self.task_n = 1
        E.begin_task(self.state, "task-1")
        self.episode_n = 0
        self.plans: list[str] = []
        self.archive_log: list[tuple[str, int]] = []  # (episode, newest seq) in archive order

    def run(self, script) -> None:
        for step in script:
            getattr(self, f"op_{step[0]}")(*step[1:])
            self.compact()

    # --- operations ------------------------------------------------------------------------
    def op_exchange(self, command, size, prose, exit_code, text_protocol):
        if text_protocol:
            self.assistant(big(prose, "p") + f"\n```bash\n{command}\n```")
            self.tool("", big(size, "o"), arguments=command, exit_code=exit_code, role="user")
        else:
            self.exchange(command, big(size, "o"), text=big(prose, "p"), exit_code=exit_code)

    def op_user(self, size):
        self.user(big(size, "u"), obs=size > 2_000)

    def op_note(self, size):
        self.note(big(size, "n"))

    def op_decision(self, size):
        self.decision(big(size, "d"))

    def op_explore(self):
        if self.episodes_on and not self.state.active_episodes:  # episodes do not nest
            self.episode_n += 1
            E.begin_episode(self.state, f"ep{self.episode_n}", "exploration", f"explore {self.episode_n}")

    def op_act(self):
        done = [e.id for e in self.state.episodes.values() if e.kind == "exploration" and e.status in ("completed", "archived")]
        if self.episodes_on and done and not self.state.active_episodes:
            self.episode_n += 1
            E.begin_episode(self.state, f"ep{self.episode_n}", "action", "act", depends_on=done[-2:])

    def op_end_episode(self):
        if self.state.active_episodes:
            episode = self.state.episodes[self.state.active_episodes[-1]]
            E.end_episode(self.state, episode.id, "concluded" if episode.kind == "exploration" else None)

    def op_task(self):
        E.end_task(self.state, f"task-{self.task_n}")
        self.task_n += 1
        self.user(f"task {self.task_n}")
        E.begin_task(self.state, f"task-{self.task_n}")

    def op_condense(self):
        outcome = E.plan_condense(self.state, E.MemoryDoc(completed_work=[f"until seq {self.seq}"]))
        if isinstance(outcome, E.Rejection):
            return
        self.check_plan(outcome)
        assert self.apply(outcome).applied

    # --- invariants --------------------------------------------------------------------------
    def compact(self) -> None:
        if E.needs_compaction(self.state):
            plan = E.plan_fallback(self.state)
            self.check_plan(plan)
            assert self.apply(plan).applied
            self.check_fits_when_feasible(plan)
        for ladder in (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE):
            request = self.request(ladder)
            check_pairing(self.messages(request))
            assert request.fits or request.reason

    def check_plan(self, plan: E.CompactionPlan) -> None:
        self.plans.append(plan.model_dump_json())
        state = self.state
        active = set(state.active_episodes)
        # When the newest groups alone overflow the budget, the fallback protects only the
        # newest one (the exchange in progress): a request that fits comes first.
        emergency = "emergency:newest-group-only" in plan.passes_run
        newest = protected_groups(state, 1 if emergency else state.config.protected_groups)
        users = [i for i in state.items.values() if i.kind == "user" and i.lifecycle == Lifecycle.PINNED]
        # pinned content alone over the budget: the kept ones roll too, all but the current submission
        kept_users = {i.id for i in users[-1 if "pass3:kept-users-rolled" in plan.passes_run else -2:]}
        for transition in plan.transitions:
            item = state.items[transition.item_id]
            if item.kind in GENERATED_KINDS:
                continue
            if transition.reason == "archived:omitted-at-task-end":
                assert item.projection == Projection.OMITTED  # already out of every request
                continue
            if item.episode in active:  # bounded, never evicted: an older output becomes a reference
                assert (transition.lifecycle, transition.projection) == (Lifecycle.RETAINED, Projection.REFERENCE) \
                    and transition.reason.startswith("pass2-active") and is_tool_output(item), \
                    f"active episode item {item.id} evicted"
            assert item.group is None or item.group not in newest, f"protected group item {item.id} evicted"
            if item.lifecycle == Lifecycle.PINNED:
                assert transition.reason == "pass3:rolled-into-summary" and item.kind in ("user", "note")
                assert item.id not in kept_users
        # an exploration is archived only once every episode depending on it is archived
        for position, episode_id in enumerate(plan.archived_episodes):
            for other in state.episodes.values():
                if episode_id in other.depends_on:
                    earlier = set(plan.archived_episodes[:position])
                    assert other.status == "archived" or other.id in earlier, (episode_id, other.id)
        self.archive_log.extend((episode, state.last_seq) for episode in plan.archived_episodes)

    def check_fits_when_feasible(self, plan: E.CompactionPlan) -> None:
        request = self.request()
        if request.fits:
            return
        assert request.reason
        if self.episodes_on:
            return  # blocked explorations make the floor hard to state; covered without episodes
        state = self.state
        # When the newest groups alone overflow the budget, the fallback protects only the
        # newest one (the exchange in progress): a request that fits comes first.
        emergency = "emergency:newest-group-only" in plan.passes_run
        newest = protected_groups(state, 1 if emergency else state.config.protected_groups)
        users = [i for i in state.items.values() if i.kind == "user" and i.lifecycle == Lifecycle.PINNED]
        kept_users = {u.id for u in users[-3:]}  # the current submission and the two before it
        floor = sum(
            e.tokens for e in request.entries
            if (i := state.items[e.item_id]).group in newest or i.kind in GENERATED_KINDS
            or (i.lifecycle == Lifecycle.PINNED and i.kind not in ("user", "note")) or i.id in kept_users
        )
        assert floor + state.config.summary_tokens // 2 > request.budget, (floor, request.budget, request.reason)


def check_pairing(messages: list[dict]) -> None:
    """No tool_call without its tool message and no tool message without its call."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, f"tool message without its call: {message['tool_call_id']}"
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"tool_calls without tool messages: {pending}"
        if message["role"] == "assistant":
            assert message.get("content") or message.get("tool_calls"), "empty assistant message"
            pending = {c["id"] for c in message.get("tool_calls", [])}
    assert not pending, f"tool_calls without tool messages: {pending}"


@SETTINGS
@given(sessions)
def test_never_evicts_protected_items_and_rendering_keeps_calls_paired(session):
    budget, llm, script = session
    Driver(budget, llm).run(script)


@SETTINGS
@given(st.one_of(sessions, swept_sessions))
def test_never_exceeds_the_budget_when_a_feasible_plan_exists(session):
    budget, llm, script = session
    Driver(budget, llm, episodes=False).run(script)


@SETTINGS
@given(st.one_of(sessions, swept_sessions))
def test_the_cost_profile_keeps_the_budget_and_the_protections(session):
    budget, llm, script = session
    Driver(budget, llm, episodes=False, profile=True).run(script)
    Driver(budget, llm, profile=True).run(script)


@settings(max_examples=25, deadline=None)
@given(st.one_of(sessions, swept_sessions))
def test_same_inputs_give_the_same_plans(session):
    budget, llm, script = session
    first, second = Driver(budget, llm), Driver(budget, llm)
    first.run(script)
    second.run(script)
    assert first.plans == second.plans
    assert first.state.model_dump_json() == second.state.model_dump_json()
    assert json.dumps(first.messages(first.request())) == json.dumps(second.messages(second.request()))


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["explore", "act", "end", "work"]), st.integers(200, 4_000)),
                min_size=5, max_size=60))
def test_exploration_never_archived_before_its_dependent_actions(script):
    driver = Driver(2_500, False)
    for kind, size in script:
        {"explore": driver.op_explore, "act": driver.op_act, "end": driver.op_end_episode}.get(
            kind, lambda size=size: driver.op_exchange("cat a.py", size, size // 2, 0, False))()
        driver.compact()
    position = {episode: n for n, (episode, _) in enumerate(driver.archive_log)}
    archived_at = dict(driver.archive_log)
    for episode in driver.state.episodes.values():
        for dep in episode.depends_on:
            # an action may cite an exploration already archived (its conclusion is in the
            # checkpoint); every dependent that existed when it was archived went first
            if dep in position and episode.begun_after_seq < archived_at[dep]:
                assert episode.id in position and position[episode.id] < position[dep]


@SETTINGS
@given(sessions, st.data())
def test_rendering_any_subset_of_a_plan_keeps_calls_paired(session, data):
    budget, llm, script = session
    driver = Driver(budget, llm)
    driver.run(script)
    entries = driver.request().pairs
    subset = [e for e in entries if data.draw(st.booleans())]
    messages = E.render_messages(subset, driver.state.items, driver.contents, driver.preview)
    check_pairing(messages)
    texts = [m for m in messages if m["role"] == "user" and m["content"].startswith("[Output of an earlier")]
    assert all(isinstance(m["content"], str) for m in texts)


def test_generated_kinds_have_one_live_item_each():
    driver = Driver(2_000, False)
    driver.run([("exchange", "cat a", 4_000, 2_000, 0, False)] * 20 + [("user", 2_500)] * 6 + [("condense",)])
    for kind in (Kind.CHECKPOINT.value, Kind.SUMMARY.value, Kind.MEMORY.value):
        live = [i for i in driver.state.items.values() if i.kind == kind]
        assert len(live) <= 1


def _first_request_after(driver: Driver, plan: E.CompactionPlan) -> tuple[list[str], int]:
    """The rendered messages of the request after ``plan`` (applied to a copy) and its working set."""
    state = driver.state.model_copy(deep=True)
    contents = dict(driver.contents)
    result = E.apply_plan(state, plan, driver.measure(plan))
    contents.update({c.item_id: E.ItemContent(text=c.text) for c in result.created})
    request = E.plan_request(state)
    messages = E.render_messages(request.pairs, state.items, contents, driver.preview)
    return [json.dumps(m, sort_keys=True) for m in messages], E.working_set_tokens(state)


def _shared(before: list[str], after: list[str]) -> int:
    return next((n for n, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))


class SweepDriver(Driver):
    """At every compaction, also plans without the cache-aware sweep and compares."""

    def compact(self) -> None:
        if E.needs_compaction(self.state):
            now = [json.dumps(m, sort_keys=True) for m in self.messages(self.request())]
            with_sweep = E.plan_fallback(self.state)
            config = self.state.config.model_copy(update={"cache_aware_sweep": False})
            without = E.plan_fallback(self.state.model_copy(update={"config": config}))
            after_with, tokens_with = _first_request_after(self, with_sweep)
            after_without, tokens_without = _first_request_after(self, without)
            assert _shared(now, after_with) == _shared(now, after_without)  # the cached prefix is kept
            assert tokens_with <= tokens_without
        super().compact()


@SETTINGS
@given(st.one_of(sessions, swept_sessions))
def test_cache_aware_sweep_keeps_the_cached_prefix_and_never_grows_the_request(session):
    """Also checks (Driver) that no sweep evicts a protected item and calls stay paired."""
    budget, llm, script = session
    SweepDriver(budget, llm).run(script)


MARKERS_CASE = [  # found by hypothesis: the sweep archived ep1 and so dropped it from the markers
    ('exchange', 'cat src/a.py', 0, 100, 0, False),
    ('exchange', 'cat src/a.py', 0, 190, 0, False),
    ('exchange', 'cat src/a.py', 0, 319, 0, False),
    ('exchange', 'cat src/a.py', 0, 521, 0, False),
    ('explore',),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 50, 0, 0, True),
    ('exchange', 'cat src/a.py', 152, 0, 0, True),
    ('note', 257),
    ('explore',),
    ('act',),
    ('end_episode',),
    ('act',),
    ('user', 638),
    ('note', 1),
    ('user', 1),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 178, 0, False),
    ('exchange', 'cat src/a.py', 0, 233, 0, False),
    ('exchange', 'cat src/a.py', 0, 347, 0, False),
    ('exchange', 'cat src/a.py', 0, 351, 0, False),
    ('exchange', 'cat src/a.py', 0, 571, 0, False),
    ('exchange', 'cat src/a.py', 338, 532, 0, False),
    ('exchange', 'cat src/a.py', 260, 0, 0, False),
    ('exchange', "sed -i 's/a/b/' a.py", 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 544, 0, False),
    ('exchange', 'cat src/a.py', 853, 273, 0, False),
    ('exchange', 'cat src/a.py', 146, 141, 0, False),
    ('end_episode',),
    ('exchange', 'cat src/a.py', 59, 0, 0, False),
    ('user', 1),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
    ('exchange', 'cat src/a.py', 0, 0, 0, False),
]


@pytest.mark.parametrize("keeps_markers", [True, False])
def test_the_sweep_never_moves_the_first_change_into_the_episode_markers(keeps_markers):
    """An exploration the sweep archives leaves the markers' concluded list, which sit in the
    stable segment, before the first change: the sweep must not archive it then."""
    driver = SweepDriver(4000, True)
    # the case was found before active episodes were bounded, which now ends it sooner
    driver.state.config = driver.state.config.model_copy(update={"sweep_keeps_markers": keeps_markers,
                                                                 "bound_active_episodes": False})
    if keeps_markers:
        driver.run(MARKERS_CASE)
    else:  # the case still arises without the guard: the test above is not vacuous
        with pytest.raises(AssertionError):
            driver.run(MARKERS_CASE)
