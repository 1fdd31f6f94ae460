"""Item lifecycle: what add_item decides, task and step boundaries, recall coverage."""

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Item, Lifecycle, Projection, ToolClass


def test_unknown_item_kinds_are_pinned():
    sim = Sim()
    item = sim._add("hologram", "user", E.ItemContent(text="??"))
    assert item.lifecycle == Lifecycle.PINNED and item.reason == "pinned:unknown-kind"


@pytest.mark.parametrize("kind", ["system", "user", "note", "decision"])
def test_system_user_notes_and_decisions_are_pinned(kind):
    sim = Sim()
    item = sim._add(kind, "user", E.ItemContent(text="keep me"))
    assert item.lifecycle == Lifecycle.PINNED and item.reason == f"pinned:{kind}"


def test_tool_results_are_classified_when_added():
    sim = Sim()
    sim.user("go")
    _, read = sim.exchange("grep -n foo a.py", "1: foo")
    _, write = sim.exchange("sed -i 's/a/b/' a.py", "")
    _, run = sim.exchange("pytest -q", "1 passed")
    _, failed = sim.exchange("pytest -q", "1 failed", exit_code=1)
    assert [i.tool_class for i in (read, write, run, failed)] == [ToolClass.READ, ToolClass.WRITE, ToolClass.RUN,
                                                                 ToolClass.ERROR]
    assert all(i.lifecycle == Lifecycle.ACTIVE for i in (read, write, run, failed))


def test_tool_results_join_the_group_and_episode_of_their_call():
    sim = Sim()
    sim.user("go")
    E.begin_episode(sim.state, "inspect", "exploration", "read the code")
    a = sim.assistant("", [("bash", '{"command":"ls"}'), ("bash", '{"command":"pwd"}')])
    t1 = sim.tool(a.tool_call_ids[1], "/repo")
    t2 = sim.tool(a.tool_call_ids[0], "a.py")
    assert t1.group == t2.group == a.seq
    assert t1.episode == t2.episode == a.episode == "inspect"


def test_large_tool_output_enters_compact_and_small_output_full():
    sim = Sim()
    sim.user("go")
    _, small = sim.exchange("cat a.py", "x = 1")
    _, large = sim.exchange("cat big.log", big(sim.preview + 1))
    assert small.projection == Projection.FULL
    assert large.projection == Projection.COMPACT and "large-output-compact" in large.reason


def test_oversized_user_input_enters_as_a_source_reference():
    sim = Sim()  # budget 16,000: one item may take at most half of it in full
    fits = sim.user(big(sim.preview * 3, "doc"), obs=True)  # about 6,000 tokens
    assert fits.projection == Projection.FULL
    item = sim.user(big(sim.preview * 6, "doc"), obs=True)  # about 12,000 tokens
    assert item.cost(Projection.FULL) > sim.state.config.max_item_tokens
    assert item.projection == Projection.REFERENCE and item.lifecycle == Lifecycle.PINNED
    message = sim.messages(sim.request())[1]["content"]
    assert message.startswith("Authoritative source: observation://")


def test_add_item_refuses_duplicates_and_non_increasing_seq():
    sim = Sim()
    sim.user("one")
    with pytest.raises(E.EngineError, match="already added"):
        E.add_item(sim.state, Item(id="use-1", seq=10, kind="user", role="user"))
    with pytest.raises(E.EngineError, match="seqs must increase"):
        E.add_item(sim.state, Item(id="x", seq=1, kind="user", role="user"))
    with pytest.raises(E.EngineError, match="only the engine generates"):
        E.add_item(sim.state, Item(id="m", seq=11, kind="memory", role="user"))


def _finished_task(sim: Sim) -> dict:
    sim.system()
    sim.user("task one")
    E.begin_task(sim.state, "t1")
    ids = {}
    ids["a1"], ids["t1"] = sim.exchange("cat a.py", "code", text="Reading a.py")
    ids["a2"], ids["t2"] = sim.exchange("pytest", "ok")  # no prose: pure tool traffic
    ids["final"] = sim.assistant("Fixed: a.py now validates tokens.")
    E.end_task(sim.state, "t1")
    return ids


def test_task_end_retains_assistant_prose_and_omits_tool_traffic():
    sim = Sim()
    ids = _finished_task(sim)
    items = sim.state.items
    assert items[ids["a1"].id].lifecycle == Lifecycle.RETAINED and items[ids["a1"].id].reason == "task-ended:retained"
    assert items[ids["final"].id].lifecycle == Lifecycle.RETAINED and items[ids["final"].id].terminal
    for key in ("t1", "t2", "a2"):
        item = items[ids[key].id]
        assert item.projection == Projection.OMITTED and item.reason == "task-ended:tool-traffic-omitted"
    messages = sim.messages(sim.request())
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant"]
    assert "tool_calls" not in messages[2]


def test_task_end_clears_task_capabilities_and_abandons_open_episodes():
    sim = Sim()
    sim.user("go")
    E.begin_task(sim.state, "t1")
    cap = Item(id="skill-1", seq=0, kind="capability", role="system", tokens={Projection.FULL: 300})
    assert E.admit_capability(sim.state, cap, "task").admitted
    E.begin_episode(sim.state, "look", "exploration", "look around")
    end = E.end_task(sim.state, "t1")
    assert end.cleared_capabilities == ["skill-1"] and "skill-1" not in sim.state.items
    assert end.abandoned_episodes == ["look"] and sim.state.episodes["look"].status == "abandoned"
    assert sim.state.current_task is None


