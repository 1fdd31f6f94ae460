"""The ``lanes`` policy: the engine as the workflow drives it, over real and synthetic sessions."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

from recordings import load_trajectory, synthetic_trajectory
from tests.replay.helpers import ROOT, require_data, sample_files, tiny_trajectory
from worker.replay.policies import LanesPolicy
from worker.replay.recorded_lane import ReplayItem, lane_batches
from worker.replay.simulator import iter_requests

BUDGETS = (16_000, 32_000)
SYNTHETIC = "synthetic-2000"
# Known engine gap (see bench/results/README.md): the fallback never evicts the newest four
# exchange groups, and one of them holds an 8k-token assistant turn (a heredoc file write),
# so the request cannot fit 16,000 tokens. Remove the entry when the engine handles it.
OVER_BUDGET_KNOWN: set[tuple[str, int]] = set()  # (file, budget) pairs the engine cannot fit yet


@dataclass
class Run:
    steps: int
    over_budget: list[tuple[int, int]]  # (step, input tokens)
    lost: set[str]
    compactions: int
    prefix_breaks: list[int]  # steps without a compaction that did not extend the previous request
    peak: int


@functools.cache
def run(source: str, budget: int) -> Run:
    traj = synthetic_trajectory(2000, seed=7) if source == SYNTHETIC else load_trajectory(source)
    result = Run(0, [], set(), 0, [], 0)
    previous: list[str] | None = None
    for req in iter_requests(traj, "lanes", budget):
        result.steps += 1
        if req.input_tokens > budget:
            result.over_budget.append((req.step, req.input_tokens))
        result.lost |= req.lost
        result.compactions += req.compacted
        result.peak = max(result.peak, req.input_tokens)
        if previous is not None and not req.compacted and req.jsons[: len(previous)] != previous:
            result.prefix_breaks.append(req.step)
        previous = req.jsons
    return result


def cases() -> list:
    out = []
    for budget in BUDGETS:
        out.append(pytest.param(SYNTHETIC, budget, id=f"{SYNTHETIC}-{budget}"))
        for path in sample_files():
            out.append(pytest.param(path, budget, id=f"{Path(path).relative_to(ROOT)}-{budget}"))
    return out


def over_budget_cases() -> list:
    out = []
    for param in cases():
        source, budget = param.values
        key = (str(Path(source).relative_to(ROOT)) if source != SYNTHETIC else source, budget)
        marks = [pytest.mark.xfail(strict=True, reason="engine: the newest four groups alone exceed the budget")
                 ] if key in OVER_BUDGET_KNOWN else []
        out.append(pytest.param(source, budget, id=param.id, marks=marks))
    return out


def needs_data(source: str) -> None:
    if source != SYNTHETIC:
        require_data()


@pytest.mark.parametrize(("source", "budget"), cases())
def test_nothing_is_lost(source: str, budget: int) -> None:
    needs_data(source)
    assert run(source, budget).lost == set()


@pytest.mark.parametrize(("source", "budget"), cases())
def test_between_compactions_each_request_extends_the_previous_one(source: str, budget: int) -> None:
    needs_data(source)
    assert run(source, budget).prefix_breaks == []


@pytest.mark.parametrize(("source", "budget"), over_budget_cases())
def test_no_request_over_the_budget(source: str, budget: int) -> None:
    needs_data(source)
    assert run(source, budget).over_budget == []


@pytest.mark.parametrize("budget", BUDGETS)
def test_long_synthetic_session_is_compacted_and_stays_bounded(budget: int) -> None:
    result = run(SYNTHETIC, budget)
    assert result.steps == 2000
    assert result.compactions >= 10  # a 2,000-turn session far exceeds either budget
    assert result.peak <= budget


def test_with_room_for_everything_lanes_sends_the_full_requests() -> None:
    traj = tiny_trajectory("You are careful.", turns=8, output="line\n" * 40)
    full = [r.jsons for r in iter_requests(traj, "full", 200_000)]
    lanes = [r.jsons for r in iter_requests(traj, "lanes", 200_000)]
    assert lanes == full


def test_lost_items_are_detected() -> None:
    """The check is not vacuous: an item neither sent nor covered is reported."""
    policy = LanesPolicy(16_000)
    batch = lane_batches(tiny_trajectory("sys", turns=3))
    for b in batch:
        policy.add(b)
    assistant = next(i for i in policy.state.items.values() if i.kind == "assistant")
    assert policy._lost([]) == list(policy.unproven)  # nothing sent: every unaddressed item lost
    assert assistant.id in policy._lost([])
    policy.state.checkpoint.first_seq, policy.state.checkpoint.last_seq = 0, assistant.seq
    assert assistant.id not in policy._lost([])  # inside the checkpoint's archived range


def test_items_are_built_as_the_workflow_builds_them() -> None:
    traj = tiny_trajectory("sys", turns=3)
    batches = lane_batches(traj)
    assert [len(b) for b in batches] == [2, 2, 2]  # system + task, then (assistant, result) per call
    assistant, result = batches[1]
    assert isinstance(result, ReplayItem)
    assert assistant.item.group == assistant.item.seq and result.item.group == assistant.item.seq
    assert result.item.observation_id == f"obs-replay-{result.item.seq:06d}"
    assert result.item.tool_class is not None and result.arguments == traj.turns[0].tool_calls[0].arguments
    assert result.content.tool_call_id == "call-0"
