"""The budget as a property of the construction (issue 13): no single item can overflow a
request, whatever the data; task assembly keeps the stable segment current.

Each test names the behaviour measured on the engine before rules 2 that it pins down.
"""

from __future__ import annotations

import json

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.config import cost_profile
from workflows.context.items import Lifecycle, Projection


def _fits_every_rung(sim: Sim) -> E.RequestPlan:
    sim.compact_if_needed()
    plan = sim.request()
    assert plan.fits, plan.reason
    return plan


def test_a_runaway_assistant_message_enters_bounded_and_the_request_fits():
    # measured: one 208,089-character answer stayed whole, the request 56,762 tokens at 16,000
    sim = Sim(budget_tokens=16_000)
    sim.system()
    sim.user("fix the failing test")
    runaway = sim.assistant(big(208_089, "loop"), observation_id="obs-runaway")
    assert runaway.cost(Projection.FULL) > 16_000
    assert runaway.projection == Projection.COMPACT and "oversized-answer" in runaway.reason
    plan = _fits_every_rung(sim)
    text = sim.messages(plan)[-1]["content"]
    assert "observation://obs-runaway" in text and len(text) <= sim.preview + 400


def test_runaway_tool_call_arguments_are_bounded_too():
    sim = Sim(budget_tokens=8_000)
    sim.system()
    sim.user("write the file")
    answer = sim.assistant("", [("write_file", '{"path": "a.txt", "content": "' + big(120_000) + '"}')],
                           observation_id="obs-args")
    assert answer.projection == Projection.COMPACT
    assert answer.cost() <= sim.state.config.max_item_tokens


@pytest.mark.parametrize("budget", [4_000, 8_000])
def test_user_input_is_bounded_by_a_share_of_the_budget_not_a_character_constant(budget):
    # measured: 31,999 characters stayed full at a 4,000 or 8,000 budget; the request never fit
    sim = Sim(budget_tokens=budget)
    sim.system()
    message = sim.user(big(31_999, "spec"), obs=True)
    assert message.projection == Projection.REFERENCE
    assert message.cost() <= sim.state.config.max_item_tokens
    _fits_every_rung(sim)


def test_user_input_that_fits_its_share_stays_whole_whatever_its_length():
    # measured: a message that fit a 132,000-token budget was sent as a reference at 32,000 characters
    sim = Sim(context_window=200_000, budget_tokens=132_000)
    sim.system()
    message = sim.user(big(100_000, "doc"), obs=True)
    assert message.cost(Projection.FULL) < sim.state.config.max_item_tokens
    assert message.projection == Projection.FULL


def test_an_oversized_note_or_unknown_kind_enters_as_a_source_reference():
    sim = Sim(budget_tokens=8_000)
    sim.system()
    sim.user("go")
    note = sim.note(big(60_000, "note"), observation_id="obs-note")
    other = sim._add("customer_ticket", "user", E.ItemContent(text=big(60_000, "ticket")), observation_id="obs-t")
    assert note.projection == other.projection == Projection.REFERENCE
    _fits_every_rung(sim)


def test_the_system_prompt_is_never_shrunk_and_an_unfit_request_names_it():
    sim = Sim(budget_tokens=2_000)
    prompt = sim.system(big(20_000, "rules"))
    assert prompt.projection == Projection.FULL
    sim.user("hello")
    for ladder in E.OVERFLOW_LADDER:
        plan = sim.request(ladder)
        assert not plan.fits and prompt.id in plan.reason and "do not fit" in plan.reason


def test_rules_1_keep_the_old_entry_projections():
    sim = Sim(budget_tokens=8_000, rules_version=1)
    sim.system()
    sim.user("go")
    assert sim.assistant(big(60_000), observation_id="obs-a").projection == Projection.FULL


# --- task assembly: the stable segment is current in every request ---------------------------

def _stable_ids(sim: Sim) -> list[str]:
    plan = sim.request()
    return [e.item_id for e in plan.entries[: plan.stable_entries]]


def _assemble(sim: Sim) -> E.CompactionPlan | None:
    plan = E.plan_assembly(sim.state)
    if plan is not None:
        assert sim.apply(plan).applied
    return plan


def _markers(sim: Sim) -> str:
    memory = sim.state.generated.get("episodes")
    return "" if memory is None else sim.contents[memory.item_id].text