def test_exhaustive_task_may_not_end_while_unread_ranges_remain():
    sim = Sim()
    E.begin_task(sim.state, "review", exhaustive=True)
    doc = sim.user(big(40_000, "contract"), obs=True)
    E.record_recall(sim.state, doc.observation_id, 0, 16_000, 40_000)
    E.record_recall(sim.state, doc.observation_id, 20_000, 10_000, 40_000)
    before = sim.state.model_dump_json()
    with pytest.raises(E.IncompleteCoverageError) as error:
        E.end_task(sim.state, "review")
    assert error.value.unread == {doc.observation_id: [(16_000, 20_000), (30_000, 40_000)]}
    assert f"observation://{doc.observation_id}?offset=16000&limit=4000" in str(error.value)
    assert sim.state.model_dump_json() == before
    E.record_recall(sim.state, doc.observation_id, 16_000, 4_000, 40_000)
    E.record_recall(sim.state, doc.observation_id, 30_000, 16_000, 40_000)
    E.end_task(sim.state, "review")


def test_targeted_task_may_end_with_unread_ranges():
    sim = Sim()
    E.begin_task(sim.state, "peek")
    doc = sim.user(big(40_000), obs=True)
    E.record_recall(sim.state, doc.observation_id, 0, 100, 40_000)
    assert E.unread_ranges(sim.state, doc.observation_id) == [(100, 40_000)]
    E.end_task(sim.state, "peek")


def test_recall_coverage_merges_overlapping_ranges():
    sim = Sim()
    for offset, limit in [(0, 10), (5, 10), (30, 5), (15, 15)]:
        E.record_recall(sim.state, "obs-1", offset, limit, 40)
    assert E.unread_ranges(sim.state, "obs-1") == [(35, 40)]
    assert E.unread_ranges(sim.state, "obs-never") == []


def test_only_the_current_task_can_end_and_tasks_do_not_nest():
    sim = Sim()
    E.begin_task(sim.state, "a")
    with pytest.raises(E.TaskError, match="still running"):
        E.begin_task(sim.state, "b")
    with pytest.raises(E.TaskError, match="not the current task"):
        E.end_task(sim.state, "b")


# --- capability context -------------------------------------------------------------------
def _capability(tokens: int, item_id: str = "tool-schema") -> Item:
    return Item(id=item_id, seq=0, kind="capability", role="system", tokens={Projection.FULL: tokens})


def test_capability_ceiling_is_usable_budget_minus_margin():
    sim = Sim()  # usable input 16,000
    assert sim.state.config.capability_ceiling == 16_000 - 512
    assert Sim(model_known=False).state.config.capability_ceiling == 8_000 - 512
    assert Sim(model_known=False, rules_version=1).state.config.capability_ceiling == 8_000


def test_capability_refusal_reports_need_margin_ceiling():
    sim = Sim(tool_definition_tokens=1_000)
    before = sim.state.model_dump_json()
    admission = E.admit_capability(sim.state, _capability(20_000), "task")
    assert not admission.admitted
    assert (admission.need, admission.margin, admission.ceiling) == (20_000, 512, 15_488)
    for figure in ("20000", "512", "15488"):
        assert figure in admission.message
    assert sim.state.model_dump_json() == before


def test_unknown_model_uses_the_old_8000_ceiling_less_the_margin():
    sim = Sim(model_known=False)
    assert not E.admit_capability(sim.state, _capability(7_820), "step").admitted  # over 8,000 - 512
    assert E.admit_capability(sim.state, _capability(7_400), "step").admitted


def test_capability_tokens_are_charged_against_the_conversation_budget():
    sim = Sim(tool_definition_tokens=500)
    assert E.budget(sim.state) == 15_500
    E.admit_capability(sim.state, _capability(2_000), "task")
    assert E.budget(sim.state) == 13_500


def test_step_capabilities_clear_after_one_step_and_render_last():
    sim = Sim()
    sim.user("go")
    E.admit_capability(sim.state, _capability(100, "step-skill"), "step")
    E.admit_capability(sim.state, _capability(100, "task-skill"), "task")
    sim.exchange("ls", "a.py")
    plan = sim.request()
    assert plan.entries[-1].item_id == "step-skill" and plan.step_entries == 1
    assert E.end_step(sim.state) == ["step-skill"]
    assert "task-skill" in sim.state.items and "step-skill" not in sim.state.items


def test_capabilities_are_never_evicted_automatically():
    sim = Sim()
    sim.user("go")
    E.admit_capability(sim.state, _capability(3_000, "schema"), "task")
    for n in range(40):
        sim.exchange(f"cat f{n}", big(3_000, str(n)))
        sim.compact_if_needed()
    assert sim.state.counters.compactions > 0
    assert sim.state.items["schema"].lifecycle == Lifecycle.PINNED
    assert "schema" in [e.item_id for e in sim.request().entries]


def test_manual_skill_that_does_not_fit_is_skipped_with_a_status_message():
    sim = Sim()
    status = E.admit_manual_skill(sim.state, _capability(50_000, "huge-skill"))
    assert status.status == "skipped" and status.message.startswith("Skill huge-skill skipped:")
    assert "huge-skill" not in sim.state.items
    assert E.admit_manual_skill(sim.state, _capability(100, "small-skill")).status == "admitted"
