"""What archived items named stays in the checkpoint (issue 16, part 2): the worker's name
extractor (activities/item_names.py), the checkpoint's bounded list (sessions started before
issue 29; new ones list none), and the fallback with the cost profile a new session runs."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from activities.item_names import MAX_NAME_CHARS, MAX_NAMES, names_of
from activities.items import CALL_CHARS, MAX_CALLS, call_lines
from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.checkpoint import (
    ADDRESS_ROOM_TOKENS,
    LINE_TOKENS,
    POOL_LINES,
    CheckpointData,
    EpisodeNote,
    _episode_lines,
    _Length,
    _lines,
    _observation_line,
    checkpoint_text,
    chosen_lines,
    lines_to_show,
)
from workflows.context.config import cost_profile
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind
from workflows.context.pins import check_pin
from workflows.context.text import chars_to_tokens


def test_names_are_paths_then_symbols_calls_first():
    content = ItemContent(
        text="The test in tests/test_nodes.py fails: parse_args returns None, see os.path.join.",
        tool_calls=[ToolCall(id="c1", name="bash", arguments=json.dumps({"command": "sed -n 1,40p src/app/cli.py"}))])
    assert names_of(content) == ["src/app/cli.py", "tests/test_nodes.py", "parse_args", "os.path.join"]


def test_plain_words_urls_addresses_and_overlong_names_are_left_out():
    long_path = "a/" + "b" * MAX_NAME_CHARS
    text = (f"Done. Everything works, see https://example.com/docs/page and observation://obs-s-main-000012; "
            f"also {long_path} and setup.cfg")
    assert names_of(ItemContent(text=text)) == ["setup.cfg"]


def test_names_are_bounded_distinct_and_in_first_mention_order():
    text = " ".join(f"pkg/mod_{n}.py" for n in range(40)) + " pkg/mod_0.py"
    names = names_of(ItemContent(text=text))
    assert names == [f"pkg/mod_{n}.py" for n in range(MAX_NAMES)]
    assert names_of(ItemContent(text=text)) == names  # a retried activity reports the same


def test_undecodable_call_arguments_are_read_as_text():
    content = ItemContent(text="", tool_calls=[ToolCall(id="c", name="edit", arguments="{not json: lib/x_y.py")])
    assert names_of(content) == ["lib/x_y.py"]


def _item(seq: int, names: list[str], kind: Kind = Kind.ASSISTANT) -> Item:
    return Item(id=f"i{seq}", seq=seq, kind=kind, role="assistant", digest=f"step {seq}", names=names)


def test_checkpoint_keeps_the_most_recent_names_first_without_repeats():
    data = CheckpointData()
    data.record_item(_item(1, ["a.py", "f_one"]), max_names=3)
    data.record_item(_item(2, ["b.py", "a.py"]), max_names=3)
    assert data.names == ["b.py", "a.py", "f_one"]
    data.record_item(_item(3, ["c.py"]), max_names=3)
    assert data.names == ["c.py", "b.py", "a.py"]  # the oldest left the bounded list
    text = checkpoint_text(data, cap_tokens=1_000)
    assert "Files and symbols the archived items mentioned (most recent first): c.py, b.py, a.py" in text


def test_checkpoint_without_names_is_as_before():
    data = CheckpointData()
    data.record_item(_item(1, ["a.py"]))  # max_names 0: the engine's default
    assert data.names == []
    assert "Files and symbols" not in checkpoint_text(data, cap_tokens=1_000)


def test_names_are_shed_oldest_first_to_fit_the_cap_and_anchors_go_before_the_last_names():
    data = CheckpointData()
    for seq in range(1, 41):
        data.record_item(_item(seq, [f"module_{seq:02d}.py"]), max_names=100)
    full = checkpoint_text(data, cap_tokens=10_000)
    assert "module_40.py" in full and "module_01.py" in full
    capped = checkpoint_text(data, cap_tokens=180)
    assert "module_40.py" in capped and "module_01.py" not in capped
    listed = capped.split("(most recent first): ")[1].split("\n")[0].split(", ")
    assert listed == [f"module_{seq:02d}.py" for seq in range(40, 40 - len(listed), -1)]


def _session_with_names(profile: bool, names_index: bool = False, key_lines: bool = True) -> Sim:
    """``profile``: the cost profile of a new session; ``names_index``: as sessions started
    before issue 29 ran it (the checkpoint lists names); ``key_lines``: off as sessions started
    before the checkpoint's lines ran it."""
    options = cost_profile(llm_condensation=False, names_index=names_index, key_lines=key_lines) if profile else {}
    sim = Sim(budget_tokens=6_000, llm_condensation=False, **options)
    sim.system()
    sim.user("fix the failing test")
    E.begin_task(sim.state, "task-1")
    for n in range(60):
        arguments = json.dumps({"command": f"cat src/pkg/module_{n}.py"})
        assistant = sim.assistant(f"Reading module_{n}.", [("bash", arguments)],
                                  names=[f"src/pkg/module_{n}.py", f"helper_{n}"])
        sim.tool(assistant.tool_call_ids[0], big(1_200, f"def helper_{n}"), arguments=arguments)
        sim.compact_if_needed()
        assert sim.request().fits
    return sim


