"""Budget figures (DESIGN §7) and the 80 % -> 60 % rule."""

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E


def test_usable_input_reserves_the_output_at_most_half_the_window():
    assert E.EngineConfig(context_window=128_000, max_output_tokens=16_000).usable_input == 112_000
    assert E.EngineConfig(context_window=8_000, max_output_tokens=16_000).usable_input == 4_000
    assert E.EngineConfig(context_window=8_000, max_output_tokens=16_000, budget_tokens=3_000).usable_input == 3_000


def test_a_config_stored_under_the_budgets_old_name_loads_and_is_written_under_its_name():
    stored = {"context_window": 128_000, "max_output_tokens": 4_096, "budget_override": 16_000}  # a checkpoint's
    config = E.EngineConfig.model_validate(stored)
    assert config.budget_tokens == 16_000 and config.usable_input == 16_000
    written = config.model_dump(mode="json")
    assert written["budget_tokens"] == 16_000 and "budget_override" not in written
    assert E.EngineConfig.model_validate(written) == config


@pytest.mark.parametrize("budget,preview", [(100, 128), (10_000, 5_000), (32_000, 16_000), (200_000, 16_000)])
def test_preview_is_min_16000_max_128_half_the_budget(budget, preview):
    assert E.EngineConfig(context_window=10**6, max_output_tokens=0, budget_tokens=budget).effective_preview_chars == preview


def test_budget_includes_the_fixed_cost_of_tool_definitions():
    sim = Sim(tool_definition_tokens=2_500)
    assert E.budget(sim.state) == 16_000 - 2_500


def test_at_80_percent_pressure_compaction_aims_for_60_percent():
    sim = Sim(budget_tokens=10_000, llm_condensation=True)
    sim.user("go")
    while not E.needs_compaction(sim.state):
        sim.exchange("cat f.py", big(2_000))
    assert E.pressure(sim.state) >= 0.8
    sim.apply(E.plan_fallback(sim.state))
    assert E.pressure(sim.state) <= 0.6


def test_generation_is_bumped_by_every_working_set_change():
    sim = Sim()
    seen = [sim.state.generation]

    def changed() -> None:
        assert sim.state.generation > seen[-1]
        seen.append(sim.state.generation)

    for operation in (
        lambda: sim.user("go"),
        lambda: E.begin_task(sim.state, "t"),
        lambda: E.begin_episode(sim.state, "e", "exploration", "g"),
        lambda: sim.exchange("ls", "a"),
        lambda: E.end_episode(sim.state, "e", "c"),
        lambda: sim.capability("s", 10, "step"),
        lambda: E.end_step(sim.state),
        lambda: E.end_task(sim.state, "t"),
    ):
        operation()
        changed()


def test_estimates_are_named_as_estimates_and_conservative():
    text = "def f(x):\n    return x + 1\n" * 20
    assert E.estimate_tokens(text) == len(text) // 3 + 4
