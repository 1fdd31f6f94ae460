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

from .content import ItemContent
from .items import Item, Projection
from .observations import RecallStyle
from .render import Entries, render_messages


class RequestRenderer:
    """Renders the requests of one lane, reusing what the previous request rendered."""

    def __init__(self) -> None:
        self._key: tuple[int, str] | None = None
        self._entries: list[tuple[str, Projection]] = []
        self._starts: list[int] = []  # entry index where each segment starts
        self._messages: list[list[dict]] = []  # the messages of each segment

    def render(self, entries: Entries, items: dict[str, Item], contents: dict[str, ItemContent],
               preview_chars: int, recall: RecallStyle = "tool") -> list[dict]:
        """``render_messages(entries, items, contents, preview_chars, recall)``."""
        entries = list(entries)
        key = (preview_chars, recall)
        kept = self._shared_segments(entries) if key == self._key else 0
        del self._starts[kept:], self._messages[kept:]
        start = self._starts[-1] if kept else 0
        if kept:  # the last shared segment may have grown: render it again
            self._starts.pop()
            self._messages.pop()
        for begin, end in _segments(entries, items, start):
            self._starts.append(begin)
            self._messages.append(render_messages(entries[begin:end], items, contents, preview_chars, recall))
        self._key, self._entries = key, entries
        return [message for segment in self._messages for message in segment]

    def _shared_segments(self, entries: list[tuple[str, Projection]]) -> int:
        """How many leading segments of the previous request ``entries`` repeats exactly
        (the last of them may continue differently: it is rendered again)."""
        previous = self._entries
        starts = self._starts
        # common case: the previous request is a prefix of this one
        if len(entries) >= len(previous) and entries[: len(previous)] == previous:
            return len(starts)
        limit = next((i for i, (a, b) in enumerate(zip(previous, entries, strict=False)) if a != b),
                     min(len(previous), len(entries)))
        # segments starting at or before the first difference (the one containing it is re-rendered)
        return sum(1 for s in starts if s <= limit)


def _segments(entries: list[tuple[str, Projection]], items: dict[str, Item], start: int) -> list[tuple[int, int]]:
    """(begin, end) of the segments of ``entries[start:]``: a new one at every shown assistant entry."""
    bounds = [start]
    for index in range(start + 1, len(entries)):
        item_id, projection = entries[index]
        if projection != Projection.OMITTED and items[item_id].role == "assistant":
            bounds.append(index)
    bounds.append(len(entries))
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1) if bounds[i] < bounds[i + 1]]
