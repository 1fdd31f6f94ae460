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
import re
from collections.abc import Iterable
from itertools import chain

from workflows.context import ItemContent

MAX_NAMES = 16  # per item: workflow state holds metadata only
MAX_NAME_CHARS = 80
MIN_NAME_CHARS = 4

EXTENSIONS = ("py|pyi|pyx|js|mjs|ts|tsx|jsx|json|yaml|yml|toml|cfg|ini|txt|md|rst|c|h|cc|cpp|hpp|go|rs|java|rb|"
               "sh|html|css|sql|xml|csv|lock|log|ex|exs|php|kt|swift|scala|vue|patch|diff")
# a path: segments joined by "/" (``src/app.py``, ``/tmp/x``, ``./setup.py``), not right after a
# ":" (a URL's "//host/...", or ``PATH=a:b/c``); the fidelity counter's own pattern allows the ":"
_PATH = re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?")
# a file name with a common extension (``setup.cfg``)
FILE_NAME = re.compile(rf"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})(?![\w/])")
# an identifier, possibly dotted; kept when it looks like code (an inner "_", a dot, camelCase)
IDENTIFIER = re.compile(r"(?<![\w./-])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
CAMEL = re.compile(r"[a-z][A-Z]")


def names_of(content: ItemContent, limit: int = MAX_NAMES) -> list[str]:
    """Up to ``limit`` distinct paths and code symbols of ``content``, in this order: paths of
    its tool calls, symbols of its tool calls, paths of its text, symbols of its text (a call
    says what the agent acted on; its prose or output follows)."""
    calls = "\n".join(arguments_text(c.arguments) for c in content.tool_calls)
    names: dict[str, None] = {}
    # lazily: a long output is scanned only until ``limit`` names are found
    for name in chain(_paths(calls), _symbols(calls), _paths(content.text), _symbols(content.text)):
        if len(names) >= limit:
            break
        names.setdefault(name, None)
    return list(names)


def _paths(text: str) -> Iterable[str]:
    for match in _PATH.finditer(text):
        name = _trimmed(match.group())
        if name and any(c.isalpha() for c in name) and "://" not in text[max(0, match.start() - 3):match.end()]:
            yield name
    for match in FILE_NAME.finditer(text):
        name = _trimmed(match.group())
        if name:
            yield name


def _symbols(text: str) -> Iterable[str]:
    for match in IDENTIFIER.finditer(text):
        name = _trimmed(match.group())
        if name and not FILE_NAME.fullmatch(name) and ("_" in name.strip("_") or "." in name or CAMEL.search(name)):
            yield name


def _trimmed(name: str) -> str | None:
    name = name.rstrip(".,:;")
    if len(name) < MIN_NAME_CHARS or len(name) > MAX_NAME_CHARS or name.startswith("obs-"):
        return None
    return name


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
