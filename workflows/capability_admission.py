"""Capability context through a session: a tool schema or skill body admitted against the
ceiling (usable input − 512, or the 8,000 fallback for an unknown model), step- or
task-scoped, never evicted; a manual skill that does not fit is skipped with a status
message in the event log, never a failed task.

The text is measured first and stored only once admitted, so a refusal leaves the store
and the lane as they were (its event aside). Workflow code only; callers hold ``lane.lock``.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.context import Item, Kind, Projection, engine
    from workflows.contract.items import StoreTextInput
    from workflows.contract.session import CapabilityRequest, CapabilityResult, CapabilityStatus
    from workflows.lane import Lane

ADMITTED, REFUSED, SKIPPED = "capability.admitted", "capability.refused", "capability.skipped"
_EVENTS = {"admitted": ADMITTED, "refused": REFUSED, "skipped": SKIPPED}
_HEADERS = {"tool_schema": "Tool definition available for this {scope}: {name}",
            "skill": "Skill activated for this {scope}: {name}", "manual_skill": "Skill activated by the user: {name}"}


def capability_text(request: CapabilityRequest) -> str:
    """What the model reads: a header naming the capability, then its content."""
    scope = "task" if request.kind == "manual_skill" else request.scope
    return _HEADERS[request.kind].format(scope=scope, name=request.name.strip()) + "\n\n" + str(request.text)


async def admit(lane: Lane, request: CapabilityRequest) -> CapabilityResult:
    text = capability_text(request)
    measured = await calls.measure_texts(lane.data.model, {Kind.CAPABILITY.value: text})
    seq = lane.data.next_seq  # taken only when admitted
    item = Item(id=lane.item_id(seq), seq=seq, kind=Kind.CAPABILITY.value, role="system",
                tokens={Projection.FULL: measured[Kind.CAPABILITY.value]}, size_chars=len(text),
                digest=f"{request.kind} {request.name.strip()}"[:200])
    status: CapabilityStatus
    if request.kind == "manual_skill":
        skill = engine.admit_manual_skill(lane.state, item)
        admission, status, message = skill.admission, skill.status, skill.message
    else:
        admission = engine.admit_capability(lane.state, item, "step" if request.scope == "step" else "task")
        status = "admitted" if admission.admitted else "refused"
        message = admission.message
    name = request.name.strip()  # the engine names the item by its id: the caller knows it by its name
    message = message.replace(repr(item.id), repr(name)).replace(item.id, name)
    if admission.admitted:
        lane.next_seq()
        await calls.store_text(StoreTextInput(
            session_id=lane.data.session_id, lane=lane.data.lane, item_id=item.id, seq=seq,
            task_id=lane.state.current_task or "", text=text, kind=Kind.CAPABILITY.value, role="system",
            model=lane.data.model, preview_chars=lane.preview_chars))
    result = CapabilityResult(status=status, item_id=item.id if admission.admitted else None, scope=admission.scope,
                              need=admission.need, margin=admission.margin, ceiling=admission.ceiling,
                              available=admission.available, message=message)
    await lane.log_event(_EVENTS[status], {"name": name, "kind": request.kind,
                                           **result.model_dump(exclude={"status"})})
    return result
