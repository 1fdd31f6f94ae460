"""What an item works on: the file paths and code symbols its text and tool calls mention.

The engine never sees content. Besides the one-line digest, an activity hands it these few
names per item, so that a checkpoint can still say which files and functions the archived
history worked on (the list a compaction summary keeps, e.g. Claude Code's "files and code
sections"): an agent that sees ``src/app.py`` and ``parse_args`` in its checkpoint can act
on them, or recall the output that mentioned them, without re-discovering them.

Bounded and deterministic: a retried activity reports the same names. The fidelity counter
(worker/replay/fidelity.py) recognises file names and symbols with the same patterns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import chain

from workflows.context import ItemContent, clip
from workflows.context.names import (  # noqa: F401  (re-exported: the fidelity counter's patterns)
    CAMEL,
    FILE_NAME,
    IDENTIFIER,
    MAX_NAME_CHARS,
    MIN_NAME_CHARS,
    line_names,
    paths_in,
    symbols_in,
)

MAX_NAMES = 16  # per item: workflow state holds metadata only
MAX_LINES = 4  # key lines per item (Item.lines)
LINE_CHARS = 120
# a long output is searched for key lines in its head and tail only (the activity stays fast)
LINES_HEAD_CHARS, LINES_TAIL_CHARS = 48_000, 16_000


def names_of(content: ItemContent, limit: int = MAX_NAMES) -> list[str]:
    """Up to ``limit`` distinct paths and code symbols of ``content``, in this order: paths of
    its tool calls, symbols of its tool calls, paths of its text, symbols of its text (a call
    says what the agent acted on; its prose or output follows)."""
    calls = "\n".join(arguments_text(c.arguments) for c in content.tool_calls)
    names: dict[str, None] = {}
    # lazily: a long output is scanned only until ``limit`` names are found
    for name in chain(paths_in(calls), symbols_in(calls), paths_in(content.text), symbols_in(content.text)):
        if len(names) >= limit:
            break
        names.setdefault(name, None)
    return list(names)


def key_lines_of(content: ItemContent, limit: int = MAX_LINES) -> list[str]:
    """Up to ``limit`` lines of ``content`` (its tool calls' arguments, then its text) that
    together mention the most distinct paths and symbols, in the order they appear, each
    clipped to LINE_CHARS: a definition, a grep hit, an error line. Chosen greedily, each line
    for the names the lines before it did not carry (ties: the earlier line), so that three
    lines of one stack trace do not repeat one path. A checkpoint shows some of an archived
    item's lines verbatim, so that what the archived turns read and wrote stays in view as
    content the model can act on, not as bare names (EngineConfig.checkpoint_lines)."""
    calls = "\n".join(arguments_text(c.arguments) for c in content.tool_calls)
    text = content.text
    if len(text) > LINES_HEAD_CHARS + LINES_TAIL_CHARS:
        text = text[:LINES_HEAD_CHARS] + "\n" + text[-LINES_TAIL_CHARS:]
    candidates: list[tuple[int, str, frozenset[str]]] = []
    seen: set[str] = set()
    for index, raw in enumerate(chain(calls.splitlines(), text.splitlines())):
        line = clipped(raw, LINE_CHARS)
        if line in seen:
            continue
        seen.add(line)
        names = line_names(line) if line else frozenset()
        if names:
            candidates.append((index, line, names))
    covered: set[str] = set()
    chosen: list[tuple[int, str]] = []
    while candidates and len(chosen) < limit:
        gain, best = max((len(names - covered), -position) for position, (_, _, names) in enumerate(candidates))
        if not gain:
            break
        index, line, names = candidates.pop(-best)
        chosen.append((index, line))
        covered |= names
    return [line for _, line in sorted(chosen)]


def clipped(line: str, limit: int) -> str:
    """``line`` clipped to ``limit`` as any payload can carry it: a decoded JSON string may hold
    lone surrogates ("\\ud800"), which no payload can encode."""
    return clip(line.encode("utf-8", "replace").decode("utf-8"), limit)


def arguments_text(arguments: str) -> str:
    """Tool-call arguments as the text they carry (JSON string values decoded, so that a
    quote or a newline inside a command reads as it does in a tool output)."""
    try:
        return "\n".join(strings_in(json.loads(arguments)))
    except ValueError:
        return arguments


def strings_in(value: object) -> Iterable[str]:
    """Every string inside a decoded JSON value, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)
