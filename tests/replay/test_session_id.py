"""Token figures do not depend on the session id (issue 16): observation addresses quote the
session id, so the replay plans and counts every session under one constant id and only the
requests it hands out carry the session's own addresses."""

from __future__ import annotations

import re

import pytest

from recordings import load_trajectory, synthetic_trajectory
from tests.replay.helpers import require_data, sample_files
from worker.replay.recorded_lane import SESSION_ID
from worker.replay.simulator import TokenCounter, iter_requests, replay_trajectory

POLICIES = ["full", "masking-10", "lanes"]
SHORT, LONG = "s1", "a-much-longer-session-id.2026-11-30_x"  # lengths 2 and 36
TIMINGS = ("plan_ms", "compaction_plan_ms")


def figures(traj, budget: int, session_id: str) -> dict:
    result = replay_trajectory(traj, POLICIES, budget, session_id=session_id)
    return {name: {k: v for k, v in totals.as_dict().items() if not k.startswith(TIMINGS)}
            for name, totals in result.policies.items()}


def test_token_figures_equal_for_two_session_ids() -> None:
    traj = synthetic_trajectory(120, seed=3)
    short, long = figures(traj, 8_000, SHORT), figures(traj, 8_000, LONG)
    assert short["lanes"]["compactions"] > 0  # references, previews and a checkpoint quote addresses
    assert short == long


def test_requests_carry_the_sessions_own_addresses() -> None:
    """What recall is asked for is the real session's address, never the constant one."""
    traj = synthetic_trajectory(120, seed=3)
    addresses: set[str] = set()
    for req in iter_requests(traj, "lanes", 8_000, session_id=LONG):
        for message, counted in zip(req.messages, req.jsons, strict=True):
            shown = str(message)
            addresses |= set(re.findall(r"observation://(obs-[A-Za-z0-9_.-]+?-\d{6})", shown))
            assert f"obs-{SESSION_ID}-" not in shown
            assert ("observation://" in shown) == ("observation://" in counted)
    assert addresses and all(a.startswith(f"obs-{LONG}-") for a in addresses)


def test_counting_the_real_addresses_would_differ() -> None:
    """The equality above is not vacuous: the addresses' own tokens differ between the ids."""
    traj = synthetic_trajectory(120, seed=3)
    counter = TokenCounter()
    real = {sid: sum(counter.count(str(m), m) for req in iter_requests(traj, "lanes", 8_000, session_id=sid)
                     for m in req.messages) for sid in (SHORT, LONG)}
    assert real[SHORT] != real[LONG]


@pytest.mark.parametrize("index", [0, -1])
def test_recorded_sessions_too(index: int) -> None:
    require_data()
    traj = load_trajectory(sample_files(1)[index])
    assert figures(traj, 16_000, SHORT) == figures(traj, 16_000, LONG)
