"""Integrations of the client with agent frameworks, one module each; each needs its
framework installed (an extra of ``context-lanes-client``, e.g. ``[mini-swe-agent]``)."""

from __future__ import annotations

from lanes_client.schemas import ObservationOut

__all__ = ["recall_text"]


def recall_text(piece: ObservationOut) -> str:
    """What an integration's recall answers the model: the range read, where it continues, then the exact text."""
    end = piece.offset + len(piece.text)
    more = "the end" if piece.eof else f"more from offset={piece.next_offset}"
    return f"[{piece.address}: characters {piece.offset}-{end} of {piece.total_chars}; {more}]\n{piece.text}"
