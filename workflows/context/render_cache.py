"""Rendering consecutive requests of one lane incrementally: equal to ``render_messages``.

Request k+1 usually starts with request k's entries, so its messages start with request
k's. The renderer keeps the previous entries and messages cut into *segments*: each
segment starts at a shown assistant entry (or at the first entry), where the renderer's
pairing state is empty -- a call is paired only with a result before the next assistant
turn, and every deferred message is out once the calls are answered -- so a segment renders
the same on its own as inside the whole request. A new request reuses the segments its
entries share with the previous one and renders the rest.

Rendering is a pure function of the entries, the items' static fields and the contents
(an item id's content never changes); the renderer assumes exactly that. The messages it
returns are shared with later calls: do not mutate them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from .content import ItemContent
from .items import Item, Projection
from .observations import RecallStyle
from .render import Facts, MessageMemo, render_entries

# an (item id, projection) pair, or a plan's PlanEntry (item id, projection, tokens)
Entry = tuple[str, Projection] | tuple[str, Projection, int]
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


class RequestRenderer:
    """Renders the requests of one lane, reusing what the previous request rendered."""

    def __init__(self) -> None:
        self._key: tuple[int, str] | None = None
        self._entries: list[Any] = []  # the previous request's entries, as given
        self._starts: list[int] = []  # entry index where each segment starts
        self._offsets: list[int] = []  # index in ``_messages`` of each segment's first message
        self._messages: list[dict] = []
        self._memo: MessageMemo = {}  # each item's last message (render_entries)
        self._facts: Facts = {}  # each item's static facts (render_entries)

    def render(self, entries: Sequence[Entry], items: dict[str, Item], contents: dict[str, ItemContent],
               preview_chars: int, recall: RecallStyle = "tool") -> list[dict]:
        """``render_messages(entries, items, contents, preview_chars, recall)``; ``entries`` are
        (item id, projection) pairs or a plan's ``PlanEntry`` tuples, which start with those two
        (consecutive plans share them, so comparing with the previous request is mostly a
        comparison of identities)."""
        entries = list(entries)
        key = (preview_chars, recall)
        kept = self._shared_segments(entries) if key == self._key else 0
        if key != self._key or len(self._memo) > 2 * len(entries) + 64:
            self._memo = {}  # another preview or recall style; or items that left the working set
        if len(self._facts) > 2 * len(entries) + 64:
            self._facts = {}  # items that left the working set (the facts do not depend on the style)
        if kept:  # the last shared segment may continue differently: render it again
            kept -= 1
        start = self._starts[kept] if kept < len(self._starts) else 0
        del self._messages[self._offsets[kept] if kept < len(self._offsets) else 0:]
        del self._starts[kept:], self._offsets[kept:]
        rest = entries[start:]
        # two parallel lists, not a pair per entry: after a compaction ``rest`` is the whole request
        # (map with a C getter: no Python frame per entry)
        ids, projections = list(map(_FIRST, rest)), list(map(_SECOND, rest))
        self._render(ids, projections, start, items, contents, preview_chars, recall)
        self._key, self._entries = key, entries
        return list(self._messages)

    def _render(self, ids: list[str], projections: list[Projection], start: int, items: dict[str, Item],
                contents: dict[str, ItemContent], preview_chars: int, recall: RecallStyle) -> None:
        """Render the entries from ``start`` on (a segment start) and note where each segment
        starts and where its messages begin."""
        rendering = render_entries(ids, projections, items, contents, preview_chars, recall, self._memo, self._facts)
        base = len(self._messages)
        self._starts.extend([start + s for s in rendering.segment_starts] if start else rendering.segment_starts)
        self._offsets.extend([base + o for o in rendering.segment_offsets] if base else rendering.segment_offsets)
        self._messages.extend(rendering.messages)

    def _shared_segments(self, entries: list[Entry]) -> int:
        """How many leading segments of the previous request ``entries`` repeats exactly
        (the last of them may continue differently)."""
        previous = self._entries
        # common case: the previous request is a prefix of this one (a C-level comparison)
        if len(entries) >= len(previous) and entries[: len(previous)] == previous:
            return len(self._starts)
        limit = next((i for i, (a, b) in enumerate(zip(previous, entries, strict=False)) if _pair(a) != _pair(b)),
                     min(len(previous), len(entries)))
        # the segments starting at or before the first difference (the one holding it is re-rendered)
        return bisect_right(self._starts, limit)


def _pair(entry: Entry) -> tuple[str, Projection]:
    return entry[0], entry[1]
