"""The file paths and code symbols a text mentions: pure patterns, shared by the activity that
hands the engine an item's names and key lines (activities/item_names.py) and the checkpoint,
which picks archived lines by the names they carry (checkpoint.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MAX_NAME_CHARS = 80
MIN_NAME_CHARS = 4

EXTENSIONS = ("py|pyi|pyx|js|mjs|ts|tsx|jsx|json|yaml|yml|toml|cfg|ini|txt|md|rst|c|h|cc|cpp|hpp|go|rs|java|rb|"
              "sh|html|css|sql|xml|csv|lock|log|ex|exs|php|kt|swift|scala|vue|patch|diff")
# a path: segments joined by "/" (``src/app.py``, ``/tmp/x``, ``./setup.py``), not right after a
# ":" (a URL's "//host/...", or ``PATH=a:b/c``); the fidelity counter's own pattern allows the ":"
PATH = re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?")
# a file name with a common extension (``setup.cfg``)
FILE_NAME = re.compile(rf"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})(?![\w/])")
# an identifier, possibly dotted; kept when it looks like code (an inner "_", a dot, camelCase)
IDENTIFIER = re.compile(r"(?<![\w./-])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
CAMEL = re.compile(r"[a-z][A-Z]")


def paths_in(text: str) -> Iterable[str]:
    for match in PATH.finditer(text):
        name = _trimmed(match.group())
        if name and any(c.isalpha() for c in name) and "://" not in text[max(0, match.start() - 3):match.end()]:
            yield name
    for match in FILE_NAME.finditer(text):
        name = _trimmed(match.group())
        if name:
            yield name


def symbols_in(text: str) -> Iterable[str]:
    for match in IDENTIFIER.finditer(text):
        name = _trimmed(match.group())
        if name and not FILE_NAME.fullmatch(name) and ("_" in name.strip("_") or "." in name or CAMEL.search(name)):
            yield name


@lru_cache(maxsize=4096)  # every compaction weighs the checkpoint's pooled lines again
def line_names(line: str) -> frozenset[str]:
    """The distinct paths and symbols of one line."""
    return frozenset((*paths_in(line), *symbols_in(line)))


def _trimmed(name: str) -> str | None:
    name = name.rstrip(".,:;")
    if len(name) < MIN_NAME_CHARS or len(name) > MAX_NAME_CHARS or name.startswith("obs-"):
        return None
    return name
