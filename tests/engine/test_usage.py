"""workflows/context/usage.py: totals, cost units, prices, and the calibration of our token
estimates (bounded, garbage ignored), and the budget it divides."""

from __future__ import annotations

import json

import pytest

from worker.settings import Settings
from workflows.context import engine
from workflows.context.budget import budget
from workflows.context.config import EngineConfig
from workflows.context.usage import (
    CALIBRATION_WINDOW,
    RATIO_MAX,
    RATIO_MIN,
    Calibration,
    CallUsage,
    ModelPrice,
    UsageTotals,
    add_counts,
    budget_ratio,
    calibrate,
    cost_units,
    price_for,
    record_call,
    sanitized,
)


def test_the_ratio_is_the_first_sample_then_converges_on_a_steady_provider():
    calibration = calibrate(Calibration(), 1300, 1000)
    assert calibration.ratio == 1.3 and calibration.samples == 1
    for estimate in range(900, 1900, 50):  # the provider always counts 1.3x ours
        calibration = calibrate(calibration, round(estimate * 1.3), estimate)
    assert calibration.ratio == pytest.approx(1.3, abs=0.001)


def test_a_changed_provider_moves_the_ratio_within_a_few_windows():
    calibration = Calibration()
    for _ in range(30):
        calibration = calibrate(calibration, 1000, 1000)
    for _ in range(5 * CALIBRATION_WINDOW):
        calibration = calibrate(calibration, 1300, 1000)
    assert calibration.ratio == pytest.approx(1.3, abs=0.01)


@pytest.mark.parametrize(("provider", "estimate"), [(0, 100), (-5, 100), (100, 0)])
def test_no_count_is_ignored(provider, estimate):
    calibration = calibrate(Calibration(ratio=1.2, samples=4), provider, estimate)
    assert (calibration.ratio, calibration.samples, calibration.ignored) == (1.2, 4, 1)


def test_garbage_is_bounded():
    assert calibrate(Calibration(), 10**15, 10).ratio == RATIO_MAX
    assert calibrate(Calibration(), 1, 10**6).ratio == RATIO_MIN
    calibration = Calibration()
    for n in range(100):
        calibration = calibrate(calibration, 10**12 if n % 2 else 1, 500)
        assert RATIO_MIN <= calibration.ratio <= RATIO_MAX


def test_the_budget_only_ever_shrinks():
    totals = UsageTotals()
    assert budget_ratio(totals, "m") == 1.0
    record_call(totals, "agent", "m", CallUsage(prompt=80, estimate=100))
    assert budget_ratio(totals, "m") == 1.0  # the provider counts less: our count is already safe
    record_call(totals, "agent", "other", CallUsage(prompt=200, estimate=100))
    assert budget_ratio(totals, "m") == 1.0 and budget_ratio(totals, "other") == 2.0


def test_calibrated_budget_divides_the_usable_input_only():
    config = EngineConfig(context_window=20_000, max_output_tokens=4_000, tool_definition_tokens=1_000,
                          budget_tokens=10_000)
    state = engine.new_state(config)
    assert budget(state) == 9_000
    state.config = config.model_copy(update={"token_ratio": 1.25})
    assert budget(state) == 8_000 - 1_000
    assert state.config.effective_preview_chars == config.effective_preview_chars  # rendering unchanged
    assert state.config.max_item_tokens == config.max_item_tokens
    with pytest.raises(ValueError):
        EngineConfig.model_validate(config.model_dump() | {"token_ratio": 0.5})  # never below 1


def test_totals_by_kind_cached_share_and_cost():
    totals = UsageTotals()
    price = ModelPrice(input=3.0, cached_input=0.3, output=15.0)
    for kind, prompt, cached, completion in [("agent", 1000, 800, 50), ("condenser", 500, 0, 200)]:
        cost = cost_units(price, prompt, cached, completion)
        record_call(totals, kind, "m", CallUsage(prompt=prompt, cached=cached, completion=completion, estimate=1,
                                                 cost=cost))
    assert (totals.prompt, totals.cached, totals.completion, totals.calls) == (1500, 800, 250, 2)
    assert totals.cached_share == round(800 / 1500, 4)
    assert totals.cost == pytest.approx((200 * 3 + 800 * 0.3 + 50 * 15 + 500 * 3 + 200 * 15) / 1e6)
    assert totals.by_kind["agent"].cached_share == 0.8 and totals.by_kind["condenser"].calls == 1
    add_counts(totals, "subagent", totals.by_kind["agent"])
    assert totals.calls == 3 and totals.by_kind["subagent"].prompt == 1000


def test_sanitized_counts():
    assert sanitized(None, None, None) == (0, 0, 0, False)
    assert sanitized(-3, 5, -1) == (0, 0, 0, False)
    assert sanitized(100, 500, 7) == (100, 100, 7, True)  # cached at most prompt


def test_prices_by_exact_name_longest_prefix_then_default():
    prices = {"gpt-4o": ModelPrice(input=1), "gpt-4o*": ModelPrice(input=2), "gpt-*": ModelPrice(input=3),
              "*": ModelPrice(input=4)}
    assert [price_for(prices, m).input for m in ("gpt-4o", "gpt-4o-mini", "gpt-5", "claude")] == [1, 2, 3, 4]
    assert price_for({"gpt-*": ModelPrice()}, "claude") is None and price_for(None, "x") is None
    assert cost_units(ModelPrice(input=2.0, output=4.0), 1_000_000, 500_000, 0) == 2.0  # cached: the input price


def test_lanes_prices_from_json_or_a_file(tmp_path, monkeypatch):
    table = {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}
    monkeypatch.setenv("LANES_PRICES", json.dumps(table))
    assert Settings().prices["gpt-4o-mini"].cached_input == 0.075
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv("LANES_PRICES", str(path))
    assert Settings().prices["gpt-4o-mini"].output == 0.6
    monkeypatch.delenv("LANES_PRICES")
    assert Settings().prices == {}
