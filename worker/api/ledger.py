"""The ledger: every stored item of the session's main lane, paged and filterable by state,
each with its lifecycle state, projection, token cost and the reason of its last transition,
plus counts of the working set, the stored history and observations. ``GET /ledger`` and
``GET /context?all=true`` both answer with :func:`ledger_page`.

The working set comes from the workflow (its context report); an item out of it was archived,
and its last metadata is the ``item.archived`` event the workflow logged when it left (the
workflow no longer holds it). The rows are the store's own: the ledger lists exactly what
PostgreSQL holds for the lane, row for row.
"""

from __future__ import annotations

import re
from typing import Any

from lanes_client.schemas import LedgerCounts, LedgerEntry, LedgerPage, LedgerState
from worker.api.backend import Backend
from worker.api.errors import ApiError
from workflows.context import ContextReport, ItemReport, Projection, ids

CURSOR = re.compile(r"([A-Za-z0-9_.:-]{1,100})/([0-9]{1,18})")
NOT_RECORDED = "out of the working set (no transition recorded: stored after the working set was read, or cleared)"
DEFAULT_PAGE, MAX_PAGE = 200, 1000
CURSOR_HELP = "next_cursor of the previous page"
START = ("", -1)  # before the first (lane, seq)


def ledger_lanes(lane: str = ids.MAIN_LANE) -> list[str]:
    """The lane's own items and the items the engine generated for it (stored apart)."""
    return [lane, ids.generated_lane(lane)]


def parse_cursor(cursor: str | None) -> tuple[str, int]:
    """The (lane, seq) a page starts after; 400 naming the cursor when it is not one we made."""
    if cursor is None:
        return START
    found = CURSOR.fullmatch(cursor)
    if found is None:
        raise ApiError(400, "bad_cursor", "cursor is not one this API returned (use next_cursor as is)")
    return found.group(1), int(found.group(2))


async def ledger_page(be: Backend, session_id: str, report: ContextReport, *, state: LedgerState | None,
                      after: tuple[str, int], limit: int) -> LedgerPage:
    """One page of stored items after (lane, seq) ``after``, read against the working set of ``report``."""
    working = {i.id: i for i in report.items}
    lanes = ledger_lanes()
    exclude = list(working) if state == "archived" else None
    only = [i.id for i in report.items if i.lifecycle == state] if state not in (None, "archived") else None
    rows = await be.sql(lambda c: c.fetch(
        "SELECT item_id, lane, seq, kind, role, content->'meta' AS meta FROM items"
        " WHERE session_id = $1 AND lane = ANY($2::text[]) AND (lane, seq) > ($3, $4)"
        " AND ($5::text[] IS NULL OR item_id <> ALL($5::text[])) AND ($6::text[] IS NULL OR item_id = ANY($6::text[]))"
        " ORDER BY lane, seq LIMIT $7", session_id, lanes, after[0], after[1], exclude, only, limit + 1))
    page = rows[:limit]
    left = [r["item_id"] for r in page if r["item_id"] not in working]
    archived = await _archived_metadata(be, session_id, left) if left else {}
    entries = [_entry(r, working.get(r["item_id"]), archived.get(r["item_id"])) for r in page]
    next_cursor = f"{page[-1]['lane']}/{page[-1]['seq']}" if len(rows) > limit else None
    return LedgerPage(session_id=session_id, items=entries, counts=await _counts(be, session_id, lanes, report),
                      next_cursor=next_cursor)


async def _archived_metadata(be: Backend, session_id: str, item_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The item metadata of the last ``item.archived`` event of each item."""
    rows = await be.sql(lambda c: c.fetch(
        "SELECT DISTINCT ON (payload->>'item_id') payload->>'item_id' AS item_id, payload->'metadata' AS metadata"
        " FROM events WHERE session_id = $1 AND lane = $2 AND kind = 'item.archived'"
        " AND payload->>'item_id' = ANY($3::text[]) ORDER BY payload->>'item_id', id DESC",
        session_id, ids.events_lane(ids.MAIN_LANE), item_ids))
    return {r["item_id"]: dict(r["metadata"] or {}) for r in rows}


def _entry(row: Any, report: ItemReport | None, archived: dict[str, Any] | None) -> LedgerEntry:
    common = {"item_id": row["item_id"], "lane": row["lane"], "seq": row["seq"], "kind": row["kind"], "role": row["role"]}
    if report is not None:
        return LedgerEntry(**common, state=report.lifecycle, projection=report.projection, tokens=report.tokens,
                           full_tokens=report.tokens_by_projection.get(Projection.FULL.value, 0), reason=report.reason,
                           in_working_set=True, task_id=report.task, episode=report.episode,
                           observation_id=report.observation_id)
    meta = archived if archived is not None else dict(row["meta"] or {})  # else: its metadata when stored
    return LedgerEntry(**common, state="archived",
                       projection=str(meta.get("projection") or "omitted") if archived is not None else "omitted",
                       tokens=0, full_tokens=int((meta.get("tokens") or {}).get(Projection.FULL.value, 0)),
                       reason=str(meta.get("reason") or "archived") if archived is not None else NOT_RECORDED,
                       in_working_set=False, task_id=meta.get("task"), episode=meta.get("episode"),
                       observation_id=meta.get("observation_id"))


async def _counts(be: Backend, session_id: str, lanes: list[str], report: ContextReport) -> LedgerCounts:
    working = [i.id for i in report.items]
    found = await be.sql(lambda c: c.fetchrow(
        "SELECT count(*) AS history, count(*) FILTER (WHERE item_id <> ALL($3::text[])) AS archived,"
        " (SELECT count(*) FROM observations WHERE session_id = $1) AS observations"
        " FROM items WHERE session_id = $1 AND lane = ANY($2::text[])", session_id, lanes, working))
    by_state = dict(report.count_by_lifecycle)
    by_state["archived"] = found["archived"]
    return LedgerCounts(working_set=len(working), history=found["history"], archived=found["archived"],
                        observations=found["observations"], by_state=by_state)
