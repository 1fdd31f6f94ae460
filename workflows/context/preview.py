"""The preview of a large output: its beginning, its end, and between them the lines of the
omitted part that name the most paths and symbols the preview does not show already.

A head and a tail alone drop the middle of a file read or a test log, which is where later
actions find what they name (a definition, a failing assertion, a grep hit). Shown since
EngineConfig.preview_lines (each item records which layout it was measured with:
Item.preview_lines), in the same characters: the head and the tail take a quarter each, the
lines at most the rest. Pure and bounded: the same text always previews the same way.
"""

from __future__ import annotations

import hashlib

from .names import covering_lines, line_names

HEAD_SHARE = 0.25  # of the preview's characters, for the head and for the tail each
LINE_MAX_CHARS = 160  # longer lines are left out (minified code, data rows)
# Only this much of the omitted part is searched for lines (a multi-megabyte output stays cheap
# to render): its beginning and its end.
SCAN_HEAD_CHARS, SCAN_TAIL_CHARS = 48_000, 16_000
LINES_INTRO = " Lines of it that name paths or symbols:\n"


def lines_room(preview_chars: int) -> tuple[int, int, int]:
    """(head, tail, room): the characters of the head, of the tail, and at most of the lines
    with their introduction, together never above ``preview_chars``."""
    head = tail = int(preview_chars * HEAD_SHARE)
    return head, tail, max(0, preview_chars - head - tail - len(LINES_INTRO))


# Chosen lines by (digest of the text, start, end, room). Every request renders the previews it
# keeps again (about 1.4 ms each for a 10 KB output, 8 % of a worker's time at 64 sessions; the
# text's digest: 0.013 ms); the key holds a digest, not the text, so the cache stays small.
_CHOSEN: dict[tuple[bytes, int, int, int], tuple[str, ...]] = {}
_CHOSEN_MAX = 4096


def omitted_lines(text: str, start: int, end: int, room: int) -> list[str]:
    """Lines of ``text[start:end]`` (whitespace trimmed), at most ``room`` characters with one
    newline each, in text order, chosen greedily: each time the line adding the most names that
    neither the shown text (before ``start``, from ``end``) nor a chosen line carries; ties go to
    the shorter line, then the earlier. A line that adds no name is never chosen."""
    if room <= 0 or end <= start:
        return []
    key = (hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest(), start, end, room)
    chosen = _CHOSEN.get(key)
    if chosen is None:
        chosen = tuple(_choose(text, start, end, room))
        if len(_CHOSEN) >= _CHOSEN_MAX:
            try:  # the oldest; another thread rendering at once may have taken it
                del _CHOSEN[next(iter(_CHOSEN))]
            except (KeyError, RuntimeError, StopIteration):
                pass
        _CHOSEN[key] = chosen
    return list(chosen)


def _choose(text: str, start: int, end: int, room: int) -> list[str]:
    shown = text[:start] + "\n" + text[end:]
    lines: list[str] = []
    names: list[frozenset[str]] = []
    seen: set[str] = set()
    for raw in _whole_lines(text, start, end):
        line = raw.strip()
        if not line or len(line) > LINE_MAX_CHARS or line in seen:
            continue
        seen.add(line)
        new = frozenset(name for name in line_names(line) if name not in shown)
        if new:
            lines.append(line)
            names.append(new)
    return [lines[index] for index in covering_lines(names, cost=[len(line) for line in lines], room=room)]


def _whole_lines(text: str, start: int, end: int) -> list[str]:
    """The lines of ``text[start:end]`` that lie wholly inside it (a line the head or the tail
    cuts would read as another: ``default_error_mes``), only in its first SCAN_HEAD_CHARS and
    last SCAN_TAIL_CHARS when it is longer."""
    if end - start > SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        spans = [(start, start + SCAN_HEAD_CHARS), (end - SCAN_TAIL_CHARS, end)]
    else:
        spans = [(start, end)]
    whole: list[str] = []
    for a, b in spans:
        pieces = text[a:b].split("\n")
        if a > 0 and text[a - 1] != "\n":
            pieces = pieces[1:]  # begins inside a line
        if b < len(text) and text[b] != "\n":
            pieces = pieces[:-1]  # ends inside a line
        whole += pieces
    return whole
