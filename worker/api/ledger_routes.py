"""``GET /v1/sessions/{id}/context`` and ``GET /v1/sessions/{id}/ledger``: the session's
working set, and the whole ledger (every stored item of the main lane, archived included,
with state, projection, tokens and the reason of its last transition, plus counts).

``/context`` answers the workflow's context report only (no SQL: the inspector polls it);
``/context?all=true`` adds one ledger page to it; ``/ledger`` is that page alone. Both read
the ledger with :func:`worker.api.ledger.ledger_page`, so their pages and cursors are one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from lanes_client.schemas import ContextOut, LedgerPage, LedgerState
from worker.api.backend import QUERY_TIMEOUT, Backend
from worker.api.errors import ApiError
from worker.api.ledger import CURSOR_HELP, DEFAULT_PAGE, MAX_PAGE, ledger_page, parse_cursor
from worker.api.routes import COMMON_RESPONSES, Be, Owned
from workflows.context import ContextReport
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)

CONTEXT_DESCRIPTION = """\
The working set the next request is planned from: every item in it with its lifecycle state
(pinned, active, retained), projection, token cost and the reason of its last transition,
with totals, the budget and the episodes.

With `all=true` the answer also carries `ledger`: every item the store holds for the session's
main lane (and the items the engine generated for it), archived ones included, one page at a
time in (lane, seq) order, each with state, projection, tokens and the reason of its last
transition (an archived item: as its `item.archived` event recorded it), plus `counts` of the
working set, the stored history, the archived items and the observations. `state` keeps one
state; `limit` sets the page size; `next_cursor` passed as `cursor` reads the next page (null:
the last). `state`, `cursor` and `limit` need `all=true`. Without `all` the answer is the
working-set report alone, read from the workflow without touching the database."""


async def _report(be: Backend, session_id: str) -> ContextReport:
    return await be.temporal(session_id, "report its context", lambda h: h.query(SessionWorkflow.context),
                             QUERY_TIMEOUT)


@router.get("/sessions/{session_id}/context", response_model=ContextOut, tags=["inspect"],
            summary="The working set (items with state, projection, tokens and reason; totals and budget); "
                    "with all=true also every stored item, paged and filterable by state",
            description=CONTEXT_DESCRIPTION)
async def get_context(
    row: Owned, be: Be,
    all_: Annotated[bool, Query(alias="all", description="also list every stored item (the ledger), paged")] = False,
    state: Annotated[LedgerState | None, Query(description="with all: only stored items in this state")] = None,
    cursor: Annotated[str | None, Query(max_length=200, description=f"with all: {CURSOR_HELP}")] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE, description=f"with all: page size [{DEFAULT_PAGE}]")] = None,
) -> ContextReport | ContextOut:
    if not all_:
        given = [name for name, value in (("state", state), ("cursor", cursor), ("limit", limit)) if value is not None]
        if given:
            raise ApiError(422, "invalid", f"{', '.join(given)} page the ledger: pass all=true with "
                                           f"{'them' if len(given) > 1 else 'it'}")
        return await _report(be, row.session_id)  # the response model leaves ledger out: today's answer as it was
    after = parse_cursor(cursor)
    report = await _report(be, row.session_id)
    page = await ledger_page(be, row.session_id, report, state=state, after=after, limit=limit or DEFAULT_PAGE)
    return ContextOut.model_validate({**report.model_dump(), "ledger": page})


@router.get("/sessions/{session_id}/ledger", response_model=LedgerPage, tags=["inspect"],
            summary="Every stored item (archived included) with state, projection, tokens and the reason of its "
                    "last transition; paged by (lane, seq), filterable by state (as /context?all=true)")
async def get_ledger(
    row: Owned, be: Be,
    state: Annotated[LedgerState | None, Query(description="only items in this state")] = None,
    cursor: Annotated[str | None, Query(max_length=200, description=CURSOR_HELP)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
) -> LedgerPage:
    after = parse_cursor(cursor)
    report = await _report(be, row.session_id)
    return await ledger_page(be, row.session_id, report, state=state, after=after, limit=limit)
