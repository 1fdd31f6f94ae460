"""Sessions and their checkpoints: registering a session, and what continue-as-new carries.

A checkpoint is written under an id the workflow chose (idempotent by id) and read back by
the next run, whose input holds only that id.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.items import store_text_item
from activities.runtime import ActivityGroup
from activities.store_errors import CheckpointNotFound, ToolSetNotFound
from activities.tokens import count_tool_definitions
from workflows.contract.checkpoint import LoadCheckpointInput, SaveCheckpointInput, SessionCheckpoint
from workflows.contract.failures import CHECKPOINT_NOT_FOUND
from workflows.contract.session_start import SessionStartInput, SessionStartResult
from workflows.contract.tools import tool_specs


class SessionActivities(ActivityGroup):
    """Registering sessions and carrying their state across continue-as-new."""

    @activity.defn
    async def start_session(self, inp: SessionStartInput) -> SessionStartResult:
        """Register the session and measure the fixed cost of its tool definitions (the
        catalog's, then the agent's own), as ``activities.requests.materialise`` sends them;
        store its system prompt when the input holds one (``store_text``'s item)."""
        runtime = await self.runtime()
        await runtime.store.ensure_session(inp.session_id, inp.tenant, inp.config)
        specs = tool_specs(inp.tools)
        if inp.tool_set is not None:
            try:
                specs += await runtime.store.get_tool_set(inp.session_id, inp.tool_set)
            except ToolSetNotFound as exc:  # the API stores it before starting the session: a bug, not a fault
                raise ApplicationError(str(exc), type="ToolSetNotFound", non_retryable=True) from None
        tokens = count_tool_definitions(specs, inp.model)
        prompt = None
        if inp.system_prompt is not None:
            if inp.engine_config is None:
                raise ApplicationError("start_session: a system prompt came without the engine config that sets "
                                       "its preview width", type="BadStartInput", non_retryable=True)
            config = inp.engine_config.model_copy(update={"tool_definition_tokens": tokens})
            text = inp.system_prompt.model_copy(update={"preview_chars": config.effective_preview_chars})
            prompt = await store_text_item(runtime.store, text)
        return SessionStartResult(tool_definition_tokens=tokens, system_prompt=prompt)

    @activity.defn
    async def save_checkpoint(self, inp: SaveCheckpointInput) -> None:
        """Write the session state the next run continues from (idempotent by id)."""
        runtime = await self.runtime()
        await runtime.store.put_checkpoint(
            inp.session_id, inp.checkpoint_id, inp.checkpoint.lane.lane, inp.checkpoint.model_dump(mode="json")
        )

    @activity.defn
    async def load_checkpoint(self, inp: LoadCheckpointInput) -> SessionCheckpoint:
        runtime = await self.runtime()
        try:
            state = await runtime.store.get_checkpoint(inp.session_id, inp.checkpoint_id)
        except CheckpointNotFound as error:
            raise ApplicationError(str(error), type=CHECKPOINT_NOT_FOUND, non_retryable=True) from None
        return SessionCheckpoint.model_validate(state)
