"""The budget notice: the first compaction of each task tells the model what was compacted,
its budget and how to recall; one live notice, at the end of the history, never evicted."""

from __future__ import annotations

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Kind, Lifecycle, Projection


def _reads(sim: Sim, count: int, seed: str) -> None:
    for n in range(count):
        sim.exchange(f"cat {seed}{n}.py", big(2_000, f"{seed}{n}"))
        sim.compact_if_needed()


def _notices(sim: Sim) -> list:
    return [i for i in sim.state.items.values() if i.kind == Kind.NOTICE.value]


def test_the_first_compaction_of_a_task_tells_the_model_and_later_ones_do_not():
    sim = Sim(budget_tokens=3_000, budget_notice=True)
    sim.system()
    E.begin_task(sim.state, "task-1")
    sim.user("read the modules")
    _reads(sim, 12, "a")
    assert sim.state.counters.compactions >= 2  # several compactions, one announcement
    [notice] = _notices(sim)
    assert notice.lifecycle == Lifecycle.PINNED and sim.state.notices == 1
    text = sim.contents[notice.id].text
    assert "budget of 3,000 tokens" in text and "recall_observation" in text
    assert "moved into the checkpoint" in text or "now show as references" in text  # what was compacted
    announced = [p for p in sim.applied if any(g.key == Kind.NOTICE.value for g in p.generated)]
    assert len(announced) == 1
    # in the history, right after the newest item of the compaction that wrote it
    history = sim.state.order[sim.state.stable_len + sim.state.memory_len:]
    position = history.index(notice.id)
    seqs = [sim.state.items[i].seq for i in history if sim.state.items[i].kind != Kind.CHECKPOINT.value]
    before, after = history[:position], history[position + 1:]
    assert all(sim.state.items[i].seq <= notice.seq for i in before if sim.state.items[i].kind != "checkpoint")
    assert after and all(sim.state.items[i].seq > notice.seq for i in after) and seqs == sorted(seqs)
    # the request carries it, and it fits
    request = sim.request()
    assert request.fits and notice.id in [e.item_id for e in request.entries]

    sim.assistant("read them all")
    E.end_task(sim.state, "task-1")
    E.begin_task(sim.state, "task-2")  # a new task: a new streak, which replaces the notice
    sim.user("now the tests")
    _reads(sim, 6, "t")
    [second] = _notices(sim)
    assert second.id != notice.id and sim.state.notices == 2 and second.projection == Projection.FULL


def test_no_notice_unless_the_session_asks_for_one():
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("read the modules")
    _reads(sim, 12, "a")
    assert sim.state.counters.compactions >= 1 and not _notices(sim) and sim.state.notices == 0
