"""``SessionWorkflow``'s handlers for capability context and pinned notes (either mode):
a base class, so that the workflow module stays about the session itself. Temporal
collects the handlers of base classes with the workflow's own.

Workflow code only.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import capability_admission, pinned_notes
    from workflows.contract import rejections
    from workflows.contract.session import (
        CapabilityRequest,
        CapabilityResult,
        PinRequest,
        PinResult,
        capability_problem,
        note_problem,
    )
    from workflows.lane import Lane


class ContextHandlers:
    lane: Lane | None
    updates_this_run: int

    async def _ready_lane(self) -> Lane:  # SessionWorkflow's
        raise NotImplementedError

    def _check_open(self, what: str) -> None:  # SessionWorkflow's
        raise NotImplementedError

    @workflow.update
    async def add_capability(self, request: CapabilityRequest) -> CapabilityResult:
        """Admit a tool schema or skill body (step- or task-scoped) for the current or next
        task; refused (or, a manual skill, skipped) with need, margin and ceiling when it
        does not fit."""
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            return await capability_admission.admit(lane, request)

    @add_capability.validator
    def validate_add_capability(self, request: CapabilityRequest) -> None:
        self._check_open("add_capability")
        if (problem := capability_problem(request)) is not None:
            raise rejections.invalid_input(f"add_capability rejected: {problem}")

    @workflow.update
    async def pin_note(self, request: PinRequest) -> PinResult:
        """Pin a note for the rest of the session, if pinned content stays within its budget share."""
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            return await pinned_notes.pin(lane, str(request.text), lane.state.current_task)

    @pin_note.validator
    def validate_pin_note(self, request: PinRequest) -> None:
        self._check_open("pin_note")
        if (problem := note_problem(request.text)) is not None:
            raise rejections.invalid_input(f"pin_note rejected: {problem}")
