"""Pinned notes through a session (``pin_note``: the model's tool, or the API): measured,
checked against the budget (workflows/context/pins.py), then stored as a pinned note item;
a refusal stores nothing and says why. Workflow code only; callers hold ``lane.lock``.
"""

from __future__ import annotations

import json

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.context import Kind, check_pin
    from workflows.contract import rejections
    from workflows.contract.session import ExternalItem, PinResult, note_problem
    from workflows.lane import Lane

PINNED, REFUSED = "note.pinned", "note.refused"


async def pin(lane: Lane, text: str, task_id: str | None) -> PinResult:
    measured = await calls.measure_texts(lane.data.model, {Kind.NOTE.value: text})
    check = check_pin(lane.state, measured[Kind.NOTE.value])
    facts = check.model_dump(exclude={"fits", "message"})
    if not check.fits:
        await lane.log_event(REFUSED, {**facts, "message": check.message})
        return PinResult(status="refused", message=check.message, **facts)
    item = await lane.add_text(text, kind=Kind.NOTE, role=lane.state.config.generated_role, task_id=task_id)
    await lane.log_event(PINNED, {**facts, "item_id": item.id})
    return PinResult(status="pinned", item_id=item.id, message=check.message, **facts)


async def check_appended(lane: Lane, items: list[ExternalItem]) -> None:
    """Notes an external agent appends are pinned, so they pass ``pin``'s budget check: measured
    before anything of the call is stored, and the whole call refused (naming the item, its need
    and the allowance) when one of them, or all of them together, cannot be pinned."""
    notes = {f"items[{n}]": item.text for n, item in enumerate(items)
             if item.kind == Kind.NOTE.value and item.text is not None}
    if not notes:
        return
    measured = await calls.measure_texts(lane.data.model, notes)
    for where, need in measured.items():
        if not (check := check_pin(lane.state, need)).fits:
            raise rejections.invalid_input(f"{where}: {check.message}")
    if len(measured) > 1 and not (check := check_pin(lane.state, sum(measured.values()))).fits:
        raise rejections.invalid_input(f"{' and '.join(measured)} together: {check.message}")


async def pin_from_tool(lane: Lane, arguments: str | None, task_id: str) -> tuple[str, int]:
    """The ``pin_note`` tool: its answer and exit code (a refusal is an answer the model reads)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = None
    text = args.get("text") if isinstance(args, dict) else None
    if (problem := note_problem(text)) is not None:
        return f"pin_note refused: {problem}", 1
    assert isinstance(text, str)
    result = await pin(lane, text, task_id)
    return (f"pin_note: {result.message}", 0) if result.status == "pinned" else (f"pin_note {result.message}", 1)