def _checkpoint(sim: Sim) -> str:
    return next(m["content"] for m in sim.messages(sim.request()) if "[Context checkpoint]" in m["content"])


def test_with_the_names_index_the_checkpoint_names_what_archived_turns_worked_on():
    """Sessions started before issue 29 keep listing names (their runs replay as recorded)."""
    sim = _session_with_names(profile=True, names_index=True)
    state = sim.state
    archived = [i for i in sim.archived.values() if i.kind == Kind.ASSISTANT.value]
    assert archived, "the session compacted"
    checkpoint = _checkpoint(sim)
    newest = max(archived, key=lambda i: i.seq)
    assert newest.names[0] in checkpoint and newest.names[1] in checkpoint
    assert state.checkpoint.names[0] in (newest.names[0], newest.names[1])
    # without the profile the same session's checkpoint lists none of them
    plain = _session_with_names(profile=False)
    assert "Files and symbols" not in json.dumps(plain.messages(plain.request()))


def test_a_new_session_lists_no_names_and_gives_their_room_to_recallable_addresses():
    """A bare name is no content the model can act on; the addresses of archived outputs are
    (one recall reads each back). The same session, with the names index and without: no
    name list, and more addresses in a checkpoint under the same cap."""
    listed = _session_with_names(profile=True, names_index=True)
    plain = _session_with_names(profile=True)
    assert plain.state.config.checkpoint_names == 0 and listed.state.config.checkpoint_names == 192
    with_index, without = _checkpoint(listed), _checkpoint(plain)
    assert "Files and symbols" in with_index and "Files and symbols" not in without
    assert without.count("observation://") > with_index.count("observation://")
    # a name of an archived output is in the request only where content carries it
    request = json.dumps(plain.messages(plain.request()))
    archived_names = {n for i in plain.archived.values() if i.kind == Kind.ASSISTANT.value for n in i.names}
    assert archived_names and not all(name in request for name in archived_names)


def _observation_lines(checkpoint: str) -> list[str]:
    return [line for line in checkpoint.splitlines() if line.startswith("- observation://")]


def test_a_new_sessions_checkpoint_shows_each_archived_output_beside_the_call_that_made_it():
    """Which address holds which file: every listed output names its own call (the one its
    tool result answered), so the model can recall the right one instead of re-running it."""
    sim = _session_with_names(profile=True)
    assert sim.state.config.checkpoint_calls
    lines = _observation_lines(_checkpoint(sim))
    assert len(lines) > 3, "the session archived outputs"
    by_address = {item.observation_id: item for item in sim.added.values() if item.observation_id}
    call_of = {call.id: call for content in sim.contents.values() for call in content.tool_calls}
    for line in lines:
        address = line.split("observation://")[1].split(" ")[0]
        output = by_address[address]
        command = json.loads(call_of[output.tool_call_ids[0]].arguments)["command"]
        # brief, as new sessions show it (patch checkpoint-lines): the call and the output's size
        assert line.endswith(f"— bash {command} ({output.size_chars} chars)"), line
    # sessions started before issue 29: the tool name and the output's digest only
    older = _observation_lines(_checkpoint(_session_with_names(profile=True, names_index=True)))
    assert older and not any(" → " in line for line in older)
    # sessions started between issue 29 and the checkpoint's lines: the call, then the digest
    digests = _observation_lines(_checkpoint(_session_with_names(profile=True, key_lines=False)))
    assert digests and all(" → " in line for line in digests)


