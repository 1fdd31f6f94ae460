"""Previews that show lines of the omitted part (EngineConfig.preview_lines, issue 29): what
they pick, that they stay within the preview's characters, that an item is rendered as it was
measured, and that sessions started before keep the head-and-tail layout."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from activities.items import bounded_item, finish_item
from activities.tokens import count_message_tokens
from workflows.context.config import PREVIEW_LINES_PROFILE, EngineConfig, cost_profile
from workflows.context.content import ItemContent
from workflows.context.items import Item, Kind, Projection
from workflows.context.preview import LINES_INTRO, lines_room, omitted_lines
from workflows.context.render_item import item_message, projection_text

PREVIEW = 1_000


def _output(text: str, preview_lines: bool, obs: str | None = "obs-s-main-000007") -> Item:
    item = Item(id="itm-7", seq=7, kind=Kind.TOOL_RESULT, role="tool", tool_name="bash", tool_call_ids=["c7"],
                observation_id=obs, group=6)
    return finish_item(item, ItemContent(text=text, tool_call_id="c7"), PREVIEW, None, preview_lines=preview_lines)


def _file_read(middle: list[str]) -> str:
    filler = "x = 1  # nothing named here\n"
    return filler * 40 + "\n".join(middle) + "\n" + filler * 40


def test_the_omitted_part_shows_the_lines_naming_what_head_and_tail_do_not():
    text = _file_read([
        "def parse_config(path):",
        "    return load_yaml(path)",  # load_yaml: new
        "    again = parse_config(other) or parse_config(more)",  # only a name the first line carries
        "class ConfigError(ValueError): pass",
    ])
    item = _output(text, preview_lines=True)
    shown = projection_text(item, ItemContent(text=text), Projection.COMPACT, PREVIEW)
    head, tail, room = lines_room(PREVIEW)
    assert shown.startswith(text[:head]) and shown.endswith(text[len(text) - tail:])
    assert LINES_INTRO.strip() in shown
    for line in ("def parse_config(path):", "return load_yaml(path)", "class ConfigError(ValueError): pass"):
        assert line in shown
    assert "parse_config(other)" not in shown  # it adds no name once the shorter line is chosen
    assert "observation://obs-s-main-000007" in shown  # the whole output is still one recall away
    # the lines come in text order
    assert shown.index("def parse_config") < shown.index("load_yaml") < shown.index("class ConfigError")


def test_sessions_started_before_keep_head_and_tail_halves():
    text = _file_read(["def parse_config(path):"])
    item = _output(text, preview_lines=False)
    assert not item.preview_lines
    shown = projection_text(item, ItemContent(text=text), Projection.COMPACT, PREVIEW)
    assert shown.startswith(text[:PREVIEW // 2]) and "parse_config" not in shown and LINES_INTRO not in shown


def test_an_item_is_rendered_as_it_was_measured():
    text = _file_read([f"def handler_{n}(request_{n}): return reply_{n}" for n in range(60)])
    for preview_lines in (True, False):
        item = _output(text, preview_lines)
        content = ItemContent(text=text, tool_call_id="c7")
        message = item_message(item, content, Projection.COMPACT, PREVIEW)
        assert message is not None
        assert item.tokens[Projection.COMPACT] == count_message_tokens(message, None)
    # the lines fill at most their room: the preview is no longer than the head-and-tail one
    with_lines = projection_text(_output(text, True), ItemContent(text=text), Projection.COMPACT, PREVIEW)
    without = projection_text(_output(text, False), ItemContent(text=text), Projection.COMPACT, PREVIEW)
    assert len(with_lines) <= len(without) + len(LINES_INTRO) + 2


def test_only_tool_outputs_take_the_new_layout():
    user = Item(id="itm-3", seq=3, kind=Kind.USER, role="user")
    measured = bounded_item(user, ItemContent(text="a_b " * 2000), PREVIEW, None, None, "obs-s-main-000003",
                            preview_lines=True)
    assert not measured.preview_lines


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(alphabet="ab_/.xyzXY \n(){}", min_size=0, max_size=90), min_size=0, max_size=120),
       st.integers(min_value=0, max_value=600))
def test_chosen_lines_never_overflow_their_room_and_are_lines_of_the_omitted_part(lines, room):
    text = "\n".join(lines)
    start, end = len(text) // 4, len(text) - len(text) // 4
    chosen = omitted_lines(text, start, end, room)
    assert sum(len(line) + 1 for line in chosen) <= room
    middle = text[start:end]
    assert all(line in middle for line in chosen)
    assert omitted_lines(text, start, end, room) == chosen  # deterministic


def test_a_huge_output_is_searched_only_at_its_ends():
    middle = "\n".join(f"needle_{n} found" for n in range(200_000))  # several megabytes of named lines
    chosen = omitted_lines("head\n" + middle + "\ntail", 5, 5 + len(middle), 2_000)
    assert chosen and sum(len(line) + 1 for line in chosen) <= 2_000
    numbers = [int(line.split("_")[1].split()[0]) for line in chosen]
    assert all(n < 6_000 or n > 198_000 for n in numbers)  # from the scanned beginning and end only


def test_new_sessions_run_the_profile_and_older_ones_do_not():
    assert cost_profile(llm_condensation=False)["preview_lines"] is True
    assert cost_profile(llm_condensation=False)["checkpoint_pool_lines"] == PREVIEW_LINES_PROFILE["checkpoint_pool_lines"]
    assert "preview_lines" not in cost_profile(llm_condensation=False, preview_lines=False)
    assert "preview_lines" not in cost_profile(llm_condensation=False, key_lines=False)
    assert EngineConfig(context_window=8_000, max_output_tokens=0).preview_lines is False


def test_a_line_the_head_or_the_tail_cuts_is_never_shown_as_a_line():
    text = "intro\nfirst_cut_name continues_here\nwhole_line_name\nlast_cut_name and_more_after\noutro"
    start = text.index("continues_here")  # inside the second line
    end = text.index("and_more_after")  # inside the fourth
    assert omitted_lines(text, start, end, 500) == ["whole_line_name"]
    # cut exactly at line ends, the neighbouring lines are whole
    start, end = text.index("first_cut_name"), text.index("\noutro")
    assert omitted_lines(text, start, end, 500) == ["first_cut_name continues_here", "whole_line_name",
                                                    "last_cut_name and_more_after"]


def test_chosen_lines_are_kept_per_text_not_per_shape(monkeypatch):
    """A preview rendered again is read from the cache; another text of the same length and
    the same cut gets its own lines (the cache is keyed by the text's digest)."""
    from workflows.context import preview

    monkeypatch.setattr(preview, "_CHOSEN", {})  # what this test caches goes with it

    def text(word: str) -> str:
        return "head line\n" + "\n".join(f"{word}_{n} = call_{word}({n})" for n in range(40)) + "\ntail line"

    one, two = text("alpha"), text("gamma")
    assert len(one) == len(two)
    start, end = 10, len(one) - 10
    first = omitted_lines(one, start, end, 300)
    assert first and all("alpha_" in line for line in first)
    chosen: list[tuple] = []

    def choose(*args: object) -> list[str]:
        chosen.append(args)
        return ["recomputed"]

    monkeypatch.setattr(preview, "_choose", choose)
    assert omitted_lines(one, start, end, 300) == first  # from the cache: not chosen again
    assert omitted_lines(two, start, end, 300) == ["recomputed"] and len(chosen) == 1
