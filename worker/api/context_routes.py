"""The ``/v1`` endpoints of capability context and pinned notes (either mode).

``POST /capabilities`` admits a tool schema or skill body against the session's ceiling
(usable input − 512, or 8,000 when the model is unknown): 201 admitted, 200 refused or (a
manual skill) skipped, with need, margin and ceiling; ``POST /notes`` pins a note when
pinned content stays within its budget share: 201 pinned, 200 refused with the figures.
Nothing is stored unless admitted or pinned; bad input is 4xx naming the field.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from lanes_client.schemas import CapabilityIn, CapabilityOut, NoteIn, NoteOut
from worker.api.routes import COMMON_RESPONSES, Be, Owned
from workflows.contract.session import CapabilityRequest, CapabilityResult, PinRequest, PinResult
from workflows.session import SessionWorkflow

router = APIRouter(prefix="/v1", responses=COMMON_RESPONSES)


@router.post("/sessions/{session_id}/capabilities", status_code=201, response_model=CapabilityOut,
             tags=["context"], summary="Admit a tool schema or skill body (step or task scope) against the ceiling",
             responses={200: {"model": CapabilityOut, "description": "refused, or a manual skill skipped: it does not "
                                                                    "fit (the message names need, margin and ceiling)"}})
async def add_capability(row: Owned, be: Be, body: CapabilityIn, response: Response) -> CapabilityOut:
    request = CapabilityRequest(name=body.name, kind=body.kind, scope=body.scope, text=body.content)
    result: CapabilityResult = await be.update(row.session_id, "admit the capability", SessionWorkflow.add_capability,
                                               request)
    if result.status != "admitted":
        response.status_code = 200
    return CapabilityOut(session_id=row.session_id, name=body.name, **result.model_dump())


@router.post("/sessions/{session_id}/notes", status_code=201, response_model=NoteOut, tags=["context"],
             summary="Pin a note for the rest of the session (budget-checked)",
             responses={200: {"model": NoteOut, "description": "refused: pinned content would exceed its share of "
                                                              "the budget (the message names the figures)"}})
async def pin_note(row: Owned, be: Be, body: NoteIn, response: Response) -> NoteOut:
    result: PinResult = await be.update(row.session_id, "pin the note", SessionWorkflow.pin_note,
                                        PinRequest(text=body.text))
    if result.status != "pinned":
        response.status_code = 200
    return NoteOut(session_id=row.session_id, **result.model_dump())
