"""Integrations of the client with agent frameworks, one module each; each needs its
framework installed (an extra of ``context-lanes-client``, e.g. ``[mini-swe-agent]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanes_client.errors import LanesAPIError
from lanes_client.schemas import ObservationOut

if TYPE_CHECKING:
    from lanes_client.client import AsyncLanesClient

__all__ = ["RECALL_TOOL", "read_recall", "recall_limit", "recall_text"]

RECALL_TOOL = "recall_observation"  # the name the session's placeholders tell the model to call


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


async def read_recall(client: AsyncLanesClient, session_id: str, address: str, offset: int | None,
                      limit: int | None, recall_chars: int | None) -> str:
    """An async integration's recall tool: ``recall_text`` of the range read (``recall_limit``),
    or why it failed, as the model reads it."""
    try:
        piece = await client.read_observation(session_id, address, offset=offset, limit=recall_limit(limit, recall_chars))
    except (ValueError, LanesAPIError) as error:
        return f"{RECALL_TOOL} failed: {error}"
    return recall_text(piece)
