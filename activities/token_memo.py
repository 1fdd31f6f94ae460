"""Token counts this worker process has already made, so that a request counts only what is new.

Every item is measured once when it is stored (``items.measure`` renders it in each projection
and counts those messages); between compactions the next request re-sends those same messages
plus the step's new ones. Re-tokenising the whole request each turn was a fifth of a worker's
busy time. The memo is keyed by exactly what ``count_message_tokens`` reads (the encoding, the
content, the reasoning passed back, each tool call's name and arguments), so a count taken from
it is the number a full recount gives, whatever renders the message: a message that renders
differently (a call dropped by pairing, an orphaned result, another preview size) is a
different key and is counted afresh. A worker that did not measure an item (restarted, or
another worker stored it) simply counts it once.

Bounded by the characters its keys hold (least recently used first out); thread-safe (the
materialiser counts misses in a thread).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from activities.tokens import count_message_tokens, tokenizer_for

MAX_CHARS = 64_000_000  # ~ the text of a few hundred full requests at a 128k window

_lock = threading.Lock()
_counts: OrderedDict[Hashable, tuple[int, int]] = OrderedDict()  # key -> (tokens, characters held)
_chars = 0


def _key(message: dict, model: str | None) -> tuple[tuple, int]:
    """(key, characters it holds): the inputs of ``count_message_tokens``, nothing else."""
    content = message.get("content")
    reasoning = message.get("reasoning_content")
    calls = tuple((fn.get("name", ""), fn.get("arguments", ""))
                  for fn in (call.get("function", {}) for call in message.get("tool_calls") or ()))
    # an image's cost follows from its data (or URL) and detail: keyed by them (a string's hash is
    # computed once), so that a hit does not decode the image's header again
    images = tuple((i.get("data"), i.get("url"), i.get("detail")) for i in message.get("images") or ())
    key = (tokenizer_for(model).offline_name, content if isinstance(content, str) else None,
           reasoning if isinstance(reasoning, str) else None, calls, images)
    size = (sum(len(s) for s in (key[1], key[2]) if s) + sum(len(n) + len(a) for n, a in calls)
            + sum(len(data or url or "") for data, url, _ in images))
    return key, size


def known(message: dict, model: str | None = None) -> int | None:
    """The count of ``message`` if this process counted it before, else None."""
    key, _ = _key(message, model)
    with _lock:
        hit = _counts.get(key)
        if hit is None:
            return None
        _counts.move_to_end(key)
        return hit[0]


def message_tokens(message: dict, model: str | None = None) -> int:
    """``count_message_tokens(message, model)``, from the memo when it holds it."""
    global _chars
    key, size = _key(message, model)
    with _lock:
        hit = _counts.get(key)
        if hit is not None:
            _counts.move_to_end(key)
            return hit[0]
    tokens = count_message_tokens(message, model)
    if size > MAX_CHARS // 16:  # one huge message would flush everything else
        return tokens
    with _lock:
        if key not in _counts:
            _counts[key] = (tokens, size)
            _chars += size
            while _chars > MAX_CHARS:
                _, (_, dropped) = _counts.popitem(last=False)
                _chars -= dropped
    return tokens


def clear() -> None:
    """Forget every count (tests)."""
    global _chars
    with _lock:
        _counts.clear()
        _chars = 0
