"""Continuing the last plan (workflows/context/continuation.py) on generated sessions.

The gateway sends a call's request before the session stores its turns when ``continues``
says they continue the last plan. What must hold: whenever it says so, the session, once it
has added them, would plan exactly that request (``plan_was``), with no compaction or layout
change due, within the budget. A wrong "yes" would send a request the session never planned.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tests.engine.sim import big
from tests.engine.test_properties import SETTINGS, Driver, op
from workflows.context import continuation
from workflows.context import engine as E
from workflows.context.items import Item, Projection

# between the property tests' operations: an answer calling tools, planned, then its outputs
calls = st.tuples(st.just("calls"), st.lists(st.integers(1, 6_000), min_size=1, max_size=8))
# ... or an answer in text, then the user's message (a text-protocol agent's tool output; the
# conversation is one task, as the gateway's are)
says = st.tuples(st.just("says"), st.integers(1, 12_000))
sessions = st.tuples(st.sampled_from([1_500, 3_000, 6_000, 12_000]), st.booleans(),
                     st.lists(st.one_of(op, calls, calls, says), min_size=10, max_size=50))


class Continuing(Driver):
    """Plays a script; at each answer calling tools, plans as the session does, takes the
    facts, then adds the outputs and checks the prediction against the session's next plan."""

    def __init__(self, budget: int, llm: bool):
        super().__init__(budget, llm)
        self.continued = 0
        self.declined = 0

    def op_calls(self, sizes: list[int]) -> None:
        answer = self.assistant("checking", [("bash", json.dumps({"command": f"cat f{n}"})) for n in range(len(sizes))])
        plan, facts = self._planned()
        outputs = [self.tool(call_id, big(size, "o"), arguments=json.dumps({"command": f"cat f{n}"}))
                   for n, (call_id, size) in enumerate(zip(answer.tool_call_ids, sizes, strict=True))]
        self._check(plan, facts, outputs)

    def op_says(self, size: int) -> None:
        self.assistant(big(200, "p"))
        plan, facts = self._planned()
        self._check(plan, facts, [self.user(big(size, "u"), obs=True)])

    def _planned(self) -> tuple[E.RequestPlan, continuation.ContinuationFacts | None]:
        """The answer's step, as the session takes it: compaction, then assembly, then the plan."""
        self.compact()
        if (assembly := E.plan_assembly(self.state)) is not None:
            assert self.apply(assembly).applied
        plan = E.plan_fitting(self.state, 0)[-1]
        E.end_step(self.state)
        self.generation = self.state.generation
        return plan, continuation.facts_of(self.state, plan, next_seq=self.seq + 1, request_tokens=plan.total_tokens,
                                           lane="main", model="m", bound_above_tokens=None, preview_lines=False,
                                           users_continue=True)

    def _check(self, plan: E.RequestPlan, facts: continuation.ContinuationFacts | None, outputs: list[Item]) -> None:
        generation = self.generation
        measured = [self._as_measured(item) for item in outputs]
        if facts is None or not continuation.continues(facts, measured, self.preview):
            self.declined += 1
            return
        assert facts.generation == generation
        sent = [*plan.pairs, *[(item.id, Projection.FULL) for item in outputs]]
        assert continuation.plan_was(self.state, continuation.entries_digest(sent))
        self.continued += 1

    def _as_measured(self, item: Item) -> Item:
        """The item as the caller measures it: before the lane assigned it anything."""
        added = self.added[item.id]
        return Item(id=added.id, seq=added.seq, kind=added.kind, role=added.role, size_chars=added.size_chars,
                    tokens=dict(added.tokens), tool_call_ids=list(added.tool_call_ids),
                    observation_id=added.observation_id, tool_name=added.tool_name)


def test_a_users_message_continues_only_where_it_joins_the_task():
    driver = Continuing(12_000, False)
    driver.op_says(400)
    assert driver.continued == 1
    driver.assistant("noted")
    plan, facts = driver._planned()
    assert facts is not None
    not_joining = facts.model_copy(update={"users_continue": False})
    message = driver._as_measured(driver.user("and another thing"))
    assert continuation.continues(facts, [message], driver.preview)
    assert not continuation.continues(not_joining, [message], driver.preview)


@SETTINGS
@given(sessions)
def test_a_continued_request_is_the_one_the_session_plans(session):
    budget, llm, script = session
    driver = Continuing(budget, llm)
    driver.run(script)
    assert driver.continued + driver.declined == sum(step[0] in ("calls", "says") for step in script)


def test_small_outputs_continue_and_large_or_late_ones_do_not():
    """The fast path is taken when it should be (a check that ``continues`` is not always no)."""
    driver = Continuing(12_000, False)
    for _ in range(5):
        driver.op_calls([400, 300])
    assert driver.continued == 5 and driver.declined == 0
    driver.op_calls([30_000])  # far larger than a full output may be: it enters as a preview
    assert driver.declined == 1
    for _ in range(20):  # outputs until the working set would reach compaction
        driver.op_calls([6_000, 6_000])
        driver.compact()
        if driver.declined > 1:
            break
    assert driver.declined == 2 and E.needs_compaction(driver.state) is False  # compacted after the miss