def test_call_lines_read_as_the_agent_wrote_the_call():
    calls = [ToolCall(id=f"c{n}", name="Read", arguments=json.dumps({"file_path": f"/src/m{n}.py", "limit": 20}))
             for n in range(MAX_CALLS + 3)]
    assert call_lines(ItemContent(text="reading", tool_calls=calls[:2])) == ["Read /src/m0.py 20", "Read /src/m1.py 20"]
    assert len(call_lines(ItemContent(text="", tool_calls=calls))) == MAX_CALLS  # bounded metadata
    odd = [ToolCall(id="x", name="bash", arguments="not json {"), ToolCall(id="y", name="ls", arguments="")]
    assert call_lines(ItemContent(text="", tool_calls=odd)) == ["bash not json {", "ls"]
    long = call_lines(ItemContent(text="", tool_calls=[ToolCall(id="z", name="bash", arguments=json.dumps(
        {"command": "echo " + "x" * 500}))]))[0]
    assert len(long) == CALL_CHARS and long.endswith("…")
    # an agent writing its command in prose: the last fenced block, on one line
    prose = "THOUGHT: look first.\n\n```bash\nls src\n```\nthen\n```bash\ngrep -n \"def main\"\n  src/app.py\n```"
    assert call_lines(ItemContent(text=prose)) == ['bash grep -n "def main" src/app.py']
    assert call_lines(ItemContent(text="no command here")) == []
    # a hostile call: a lone surrogate in its decoded arguments never reaches a payload
    hostile = ToolCall(id="s", name="bash", arguments=json.dumps({"command": "echo \ud800 done"}))
    line = call_lines(ItemContent(text="", tool_calls=[hostile]))[0]
    assert line.encode("utf-8") and line.startswith("bash echo ") and line.endswith(" done")


def test_with_the_profile_the_fallback_compacts_at_its_soft_limit_and_aims_lower():
    sim = _session_with_names(profile=True)
    config = sim.state.config
    budget = E.budget(sim.state)
    assert config.compact_at(budget) == int(budget * 0.75) < budget
    assert config.compaction_target(budget) == int(int(budget * 0.75) * 0.3)
    plans = [p for p in sim.applied if p.mode == "fallback"]
    assert plans, "the session compacted"
    for plan in plans:
        # compacted once past the soft limit, before the budget was reached
        assert config.compact_at(budget) < plan.tokens_before <= budget
        assert plan.target == config.compaction_target(budget)
        assert plan.fits_budget


def test_pinned_content_stays_within_the_compaction_target():
    sim = _session_with_names(profile=True)
    budget = E.budget(sim.state)
    target = sim.state.config.compaction_target(budget)
    assert check_pin(sim.state, target + 1).fits is False
    check = check_pin(sim.state, 10)
    assert check.allowance == target and check.fits == (check.pinned + 10 <= target)
    assert check_pin(sim.state, target - check.pinned).fits


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["assistant", "tool"]), st.lists(st.text(min_size=1, max_size=30),
                                                                              max_size=4)), max_size=40),
       st.integers(0, 3), st.data())
def test_the_shedding_arithmetic_measures_the_text_it_would_render(archived, episodes, data):
    """checkpoint_text sheds by computed lengths (_Length); they equal the rendered text's."""
    checkpoint = CheckpointData()
    for seq, (kind, names) in enumerate(archived):
        item = Item(id=f"i{seq}", seq=seq, kind=kind, role=kind, digest=f"d{seq}" * (seq % 7), names=names,
                    observation_id=f"obs-{seq}" if kind == "tool" else None, size_chars=seq,
                    lines=[f"line {seq} of {name}" for name in names[:3]])
        checkpoint.record_item(item, max_names=50, pool_lines=POOL_LINES)
    for n in range(episodes):
        checkpoint.record_episode(EpisodeNote(id=f"ep{n}", kind="exploration", goal="g" * n, conclusion="c",
                                              obs_ids=[f"obs-{n}"] * n))
    checkpoint.dropped_observations, checkpoint.dropped_episodes = data.draw(st.integers(0, 3)), data.draw(
        st.integers(0, 3))
    episode_lines = [_episode_lines(note) for note in checkpoint.episodes]
    anchors = [f"- {a}" for a in checkpoint.anchors]
    observations = [_observation_line(note) for note in checkpoint.observations]
    key_lines = [f"- {line}" for line in checkpoint.lines]
    length = _Length(checkpoint, episode_lines, anchors, observations, "hint", key_lines)
    keep = {"episodes": data.draw(st.integers(0, len(episode_lines))), "anchors": data.draw(st.integers(0, len(anchors))),
            "names": data.draw(st.integers(0, len(checkpoint.names))),
            "observations": data.draw(st.integers(0, len(observations))),
            "lines": data.draw(st.integers(0, len(key_lines)))}
    rendered = "\n".join(_lines(checkpoint, episode_lines, anchors, observations, keep, "hint", key_lines))
    assert length(keep) == len(rendered)


