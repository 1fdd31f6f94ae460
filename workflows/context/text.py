"""Small text helpers shared by the generators and the renderer."""

from __future__ import annotations

import hashlib

# Rendering bounds shared by render.py (the text) and budget.py (estimates of unmeasured costs).
REFERENCE_EXCERPT_CHARS = 200  # prose kept when an item without an address is referenced
SOURCE_HEAD_MAX = 2000  # head of an oversized user input shown in its source reference


def estimate_tokens(text: str) -> int:
    """A conservative token ESTIMATE for text the engine generates itself.

    Real counts come from tiktoken outside the engine. Three characters per token
    over-counts ordinary English and code (about four), so an estimated plan errs on
    the side of fitting; the +4 covers the per-message overhead.
    """
    return chars_to_tokens(len(text))


def chars_to_tokens(chars: int) -> int:
    """The estimate of ``estimate_tokens`` for a text of ``chars`` characters."""
    return chars // 3 + 4


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, ellipsis when cut)."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
