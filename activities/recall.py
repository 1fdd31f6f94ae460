"""``recall_observation``: an exact slice of one of the session's archived tool outputs."""

from __future__ import annotations

from pydantic import BaseModel

from activities.store import DEFAULT_RECALL_CHARS, ObservationNotFound, Store
from activities.workspace import ToolInputError, ToolOutput, parse_arguments
from workflows.context.observations import parse_observation_uri, range_address


class RecallMark(BaseModel):
    """What a recall_observation call read (coverage of exhaustive tasks)."""

    observation_id: str
    offset: int
    limit: int
    total_chars: int


async def recall(store: Store, session_id: str, arguments: str) -> tuple[ToolOutput, RecallMark | None]:
    """An exact slice of one of this session's observations, or a clear error."""
    try:
        args = parse_arguments(arguments)
        ref = parse_observation_uri(args.get("address", ""))
        offset = args.get("offset", ref.offset if ref.offset is not None else 0)
        limit = args.get("limit", ref.limit if ref.limit is not None else DEFAULT_RECALL_CHARS)
        if not isinstance(offset, int) or not isinstance(limit, int):
            raise ToolInputError("offset and limit must be integers")
        piece = await store.read_observation(session_id, ref.obs_id, offset, limit)
    except (ToolInputError, ValueError) as error:
        return ToolOutput(f"recall_observation error: {error}", 1), None
    except ObservationNotFound:
        return ToolOutput(f"recall_observation error: no observation {args.get('address')!r} in this session", 1), None
    where = range_address(ref.obs_id, piece.offset, piece.limit)
    tail = "end of observation" if piece.eof else f"next offset {piece.next_offset}"
    header = f"[{where}: {len(piece.text)} of {piece.total_chars} characters; {tail}]\n"
    mark = RecallMark(observation_id=ref.obs_id, offset=piece.offset, limit=piece.limit, total_chars=piece.total_chars)
    return ToolOutput(header + piece.text, 0), mark
