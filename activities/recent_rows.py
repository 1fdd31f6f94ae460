"""Rows a store wrote or read lately: items, so that a request loads only what is new, and
plans, so that the next delta builds on one without a round trip.

A stored item never changes (ids are chosen by the workflow, every write is ``ON CONFLICT DO
NOTHING``, nothing updates or deletes an item row), so the parsed row of an id is the same for
as long as its database lives. The model activity loads every item of its request each turn;
between compactions all but the newest were loaded (or stored) by this worker the turn before.
One per store (``Store.recent_items``), keyed by (session, item id); bounded by the characters of text it holds, least
recently used first out. Callers must not mutate what it returns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from workflows.context import Item, ItemContent, Projection

MAX_CHARS = 64_000_000


def _size(content: ItemContent) -> int:
    return len(content.text) + sum(len(c.arguments) for c in content.tool_calls) + len(content.reasoning_content or "")


class ItemCache:
    """Parsed item rows of one database by (session, item id), least recently used first out."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._lock = threading.Lock()  # the API also materialises from threads
        self._items: OrderedDict[tuple[str, str], tuple[Item, ItemContent, int]] = OrderedDict()
        self._chars = 0

    def get(self, session_id: str, item_ids: list[str]) -> dict[str, tuple[Item, ItemContent]]:
        """The cached ones of ``item_ids``."""
        found = {}
        with self._lock:
            for item_id in item_ids:
                hit = self._items.get((session_id, item_id))
                if hit is not None:
                    self._items.move_to_end((session_id, item_id))
                    found[item_id] = (hit[0], hit[1])
        return found

    def put(self, session_id: str, item: Item, content: ItemContent) -> None:
        """Remember a row as it is stored (call only with what PostgreSQL holds for ``item.id``)."""
        size = _size(content)
        if size > self.max_chars // 16:
            return
        key = (session_id, item.id)
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (item, content, size)
            self._chars += size
            while self._chars > self.max_chars:
                _, (_, _, dropped) = self._items.popitem(last=False)
                self._chars -= dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0


PlanEntries = list[tuple[str, Projection]]


class RecentPlans:
    """Plans this store wrote first (a stored version never changes: the first write wins),
    by (session, lane, version); the next delta of a lane usually builds on one of them."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._plans: dict[tuple[str, str, int], PlanEntries] = {}

    def get(self, session_id: str, lane: str, version: int | None) -> PlanEntries | None:
        return None if version is None else self._plans.get((session_id, lane, version))

    def put(self, session_id: str, lane: str, version: int, entries: PlanEntries) -> None:
        self._plans[(session_id, lane, version)] = list(entries)
        while len(self._plans) > self.size:
            del self._plans[next(iter(self._plans))]
