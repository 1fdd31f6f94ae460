"""The file paths and code symbols a text mentions: pure patterns, shared by the activity that
hands the engine an item's names and key lines (activities/item_names.py), the checkpoint, which
picks archived lines by the names they carry (checkpoint.py), and previews, which show the lines
of an output's middle that carry the most names (preview.py); both pick with ``covering_lines``."""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

MAX_NAME_CHARS = 80
MIN_NAME_CHARS = 4

EXTENSIONS = ("py|pyi|pyx|js|mjs|ts|tsx|jsx|json|yaml|yml|toml|cfg|ini|txt|md|rst|c|h|cc|cpp|hpp|go|rs|java|rb|"
              "sh|html|css|sql|xml|csv|lock|log|ex|exs|php|kt|swift|scala|vue|patch|diff")
# a path: segments joined by "/" (``src/app.py``, ``/tmp/x``, ``./setup.py``), not right after a
# ":" (a URL's "//host/...", or ``PATH=a:b/c``); the fidelity counter's own pattern allows the ":".
# The lookahead (its segment possessive) only skips, without backtracking, a word no "/" follows
PATH = re.compile(r"(?<![\w/.~:-])(?=(?:~|\.{1,2})?/?[\w.@+-]++/)(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?")
# a file name with a common extension (``setup.cfg``)
FILE_NAME = re.compile(rf"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})(?![\w/])")
# an identifier, possibly dotted; kept when it looks like code (an inner "_", a dot, camelCase)
IDENTIFIER = re.compile(r"(?<![\w./-])[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
CAMEL = re.compile(r"[a-z][A-Z]")
# IDENTIFIER where it looks like code: the lookahead, kept inside the first segment, finds a dot
# that IDENTIFIER goes on through, an inner "_", or a camelCase step. The same matches as
# IDENTIFIER filtered by that test in symbols_in, found by the regex engine: most words of a
# text are prose and never reach Python (a third of the worker's time naming items went there)
CODE_IDENTIFIER = re.compile(r"(?<![\w./-])(?=[A-Za-z0-9_]*?(?:[A-Za-z0-9_]\.[A-Za-z_]|[A-Za-z0-9]_+[A-Za-z0-9]|[a-z][A-Z]))"
                             r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def paths_in(text: str) -> Iterable[str]:
    # each pattern holds a "/" or a ".": a text without one is not scanned (most lines of an output)
    for match in PATH.finditer(text) if "/" in text else ():
        name = _trimmed(match.group())
        if name and any(c.isalpha() for c in name) and "://" not in text[max(0, match.start() - 3):match.end()]:
            yield name
    for match in FILE_NAME.finditer(text) if "." in text else ():
        name = _trimmed(match.group())
        if name:
            yield name


def symbols_in(text: str) -> Iterable[str]:
    for match in CODE_IDENTIFIER.finditer(text):
        name = _trimmed(match.group())
        if name and not FILE_NAME.fullmatch(name):
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


def covering_lines(names: Sequence[frozenset[str]], weight: Mapping[str, int] | None = None,
                   cost: Sequence[int] | None = None, room: int | None = None,
                   count: int | None = None) -> list[int]:
    """Indices of the lines whose ``names`` cover the most, chosen greedily, in index order: each
    time the line adding the most weight of names no chosen line carries (a name weighs
    ``weight[name]``, else 1); ties go to the lower ``cost``, then the lower index. A line that
    adds nothing is never chosen. Stops at ``count`` lines, or once ``room`` is used up, each
    chosen line using its ``cost`` plus one (its newline); a line too long for what is left is
    passed over for a shorter one."""
    def gain(index: int, covered: set[str] | frozenset[str]) -> int:
        if weight is None:
            return len(names[index] - covered)
        return sum(weight[name] for name in names[index] if name not in covered)

    # lazy greedy: a line's gain only falls as names get covered, so a gain computed earlier is
    # an upper bound; the line on top whose gain is still what it was is the best
    heap = [(-gain(index, frozenset()), cost[index] if cost else 0, index)
            for index, carried in enumerate(names) if carried]
    heapq.heapify(heap)
    covered: set[str] = set()
    chosen: list[int] = []
    used = 0
    while heap and (room is None or used < room) and (count is None or len(chosen) < count):
        bound, length, index = heapq.heappop(heap)
        now = gain(index, covered)
        if not now:
            continue
        if now < -bound:
            heapq.heappush(heap, (-now, length, index))
            continue
        if room is not None and used + length + 1 > room:
            continue  # too long for what is left; a shorter one may still fit
        chosen.append(index)
        covered |= names[index]
        used += length + 1
    return sorted(chosen)
