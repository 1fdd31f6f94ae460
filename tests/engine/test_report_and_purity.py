"""The context report, JSON round trips, purity and cross-process determinism."""

import ast
import json
import os
import pathlib
import subprocess
import sys

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Projection

ENGINE = pathlib.Path(__file__).resolve().parents[2] / "workflows" / "context"
FORBIDDEN = {"os", "time", "random", "pathlib", "datetime", "logging", "asyncpg", "openai", "tiktoken",
             "socket", "subprocess", "httpx", "threading", "asyncio", "uuid", "temporalio"}


def _session() -> Sim:
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("fix auth")
    E.begin_task(sim.state, "t1")
    E.begin_episode(sim.state, "look", "exploration", "read the code")
    for n in range(8):
        sim.exchange(f"cat f{n}.py", big(1_500, str(n)), text=f"step {n}")
        sim.compact_if_needed()
    E.end_episode(sim.state, "look", "the bug is in parse()")
    for n in range(4):
        sim.exchange(f"pytest -k t{n}", "1 passed", text=f"test {n}")
    E.end_task(sim.state, "t1")
    sim.user("now add tests")
    E.begin_task(sim.state, "t2")  # explicit condensation protects the current task's items
    E.record_recall(sim.state, "obs-00003", 0, 100, 1_500)
    sim.capability("schema", 40)
    plan = E.plan_condense(sim.state, E.MemoryDoc(completed_work=["read eight files"]))
    assert isinstance(plan, E.CompactionPlan)
    sim.apply(plan)
    return sim


def test_report_lists_every_item_with_state_projection_tokens_and_reason():
    sim = _session()
    report = E.build_report(sim.state)
    assert [i.id for i in report.items] == list(sim.state.items)
    for row in report.items:
        item = sim.state.items[row.id]
        assert (row.lifecycle, row.projection, row.reason) == (item.lifecycle.value, item.projection.value, item.reason)
        assert set(row.tokens_by_projection) == {p.value for p in Projection}
        assert row.tokens_by_projection["omitted"] == 0
    assert sum(report.tokens_by_lifecycle.values()) == sum(r.tokens for r in report.items)
    assert report.working_set_tokens == E.working_set_tokens(sim.state)
    assert report.budget == E.budget(sim.state) == 3_000 - 40
    assert report.pressure == round(report.working_set_tokens / report.budget, 4)
    assert report.live_memory_id == sim.state.memory_id and report.compactions == sim.state.counters.compactions
    assert report.counters.archived_items > 0 and report.archived_range is not None
    archived = list(sim.archived.values())
    assert report.counters.archived_observations == sum(i.observation_id is not None for i in archived) > 0
    assert report.counters.archived_observations < len(archived)  # archived prose has no address
    json.loads(report.model_dump_json())


def test_the_stable_prefix_digest_changes_exactly_when_the_cached_prefix_does():
    sim = Sim(budget_tokens=3_000)
    sim.system()
    sim.user("go")
    sim.exchange("ls", "a.py b.py")
    first = sim.request()
    sim.exchange("cat a.py", "print(1)")  # appended: the laid-out prefix is the same
    appended = sim.request()
    assert appended.stable_prefix_digest() == first.stable_prefix_digest()
    for n in range(8):
        sim.exchange(f"cat f{n}.py", big(2_000, f"r{n}"))
    assert sim.compact_if_needed() is not None
    compacted = sim.request()
    assert compacted.stable_prefix_digest() != first.stable_prefix_digest()


def test_state_and_plans_survive_a_json_round_trip():
    sim = _session()
    restored = E.ContextState.model_validate_json(sim.state.model_dump_json())
    assert restored == sim.state
    assert E.plan_request(restored) == E.plan_request(sim.state)
    for _ in range(6):
        sim.exchange("cat more.py", big(2_000))
    plan = E.plan_fallback(sim.state)
    assert E.CompactionPlan.model_validate_json(plan.model_dump_json()) == plan


def test_engine_imports_nothing_impure():
    for path in sorted(ENGINE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


def test_engine_modules_stay_small():
    for path in sorted(ENGINE.glob("*.py")):
        assert len(path.read_text().splitlines()) <= 400, path.name


_SCRIPT = """
import json
from tests.engine.test_report_and_purity import _session
from workflows.context import engine as E
sim = _session()
for n in range(10):
    sim.exchange(f"cat g{n}.py", "y" * 2000, text=f"more {n}")
    sim.compact_if_needed()
print(json.dumps([p.model_dump(mode="json") for p in sim.applied]))
print(sim.state.model_dump_json())
print(json.dumps(sim.messages(sim.request())))
"""


def test_plans_are_identical_across_processes_with_different_hash_seeds():
    root = ENGINE.parents[1]
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(root))
        result = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=root, env=env, capture_output=True, text=True,
                                check=True, timeout=60)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1_000