def _shed_one_by_one(checkpoint: CheckpointData, cap_tokens: int, lines: int = 0) -> str:
    """checkpoint_text as it shed before: one step at a time, re-rendering every line."""
    episodes = [_episode_lines(note) for note in checkpoint.episodes]
    anchors = [f"- {a}" for a in checkpoint.anchors]
    observations = [_observation_line(note) for note in checkpoint.observations]
    lines = min(lines, max(0, (cap_tokens - ADDRESS_ROOM_TOKENS) // LINE_TOKENS))
    key_lines = [f"- {line}" for line in chosen_lines(checkpoint.lines, lines)]
    keep = {"observations": len(observations), "anchors": len(anchors), "episodes": len(episodes),
            "names": len(checkpoint.names), "lines": len(key_lines)}
    order = [("observations", 4), ("names", 16), ("lines", 4), ("anchors", 0), ("episodes", 1), ("observations", 0),
             ("names", 0), ("lines", 0), ("episodes", 0)]
    hint = "recall exact tool output with recall_observation(address, offset, limit) on the listed addresses."

    def render() -> str:
        return "\n".join(_lines(checkpoint, episodes, anchors, observations, keep, hint, key_lines))

    while chars_to_tokens(len(render())) > cap_tokens:
        name = next((n for n, floor in order if keep[n] > floor), None)
        if name is None:
            break
        keep[name] = max(0, keep[name] - (8 if name == "names" else 1))
    return render()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60), st.integers(0, 120), st.integers(0, 12), st.integers(0, 30), st.integers(40, 1_500),
       st.integers(0, 40))
def test_shedding_by_bisection_leaves_out_what_one_step_at_a_time_did(outputs, names, turns, dropped, cap, lines):
    checkpoint = CheckpointData(dropped_observations=dropped)
    for seq in range(max(outputs, turns)):
        if seq < outputs:
            checkpoint.record_item(Item(id=f"o{seq}", seq=2 * seq, kind="tool_result", role="tool", digest="ls " * seq,
                                        observation_id=f"obs-{seq}", size_chars=seq,
                                        lines=[f"def handler_{seq}(x_{n}) in pkg/mod_{n}.py" for n in range(seq % 4)]),
                                   max_names=200, pool_lines=POOL_LINES)
        if seq < turns:
            checkpoint.record_item(_item(2 * seq + 1, []), max_names=200)
    checkpoint.record_item(_item(10_000, [f"name_{n}" * (1 + n % 3) for n in range(names)]), max_names=200)
    shown = lines_to_show(checkpoint, cap, lines)
    assert checkpoint_text(checkpoint, cap, shown_lines=shown) == _shed_one_by_one(checkpoint, cap, lines)


def test_the_profile_previews_a_quarter_of_the_budget_but_never_less_than_a_usable_recall_chunk():
    """A recall returns at most the preview, so under 8,000 tokens the profile keeps half the
    budget (as before), and never less than 4,000 characters above it."""
    profile = cost_profile(llm_condensation=False)
    # budget: (characters before, with the profile); Sim charges no tool definitions
    expected = {4_000: (2_000, 2_000), 12_000: (6_000, 4_000), 32_000: (16_000, 8_000), 80_000: (16_000, 16_000)}
    for budget, (before, now) in expected.items():
        assert Sim(budget_tokens=budget).state.config.effective_preview_chars == before
        assert Sim(budget_tokens=budget, **profile).state.config.effective_preview_chars == now
