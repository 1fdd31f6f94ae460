"""``recall_observation``: an exact slice of one of the session's archived tool outputs.

A slice is never cut silently. The call reads at most what the request's preview shows of
one tool result (``max_chars``, less room for the header), so the result enters the
context whole, never as head and tail; its header states the exact range shown in the
observation's own offsets and where to continue, and coverage records only that range.
"""

from __future__ import annotations

from activities.store import DEFAULT_RECALL_CHARS, Store
from activities.store_errors import ObservationNotFound
from activities.workspace import ToolInputError, ToolOutput, parse_arguments
from workflows.context import parse_observation_uri, range_address
from workflows.contract.tool_runs import RecallMark

HEADER_CHARS = 320  # room kept for the header line within ``max_chars``


async def recall(store: Store, session_id: str, arguments: str,
                 max_chars: int | None = None) -> tuple[ToolOutput, RecallMark | None]:
    """An exact slice of one of this session's observations, or a clear error; with
    ``max_chars``, header and slice together stay within it."""
    try:
        args = parse_arguments(arguments)
        ref = parse_observation_uri(args.get("address", ""))
        offset = args.get("offset", ref.offset if ref.offset is not None else 0)
        asked = args.get("limit", ref.limit if ref.limit is not None else DEFAULT_RECALL_CHARS)
        if not isinstance(offset, int) or not isinstance(asked, int):
            raise ToolInputError("offset and limit must be integers")
        cap = None if max_chars is None else max(1, max_chars - HEADER_CHARS)
        limit = asked if cap is None or asked <= 0 else min(asked, cap)
        piece = await store.read_observation(session_id, ref.obs_id, offset, limit)
    except (ToolInputError, ValueError) as error:
        return ToolOutput(f"recall_observation error: {error}", 1), None
    except ObservationNotFound:
        return ToolOutput(f"recall_observation error: no observation {args.get('address')!r} in this session", 1), None
    shown = len(piece.text)
    where = range_address(ref.obs_id, piece.offset, shown)
    capped = f"; at most {piece.limit} characters per call fit the context" if piece.limit < asked else ""
    tail = "end of observation" if piece.eof else f"next offset {piece.next_offset}"
    header = (f"[{where}: characters {piece.offset} to {piece.offset + shown} of {piece.total_chars}"
              f"{capped}; {tail}]\n")
    mark = RecallMark(observation_id=ref.obs_id, offset=piece.offset, limit=shown, total_chars=piece.total_chars)
    return ToolOutput(header + piece.text, 0), mark
