"""Integrations of the client with agent frameworks, one module each; each needs its
framework installed (an extra of ``context-lanes-client``, e.g. ``[mini-swe-agent]``)."""

from __future__ import annotations

from lanes_client.schemas import ObservationOut

__all__ = ["recall_limit", "recall_text"]


def recall_limit(asked: int | None, recall_chars: int | None) -> int | None:
    """How much one recall reads: what was asked, at most what enters the next request whole
    (``PreparedRequestOut.recall_chars``; None: not known yet, the server's default read)."""
    if recall_chars is None:
        return asked
    return min(asked, recall_chars) if asked is not None and asked > 0 else recall_chars


def recall_text(piece: ObservationOut) -> str:
    """What an integration's recall answers the model: the range read, where it continues, then the exact text."""
    end = piece.offset + len(piece.text)
    more = "the end" if piece.eof else f"more from offset={piece.next_offset}"
    return f"[{piece.address}: characters {piece.offset}-{end} of {piece.total_chars}; {more}]\n{piece.text}"
