"""Items this worker process stored or loaded lately, so that a request loads only what is new.

A stored item never changes (ids are chosen by the workflow, every write is ``ON CONFLICT DO
NOTHING``, nothing updates or deletes an item row), so the parsed row of an id is the same for
as long as its database lives. The model activity loads every item of its request each turn;
between compactions all but the newest were loaded (or stored) by this worker the turn before.
Keyed by (database, session, item id); bounded by the characters of text it holds, least
recently used first out. Callers must not mutate what it returns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from workflows.context.content import ItemContent
from workflows.context.items import Item

MAX_CHARS = 64_000_000

Key = tuple[str, str, str]  # (database, session, item id)
_lock = threading.Lock()
_items: OrderedDict[Key, tuple[Item, ItemContent, int]] = OrderedDict()
_chars = 0


def _size(content: ItemContent) -> int:
    return len(content.text) + sum(len(c.arguments) for c in content.tool_calls) + len(content.reasoning_content or "")


def get(database: str, session_id: str, item_ids: list[str]) -> dict[str, tuple[Item, ItemContent]]:
    """The cached ones of ``item_ids``."""
    found = {}
    with _lock:
        for item_id in item_ids:
            hit = _items.get((database, session_id, item_id))
            if hit is not None:
                _items.move_to_end((database, session_id, item_id))
                found[item_id] = (hit[0], hit[1])
    return found


def put(database: str, session_id: str, item: Item, content: ItemContent) -> None:
    """Remember a row as it is stored (call only with what PostgreSQL holds for ``item.id``)."""
    global _chars
    size = _size(content)
    if size > MAX_CHARS // 16:
        return
    key = (database, session_id, item.id)
    with _lock:
        if key in _items:
            return
        _items[key] = (item, content, size)
        _chars += size
        while _chars > MAX_CHARS:
            _, (_, _, dropped) = _items.popitem(last=False)
            _chars -= dropped


def clear() -> None:
    """Forget everything (tests)."""
    global _chars
    with _lock:
        _items.clear()
        _chars = 0
