"""The reference policies: ``full`` is the naive prompt, ``masking-M`` masks all but M outputs."""

from __future__ import annotations

import pytest

from activities.tokens import count_message_tokens, count_tokens
from recordings import FORMAT_SYNTHETIC, ToolResultRec, Trajectory, Turn, load_trajectory
from tests.replay.helpers import naive_prompt, require_data, sample_params, tiny_trajectory
from worker.replay.policies import TOOL_DEFINITION_TOKENS, masked_text, parse_policy
from worker.replay.simulator import MIN_CACHED_PREFIX_TOKENS, TokenCounter, iter_requests, replay_trajectory
from workflows.context import ToolCall

BIG_SYSTEM = "You are a careful engineer. " + " ".join(f"rule{i}: be precise." for i in range(400))


def tok(messages: list[dict]) -> int:
    return sum(count_message_tokens(m) for m in messages)


# --------------------------------------------------------------------------- full


@pytest.mark.parametrize("path", sample_params())
def test_full_request_is_the_naive_prompt(path: str) -> None:
    require_data()
    traj = load_trajectory(path)
    steps = list(iter_requests(traj, "full"))
    assert len(steps) == len(traj.turns)
    for req in steps:
        assert req.messages == naive_prompt(traj, req.step), f"step {req.step}"
        assert req.input_tokens == tok(req.messages) + TOOL_DEFINITION_TOKENS
        assert not req.lost and not req.compacted


def test_full_input_tokens_grow_quadratically() -> None:
    # text protocol: every turn adds the same two messages, so request k = base + k * per_turn
    turns = [Turn(assistant_text="Next step.\n```bash\nls\n```",
                  tool_calls=[ToolCall(id=f"call-{j}", name="bash", arguments='{"command": "ls"}')],
                  results=[ToolResultRec(tool_call_id=f"call-{j}", tool_name="bash", output="x " * 300,
                                         exit_code=0, render_role="user")])
             for j in range(39)] + [Turn(assistant_text="Done.", tool_calls=[], results=[])]
    traj = Trajectory(id="same", source_format=FORMAT_SYNTHETIC, system="Be brief.", task="List files.",
                      turns=turns, tool_protocol="text")
    counter = TokenCounter()
    sizes = [req.input_tokens for req in iter_requests(traj, "full", counter=counter)]
    base = tok([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "List files."}])
    per_turn = tok([{"role": "assistant", "content": turns[0].assistant_text},
                    {"role": "user", "content": "x " * 300}])
    n = len(sizes)
    assert sizes == [TOOL_DEFINITION_TOKENS + base + k * per_turn for k in range(n)]
    total = replay_trajectory(traj, ["full"]).policies["full"].input_tokens
    assert total == n * (TOOL_DEFINITION_TOKENS + base) + per_turn * n * (n - 1) // 2  # quadratic in n
    assert counter.misses == 4  # four distinct messages, each tokenised once


def test_cached_tokens_on_a_tiny_trajectory() -> None:
    assert count_tokens(BIG_SYSTEM) >= MIN_CACHED_PREFIX_TOKENS
    traj = tiny_trajectory(BIG_SYSTEM, turns=4)
    requests = [naive_prompt(traj, k) for k in range(4)]
    steps = list(iter_requests(traj, "full"))
    # every request extends the previous one: all of request k-1 (tool definitions first) is a
    # cache hit at step k
    assert [s.cached_input_tokens for s in steps] == [0] + [tok(r) + TOOL_DEFINITION_TOKENS for r in requests[:-1]]
    assert [s.shared_prefix_messages for s in steps] == [0, 2, 4, 6]
    totals = replay_trajectory(traj, ["full"]).policies["full"]
    inputs = sum(tok(r) + TOOL_DEFINITION_TOKENS for r in requests)
    cached = sum(tok(r) + TOOL_DEFINITION_TOKENS for r in requests[:-1])
    assert (totals.input_tokens, totals.cached_input_tokens) == (inputs, cached)
    assert totals.cost_units == pytest.approx(inputs - cached + 0.1 * cached)


def test_a_prefix_under_1024_tokens_is_not_cached() -> None:
    traj = tiny_trajectory("You are helpful.", turns=4)
    steps = list(iter_requests(traj, "full"))
    assert all(s.shared_prefix_messages == 2 * s.step for s in steps)  # identical prefixes...
    assert all(tok(s.messages[: s.shared_prefix_messages]) + TOOL_DEFINITION_TOKENS < MIN_CACHED_PREFIX_TOKENS
               for s in steps)
    assert [s.cached_input_tokens for s in steps] == [0, 0, 0, 0]  # ...too short to be cached


def test_masking_rewrites_old_messages_and_loses_the_cache_behind_them() -> None:
    traj = tiny_trajectory(BIG_SYSTEM, turns=4)
    S, T = {"role": "system", "content": BIG_SYSTEM}, {"role": "user", "content": "Read the files."}
    naive = naive_prompt(traj, 3)
    A0, O0, A1, O1, A2, O2 = naive[2:]
    M0 = {**O0, "content": masked_text(O0["content"])}
    M1 = {**O1, "content": masked_text(O1["content"])}
    assert M0["content"] == "[Old tool output omitted. 4 characters.]"
    expected = [[S, T], [S, T, A0, O0], [S, T, A0, M0, A1, O1], [S, T, A0, M0, A1, M1, A2, O2]]
    steps = list(iter_requests(traj, "masking-1"))
    assert [s.messages for s in steps] == expected
    # step 2 rewrote O0 (cache stops before it), step 3 rewrote O1
    cached = [0, tok([S, T]), tok([S, T, A0]), tok([S, T, A0, M0, A1])]
    assert [s.cached_input_tokens for s in steps] == [c and c + TOOL_DEFINITION_TOKENS for c in cached]
    assert [sorted(s.lost) for s in steps][-1] == ["itm-000003", "itm-000005"]  # masked outputs are gone


# --------------------------------------------------------------------------- masking


def assert_keeps_last(traj: Trajectory, keep: int) -> None:
    for req in iter_requests(traj, f"masking-{keep}"):
        observations: list[int] = []
        naive = naive_prompt(traj, req.step, observations)
        assert len(req.messages) == len(naive)
        verbatim = set(observations[-keep:]) if keep else set()
        for index, (sent, original) in enumerate(zip(req.messages, naive, strict=False)):
            if index in observations and index not in verbatim:
                assert sent == {**original, "content": masked_text(original["content"])}, (req.step, index)
            else:
                assert sent == original, (req.step, index)
        assert len(req.lost) == len(observations) - len(verbatim)


@pytest.mark.parametrize("keep", [0, 1, 3, 10])
def test_masking_keeps_exactly_the_last_m_observations(keep: int) -> None:
    assert_keeps_last(tiny_trajectory("sys", turns=14, output="out " * 50), keep)
    assert_keeps_last(tiny_trajectory("sys", turns=14, output="out " * 50, protocol="text"), keep)


@pytest.mark.parametrize("path", sample_params(per_folder=1))
def test_masking_10_on_real_files(path: str) -> None:
    require_data()
    assert_keeps_last(load_trajectory(path), 10)


def test_policy_names() -> None:
    assert parse_policy("masking-10").keep == 10
    assert parse_policy("full").kind == "full" and parse_policy("lanes").kind == "lanes"
    for bad in ("masking", "masking-", "masking--1", "mask-3", "Full", "lanes2"):
        with pytest.raises(ValueError, match="unknown policy"):
            parse_policy(bad)
