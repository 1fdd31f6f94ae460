"""Lines of archived items in the checkpoint (issue 29): content the model can act on, where a
list of names only said that a file existed. The activity's choice of an item's key lines
(activities/item_names.py), the checkpoint's choice of the lines it shows (checkpoint.py), and
a session running the profile of new sessions."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from activities.item_names import LINE_CHARS, LINES_HEAD_CHARS, MAX_LINES, key_lines_of
from tests.engine.sim import Sim
from workflows.context import engine as E
from workflows.context.checkpoint import (
    ADDRESS_ROOM_TOKENS,
    LINE_TOKENS,
    LINES_HEADER,
    POOL_LINES,
    CheckpointData,
    checkpoint_text,
    chosen_lines,
    lines_to_show,
)
from workflows.context.config import cost_profile
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind
from workflows.context.names import line_names


def test_an_items_key_lines_together_name_the_most_in_the_order_they_appear():
    text = "\n".join([
        "collected 3 items",
        "src/app/cli.py:12: from pkg.util import load_config, save_config",
        # three names, every one already carried by the line above: it adds nothing
        "src/app/cli.py:40: load_config(path) or save_config(path)",
        "plain words only here",
        "def parse_args(argv):",
        "tests/test_cli.py::test_parse_args FAILED",
        "    raise ValueError(bad_value)",
        "    " + "very_long_name_" * 20,  # one name, clipped
    ])
    lines = key_lines_of(ItemContent(text=text))
    assert lines == ["src/app/cli.py:12: from pkg.util import load_config, save_config",
                     "def parse_args(argv):",
                     "tests/test_cli.py::test_parse_args FAILED",
                     "raise ValueError(bad_value)"]  # whitespace collapsed (clip)
    assert len(lines) == MAX_LINES
    assert key_lines_of(ItemContent(text=text)) == lines  # a retried activity reports the same
    assert key_lines_of(ItemContent(text="nothing to name\nat all")) == []


def test_a_calls_arguments_count_as_lines_and_every_line_is_clipped_to_one_short_line():
    command = "sed -n 1,40p src/app/cli.py && grep -n parse_args src/app/main_loop.py " + "x" * 300
    content = ItemContent(text="", tool_calls=[ToolCall(id="c", name="bash", arguments=json.dumps({"command": command}))])
    (line,) = key_lines_of(content)
    assert line.startswith("sed -n 1,40p src/app/cli.py") and len(line) == LINE_CHARS and line.endswith("…")


def test_a_hostile_calls_lone_surrogate_never_reaches_a_payload():
    command = "echo \ud800 src/app_main.py parse_args"
    content = ItemContent(text="", tool_calls=[ToolCall(id="s", name="bash", arguments=json.dumps({"command": command}))])
    (line,) = key_lines_of(content)
    assert line.encode("utf-8") and line.startswith("echo ") and line.endswith(" src/app_main.py parse_args")


def test_a_long_outputs_key_lines_come_from_its_head_and_tail_only():
    """The activity stays fast on a huge output: its middle is not searched."""
    filler = "ok\n" * (LINES_HEAD_CHARS // 3 + 10_000)
    middle = "pkg/a_b.py pkg/c_d.py pkg/e_f.py pkg/g_h.py"
    tail = "tests/t_x.py::test_y_z FAILED"
    lines = key_lines_of(ItemContent(text=filler + middle + "\n" + filler + tail))
    assert lines == [tail]


def _line(*names: str) -> str:
    return "use " + " and ".join(names)


def test_shown_lines_are_picked_for_the_names_the_archived_lines_repeat_most():
    pool = [_line("alpha_one"), _line("beta_two", "gamma_three"), _line("alpha_one", "xx_yy"), _line("alpha_one")]
    # alpha_one is carried by three lines: the first pick is the line with alpha_one and xx_yy (gain 3 + 1)
    assert chosen_lines(pool, 1) == [_line("alpha_one", "xx_yy")]
    # then beta_two and gamma_three; a line adding no name is never shown, however many are allowed
    assert chosen_lines(pool, 10) == [_line("beta_two", "gamma_three"), _line("alpha_one", "xx_yy")]
    assert chosen_lines(pool, 0) == [] and chosen_lines([], 5) == []


def test_names_the_request_still_shows_make_a_line_worth_nothing():
    pool = [_line("alpha_one"), _line("beta_two")]
    assert chosen_lines(pool, 1, shown=frozenset({"alpha_one"})) == [_line("beta_two")]
    assert chosen_lines(pool, 5, shown=frozenset({"alpha_one", "beta_two"})) == []


def test_ties_go_to_the_more_recent_line():
    pool = [_line("new_name"), _line("old_name")]  # most recent first
    assert chosen_lines(pool, 1) == [_line("new_name")]


def _archived_output(seq: int, lines: list[str]) -> Item:
    return Item(id=f"o{seq}", seq=seq, kind="tool_result", role="tool", digest=f"out {seq}",
                observation_id=f"obs-{seq}", size_chars=100, lines=lines)


def test_the_pool_keeps_the_most_recent_lines_without_repeats_and_is_bounded():
    data = CheckpointData()
    data.record_item(_archived_output(1, ["a_b", "c_d"]), pool_lines=POOL_LINES)
    data.record_item(_archived_output(2, ["e_f", "a_b"]), pool_lines=POOL_LINES)
    assert data.lines == ["e_f", "a_b", "c_d"]
    for seq in range(3, 3 + POOL_LINES):
        data.record_item(_archived_output(seq, [f"line_{seq}"]), pool_lines=POOL_LINES)
    assert len(data.lines) == POOL_LINES and data.lines[0] == f"line_{2 + POOL_LINES}"
    untouched = CheckpointData()
    untouched.record_item(_archived_output(1, ["a_b"]))  # pool_lines off: sessions started before
    assert untouched.lines == []


def test_the_checkpoint_shows_the_chosen_lines_and_fewer_under_a_small_cap():
    data = CheckpointData()
    for seq in range(40):
        data.record_item(_archived_output(seq, [f"def handler_{seq}(request_{seq}) in pkg/mod_{seq}.py"]),
                         pool_lines=POOL_LINES)
    text = checkpoint_text(data, 1_600, shown_lines=lines_to_show(data, 1_600, 48))
    shown = text.split(LINES_HEADER + "\n")[1].split("\nObservation references")[0].splitlines()
    assert len(shown) == min(48, (1_600 - ADDRESS_ROOM_TOKENS) // LINE_TOKENS)
    assert all(line.startswith("- def handler_") for line in shown)
    small = checkpoint_text(data, 700, shown_lines=lines_to_show(data, 700, 32))
    assert small.count("- def handler_") == (700 - ADDRESS_ROOM_TOKENS) // LINE_TOKENS
    tight = ADDRESS_ROOM_TOKENS + LINE_TOKENS - 1
    assert LINES_HEADER not in checkpoint_text(data, tight, shown_lines=lines_to_show(data, tight, 32))
    assert LINES_HEADER not in checkpoint_text(data, cap_tokens=1_600)  # no lines: as before


def _session(key_lines: bool) -> Sim:
    sim = Sim(budget_tokens=6_000, llm_condensation=False,
              **cost_profile(llm_condensation=False, key_lines=key_lines))
    sim.system()
    sim.user("fix the failing test")
    E.begin_task(sim.state, "task-1")
    for n in range(40):
        arguments = json.dumps({"command": f"cat src/pkg/module_{n}.py"})
        assistant = sim.assistant(f"Reading module_{n}.", [("bash", arguments)])
        body = "\n".join([f"def helper_{n}(config_{n}, shared_state):", "    return None",
                          "from pkg.common import load_settings, save_settings, Settings_Type"] +
                         [f"# filler line {k} " + "x" * 60 for k in range(60)])
        sim.tool(assistant.tool_call_ids[0], body, arguments=arguments)
        sim.compact_if_needed()
        assert sim.request().fits
    return sim


def test_a_new_session_keeps_lines_of_archived_outputs_in_view_verbatim():
    sim = _session(key_lines=True)
    assert sim.state.config.checkpoint_lines == 48
    request = sim.messages(sim.request())
    checkpoint = next(m["content"] for m in request if "[Context checkpoint]" in m["content"])
    shown = checkpoint.split(LINES_HEADER + "\n")[1].split("\nObservation references")[0].splitlines()
    assert shown, "the checkpoint shows lines"
    archived_outputs = [i for i in sim.archived.values() if i.kind == Kind.TOOL_RESULT.value]
    texts = {i.id: sim.contents[i.id].text for i in archived_outputs}
    kept = {name for item in sim.state.items.values() if item.lifecycle.value != "archived" for name in item.names}
    for line in shown:
        line = line.removeprefix("- ")
        # verbatim content of an archived output (whitespace collapsed), carrying a name nothing kept shows
        assert any(line in " ".join(text.split()) for text in texts.values()), line
        assert line_names(line) - kept, line
    # every output carries the import line: the archived lines repeat it most, but the newest
    # exchanges (never archived) show it, so the checkpoint spends no line on it
    assert any("load_settings" in line for line in sim.state.checkpoint.lines)
    assert not any("load_settings" in line for line in shown)
    # a name of an archived output shown only by its line is in the request as content
    helper = shown[0].removeprefix("- ").split("(")[0].removeprefix("def ")
    outside_checkpoint = json.dumps([m for m in request if "[Context checkpoint]" not in m["content"]])
    assert helper not in outside_checkpoint
    # sessions started before the patch: no lines, and the same addresses' room
    before = _session(key_lines=False)
    assert before.state.config.checkpoint_lines == 0
    assert LINES_HEADER not in json.dumps(before.messages(before.request()))
    assert before.state.checkpoint.lines == []


def _eager(pool: list[str], count: int, shown: frozenset[str]) -> list[str]:
    """The greedy choice written plainly: every line's gain recomputed at every pick."""
    names = [line_names(line) - shown for line in pool]
    weight: dict[str, int] = {}
    for carried in names:
        for name in carried:
            weight[name] = weight.get(name, 0) + 1
    covered: set[str] = set()
    chosen: list[int] = []
    while len(chosen) < count:
        gains = [(sum(weight[n] for n in carried - covered), -index) for index, carried in enumerate(names)
                 if index not in chosen]
        best = max(gains, default=(0, 0))
        if best[0] == 0:
            break
        chosen.append(-best[1])
        covered |= names[-best[1]]
    return [pool[index] for index in sorted(chosen)]


_NAMES = st.sampled_from([f"name_{n}" for n in range(12)] + [f"pkg/mod_{n}.py" for n in range(6)])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_NAMES, max_size=5), max_size=40), st.integers(0, 12), st.sets(_NAMES, max_size=4))
def test_the_lazy_greedy_choice_is_the_plain_greedy_choice(lines, count, shown):
    pool = [" ".join(["x", *names]) for names in lines]
    assert chosen_lines(pool, count, frozenset(shown)) == _eager(pool, count, frozenset(shown))