def test_a_begun_episode_is_in_the_markers_of_the_next_request_and_an_ended_one_leaves():
    # measured: between compactions the markers missed a just-begun episode and kept an ended one
    sim = Sim()
    sim.system()
    sim.user("investigate")
    _assemble(sim)  # the first request lays the system prompt out in the stable segment
    sim.exchange("ls", "a")
    assert _assemble(sim) is None  # nothing to change: the prompt cache is kept
    E.begin_episode(sim.state, "probe", "exploration", "find the slow query")
    assert _assemble(sim) is not None
    assert "probe" in _markers(sim) and "find the slow query" in _markers(sim)
    assert sim.state.generated["episodes"].item_id in _stable_ids(sim)
    assert _assemble(sim) is None  # stable until something changes again
    E.end_episode(sim.state, "probe", "the index was missing")
    assert _assemble(sim) is not None
    assert "[Active episodes]" not in _markers(sim)  # no longer active: listed with its conclusion instead
    assert "- probe: find the slow query => the index was missing" in _markers(sim)


def test_a_pinned_note_arriving_between_compactions_joins_the_stable_segment():
    # measured: it sat at the end of history until the next compaction
    sim = Sim()
    sim.system()
    sim.user("task")
    sim.exchange("ls", "a\nb")
    note = sim.note("Never push to main.")
    assert note.id not in _stable_ids(sim)
    assembled = _assemble(sim)
    assert assembled is not None and not assembled.transitions
    assert note.id in _stable_ids(sim)
    assert sim.state.counters.compactions == 0  # assembly is not a compaction


def test_old_submissions_roll_into_the_summary_at_task_assembly_not_under_pressure():
    # measured: older submissions rolled only under pressure, and pass 3 kept one, not two, before the current
    sim = Sim()
    sim.system()
    users, replies = [], []
    for n in range(5):
        if n:
            E.end_task(sim.state, f"t{n - 1}")
        E.begin_task(sim.state, f"t{n}")
        users.append(sim.user(f"submission {n}: please do thing {n}"))
        sim.exchange(f"echo {n}", f"{n}")
        replies.append(sim.user(f"reply {n}: yes, go on"))  # the agent asked; the user answered in the task
        sim.exchange(f"echo again {n}", f"{n}")
    assert not E.needs_compaction(sim.state)
    _assemble(sim)
    pinned = {i.id for i in sim.state.items.values() if i.kind == "user" and i.lifecycle == Lifecycle.PINNED}
    # the current task's user messages, and the two most recent before its submission
    assert pinned == {users[4].id, replies[4].id, users[3].id, replies[3].id}
    summary = sim.contents[sim.state.generated["summary"].item_id].text
    assert "submission 0" in summary and "reply 0" in summary
    assert sim.state.summary.covers(users[0].seq)
    assert _assemble(sim) is None  # rolled once, at the task's assembly; the layout then holds


def test_replies_within_a_task_never_roll_at_assembly():
    sim = Sim()
    sim.system()
    E.begin_task(sim.state, "t0")
    for n in range(8):
        sim.user(f"reply {n}")
        sim.exchange(f"echo {n}", f"{n}")
        _assemble(sim)
    assert "summary" not in sim.state.generated


def test_pass_3_keeps_the_current_submission_and_two_before_it():
    sim = Sim(budget_tokens=1_500)
    sim.system()
    users = []
    for n in range(4):
        users.append(sim.user(f"submission {n} " + big(300, str(n))))
        for k in range(3):
            sim.exchange(f"cat f{n}{k}", big(400, f"{n}{k}"))
    plan = E.plan_fallback(sim.state)
    rolled = {t.item_id for t in plan.transitions if t.lifecycle == Lifecycle.ARCHIVED}
    assert not rolled & {u.id for u in users[-3:]}


def test_assembly_is_off_under_rules_1():
    sim = Sim(rules_version=1)
    sim.system()
    sim.user("task")
    E.begin_episode(sim.state, "probe", "exploration", "look")
    assert E.plan_assembly(sim.state) is None


def test_a_huge_subagent_handoff_enters_as_head_and_tail():
    sim = Sim(budget_tokens=8_000)
    sim.system()
    sim.user("delegate the audit")
    spawn = sim.assistant("", [("spawn_subagent", '{"brief": "audit"}')])
    handoff = sim._add("handoff", "tool", E.ItemContent(text=big(90_000, "finding"), tool_call_id=spawn.tool_call_ids[0],
                                                        tool_name="spawn_subagent"),
                       tool_name="spawn_subagent", tool_call_ids=spawn.tool_call_ids, observation_id="obs-handoff")
    assert handoff.projection == Projection.COMPACT
    assert handoff.cost() <= sim.state.config.max_item_tokens
    _fits_every_rung(sim)


