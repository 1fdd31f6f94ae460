"""The ``/v1`` endpoints of subagent lanes: start one, list them, read a lane's context.

Same rules as every session endpoint (worker/api/routes.py): a tenant's bearer token, and a
session (with its lanes) is 404 for every other tenant.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path

from worker.api.backend import QUERY_TIMEOUT
from worker.api.errors import ApiError, from_temporal
from worker.api.routes import COMMON_RESPONSES, Be, Owned
from workflows.context import ContextReport
from workflows.contract.session import ChildLane, SpawnRequest, SpawnResult
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)


@router.post("/sessions/{session_id}/subagents", status_code=201, response_model=SpawnResult, tags=["subagents"],
             summary="Start a subagent lane: it forks from the session's current request and hands off into it")
async def spawn_subagent(row: Owned, be: Be, body: SpawnRequest) -> SpawnResult:
    result: SpawnResult = await be.update(row.session_id, "start a subagent", SessionWorkflow.spawn_subagent, body)
    return result


@router.get("/sessions/{session_id}/subagents", response_model=list[ChildLane], tags=["subagents"],
            summary="The session's subagent lanes: state, tools, and the handoff item once recorded")
async def list_subagents(row: Owned, be: Be) -> list[ChildLane]:
    return await be.temporal(row.session_id, "list its subagents",
                             lambda h: h.query(SessionWorkflow.subagents_status), QUERY_TIMEOUT)


@router.get("/sessions/{session_id}/subagents/{lane}/context", response_model=ContextReport, tags=["subagents"],
            summary="A subagent lane's own context report (its shared prefix counted, not listed)")
async def get_subagent_context(row: Owned, be: Be,
                               lane: Annotated[str, Path(pattern=r"^sub-[0-9]{4,}$", max_length=20)]) -> ContextReport:
    lanes = await be.temporal(row.session_id, "list its subagents",
                              lambda h: h.query(SessionWorkflow.subagents_status), QUERY_TIMEOUT)
    child = next((c for c in lanes if c.lane == lane), None)
    if child is None:
        raise ApiError(404, "not_found", f"session {row.session_id!r} has no subagent lane {lane!r}")
    client = await be.client()
    try:
        return await asyncio.wait_for(
            client.get_workflow_handle(child.workflow_id).query("context", result_type=ContextReport), QUERY_TIMEOUT)
    except Exception as exc:
        raise from_temporal(exc, row.session_id, f"report the context of lane {lane}") from None
