"""The budget guarantee over random sessions (hypothesis): runaway assistant output, huge
user and tool text, many pinned notes and capabilities, in hosted mode (one task per
submission, replies within it) and external mode (every user message begins a task).

Each step is driven as the workflow drives it (``AgentLoop.step`` / ``prepare_request``):
compaction when needed, task assembly, then the overflow ladder from the top, planned
before any provider call. Properties:

* what would be sent fits the budget; when no rung fits, the engine's own diagnosis is that
  the protected items alone exceed it (never that something reducible was left unreduced);
* every item but the system prompt enters at most at the item share of the budget;
* nothing is lost: an item that left the request is recallable (an observation address) or
  recorded in the checkpoint or the rolling summary.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Kind, Lifecycle, Projection
from workflows.context.ledger import GENERATED_KINDS

SIZES = st.sampled_from([20, 400, 3_000, 12_000, 60_000, 210_000])  # characters: small to runaway
op = st.one_of(
    st.tuples(st.just("exchange"), SIZES, st.sampled_from([0, 0, 1])),
    st.tuples(st.just("exchange"), SIZES, st.sampled_from([0, 0, 1])),
    st.tuples(st.just("runaway"), SIZES),
    st.tuples(st.just("user"), SIZES),
    st.tuples(st.just("note"), SIZES),
    st.tuples(st.just("capability"), st.integers(10, 3_000), st.sampled_from(["step", "task"])),
    st.tuples(st.just("task")),
)
sessions = st.tuples(st.sampled_from([4_000, 8_000, 16_000, 32_000]), st.sampled_from(["hosted", "external"]),
                     st.lists(op, min_size=5, max_size=40))


class Session(Sim):
    def __init__(self, budget: int, mode: str) -> None:
        super().__init__(budget_tokens=budget)
        self.mode = mode
        self.tasks = 0
        self.capabilities = 0
        self.sent = 0
        self.unfit = 0
        self.system("You are a careful coding agent. " * 20)
        self.new_task()

    def new_task(self) -> None:
        if self.state.current_task is not None:
            E.end_task(self.state, self.state.current_task)
        self.tasks += 1
        E.begin_task(self.state, f"task-{self.tasks}")

    # --- what the activities store (an address for everything that may need one) -------
    def play(self, step: tuple) -> None:
        kind = step[0]
        if kind == "exchange":
            self.exchange("cat big.txt", big(step[1], "out"), exit_code=step[2])
        elif kind == "runaway":
            self.assistant(big(step[1], "thinking"), observation_id=f"obs-a{self.seq + 1}")
        elif kind == "user":
            if self.mode == "external":
                self.new_task()
            self.user(big(step[1], "ask"), obs=True)
        elif kind == "note":
            self.note(big(step[1], "rule"), observation_id=f"obs-n{self.seq + 1}")
        elif kind == "capability":
            self.capabilities += 1
            self.capability(f"cap-{self.capabilities}", step[1], step[2])
        elif kind == "task" and self.mode == "hosted":
            self.new_task()
            self.user("the next task")
        self.check_entry_bounds()
        self.request_step()

    def check_entry_bounds(self) -> None:
        bound = self.state.config.max_item_tokens
        for item in self.state.items.values():
            if item.kind in (Kind.SYSTEM.value, Kind.CAPABILITY.value) or item.kind in GENERATED_KINDS:
                continue
            assert item.cost(Projection.FULL) <= bound or item.projection != Projection.FULL, item.id
            if item.lifecycle != Lifecycle.ARCHIVED and "entry:" in item.reason:
                assert item.cost() <= bound, (item.id, item.cost(), bound)

    # --- the workflow's request step -------------------------------------------------------
    def request_step(self) -> None:
        self.compact_if_needed()
        assembly = E.plan_assembly(self.state)
        if assembly is not None:
            assert self.apply(assembly).applied
        for ladder in E.OVERFLOW_LADDER:
            plan = self.request(ladder)
            if plan.fits:
                assert plan.total_tokens <= plan.budget
                self.sent += 1
                self.check_nothing_lost(plan)
                break
        else:
            self.unfit += 1
            assert "protected items alone need" in plan.reason, plan.reason
        E.end_step(self.state)

    def check_nothing_lost(self, plan: E.RequestPlan) -> None:
        sent = {e.item_id for e in plan.entries}
        for item_id, item in self.added.items():
            if item_id in sent or item.observation_id is not None or item.kind == Kind.CAPABILITY.value:
                continue
            current = self.state.items.get(item_id)
            if current is not None and current.projection != Projection.OMITTED:
                continue
            covered = self.state.checkpoint.covers(item.seq) or self.state.summary.covers(item.seq)
            task_ended = current is not None and current.projection == Projection.OMITTED
            assert covered or task_ended, f"{item_id} ({item.kind}) left the request unrecorded"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions)
def test_every_planned_request_fits_or_the_protected_items_alone_do_not(session):
    budget, mode, script = session
    sim = Session(budget, mode)
    for step in script:
        sim.play(step)
    assert sim.sent + sim.unfit == len(script)
    event(f"unfit steps: {min(sim.unfit, 3)}")
