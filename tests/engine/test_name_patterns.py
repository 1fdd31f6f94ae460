"""The name patterns' fast forms find exactly what their plain definitions find.

``symbols_in`` lets the regex engine skip words that do not look like code, ``PATH`` skips words
no "/" follows without backtracking, and ``paths_in`` does not scan a text without a "/" or a
".": all to spend less worker time per item. Each item's names and key lines are activity
results stored in histories and compared across retries, so a faster form that found one name
more or less would be a silent change. Checked here against the plain definitions on generated
texts made of the characters the patterns turn on, and on the recorded sessions' outputs."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordings import DEFAULT_TRAJECTORY_ROOT, load_trajectory, trajectory_files
from workflows.context import names
from workflows.context.names import CAMEL, EXTENSIONS, FILE_NAME, IDENTIFIER, _trimmed

PLAIN_PATH = re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?")
PLAIN_FILE_NAME = re.compile(rf"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})(?![\w/])")


def plain_paths_in(text: str) -> Iterable[str]:
    for match in PLAIN_PATH.finditer(text):
        name = _trimmed(match.group())
        if name and any(c.isalpha() for c in name) and "://" not in text[max(0, match.start() - 3):match.end()]:
            yield name
    for match in PLAIN_FILE_NAME.finditer(text):
        name = _trimmed(match.group())
        if name:
            yield name


def plain_symbols_in(text: str) -> Iterable[str]:
    for match in IDENTIFIER.finditer(text):
        name = _trimmed(match.group())
        if name and not FILE_NAME.fullmatch(name) and ("_" in name.strip("_") or "." in name or CAMEL.search(name)):
            yield name


# words, separators and the characters every pattern turns on, so that generated texts hit the
# edges: dotted, underscored and camelCase words, paths with ~ ./ ../ and URLs, extensions
PIECES = st.sampled_from([
    "a", "b", "Z", "x1", "_", "__", "foo", "Bar", "fooBar", "snake_case", "_private", "trail_", "9",
    "py", "json", "md", "txt", ".", "..", "/", "//", "~", ":", "://", "-", "@", "+", " ", "\n", "\t",
    "(", ")", ",", ";", "'", "é", "src", "obs-1", "http", "a" * 30,
])
TEXTS = st.lists(PIECES, max_size=40).map("".join)


@settings(max_examples=600, deadline=None)
@given(TEXTS)
def test_fast_patterns_find_what_the_plain_definitions_find(text):
    assert list(names.symbols_in(text)) == list(plain_symbols_in(text))
    assert list(names.paths_in(text)) == list(plain_paths_in(text))
    assert [m.span() for m in names.PATH.finditer(text)] == [m.span() for m in PLAIN_PATH.finditer(text)]


def test_code_identifiers_are_the_identifiers_that_look_like_code():
    text = "plain words parse_args os.path.join getValue _x_ __init__ __ a_b 9_lives setup.py x.9 abc_dé"
    assert list(names.symbols_in(text)) == list(plain_symbols_in(text))
    assert list(names.symbols_in(text)) == ["parse_args", "os.path.join", "getValue", "abc_d"]


def test_recorded_outputs_give_the_same_names():
    files = [path for path, _ in trajectory_files([str(DEFAULT_TRAJECTORY_ROOT)])][::9]
    if not files:
        pytest.skip(f"no recordings under {DEFAULT_TRAJECTORY_ROOT}")
    texts = [text for path in files for turn in load_trajectory(str(path)).turns
             for text in (turn.assistant_text, *(r.output for r in turn.results))]
    assert len(texts) > 500
    for text in texts:
        assert list(names.symbols_in(text)) == list(plain_symbols_in(text))
        assert list(names.paths_in(text)) == list(plain_paths_in(text))