def test_the_ladder_is_descended_before_any_call_when_full_does_not_fit():
    # measured: the full rung was sent (90,640 tokens at 80,000) while the reference rung was 5,710
    sim = Sim(budget_tokens=3_000)  # no compaction ran before this request (as after a condensation)
    sim.system()
    sim.user("audit the logs")
    for n in range(10):
        sim.exchange(f"cat log{n}", big(1_400, f"log{n}"))
    plans = E.plan_fitting(sim.state)
    assert [p.ladder for p in plans] == [Projection.FULL, Projection.REFERENCE]
    assert not plans[0].fits and plans[1].fits and plans[1].total_tokens <= plans[1].budget
    assert E.plan_fitting(sim.state, start=1) == plans[1:]


def test_when_no_rung_fits_every_rung_is_returned_with_the_reason():
    sim = Sim(budget_tokens=1_000)
    sim.system(big(8_000, "rules"))
    sim.user("hi")
    plans = E.plan_fitting(sim.state)
    assert [p.ladder for p in plans] == list(E.OVERFLOW_LADDER)
    assert not any(p.fits for p in plans) and "protected items alone need" in plans[-1].reason


def test_many_large_tool_calls_share_the_preview_when_bounded():
    sim = Sim(budget_tokens=8_000)
    sim.system()
    sim.user("write all the files")
    calls = [("write_file", json.dumps({"path": f"f{n}.py", "content": big(5_000, str(n))})) for n in range(30)]
    answer = sim.assistant("", calls, observation_id="obs-many")
    assert answer.projection == Projection.COMPACT
    assert answer.cost() <= sim.state.config.max_item_tokens


def _parallel_reads(**options) -> Sim:
    """One turn of eight parallel file reads at 8,000 tokens (issue 29): each enters as a head
    and tail of about 1,000 tokens, and together they are more than the budget holds."""
    sim = Sim(budget_tokens=8_000, llm_condensation=False, **cost_profile(llm_condensation=False), **options)
    sim.system()
    sim.user("read the modules and fix the parser")
    E.begin_task(sim.state, "task-1")
    calls = [("Read", json.dumps({"file_path": f"/src/m{n}.py"})) for n in range(8)]
    turn = sim.assistant("Reading the eight modules.", calls)
    for n, call_id in enumerate(turn.tool_call_ids):
        sim.tool(call_id, big(20_000, f"def parse_{n}"), name="Read", arguments=calls[n][1])
    sim.compact_if_needed()
    return sim


def test_a_turn_of_parallel_reads_too_large_together_is_sent_with_the_fewest_outputs_referenced():
    sim = _parallel_reads()
    plans = E.plan_fitting(sim.state)
    last = plans[-1]
    assert last.fits and last.total_tokens <= last.budget and last.ladder == E.OVERFLOW_LADDER[-1]
    outputs = {entry.item_id: entry.projection for entry in last.entries
               if sim.state.items[entry.item_id].kind == "tool_result"}
    referenced = [item_id for item_id, projection in outputs.items() if projection == Projection.REFERENCE]
    assert len(outputs) == 8 and 1 <= len(referenced) < 4  # as few as it takes: most stay in view
    # one fewer reference would not fit: the saving of the smallest one chosen is needed
    smallest = min(sim.state.items[i].cost(Projection.COMPACT) - sim.state.items[i].cost(Projection.REFERENCE)
                   for i in referenced)
    assert last.total_tokens + smallest > last.budget
    # each referenced output stays recallable at its address; the state itself is unchanged
    assert all(sim.state.items[i].observation_id for i in referenced)
    assert all(sim.state.items[i].projection == Projection.COMPACT for i in outputs)
    messages = json.dumps(sim.messages(last))
    assert all(f"observation://{sim.state.items[i].observation_id}" in messages for i in referenced)


def test_runs_recorded_before_refuse_the_turn_of_parallel_reads():
    plans = E.plan_fitting(_parallel_reads(shrink_newest_group=False).state)
    assert not plans[-1].fits and "protected items alone need" in plans[-1].reason
