"""A new session's start: the session registered, its tool definitions measured and its
system prompt stored, then its lane published.

Runs recorded before ``START_STORES_SYSTEM_PROMPT_PATCH`` stored the system prompt with an
activity of its own after ``start_session``; they replay through the older branches.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows import patches
    from workflows.context import Kind, engine
    from workflows.contract.lane_state import LaneState
    from workflows.contract.session import SessionConfig
    from workflows.contract.session_start import SessionStartInput
    from workflows.lane import Lane, session_engine_config
    from workflows.usage import UsagePolicy

# A new session's lane is published once its system prompt is stored (handlers waiting for it
# run after that store, not during it).
LANE_AFTER_SYSTEM_PROMPT_PATCH = "lane-after-system-prompt"
# A new session's system prompt is stored by start_session, not by an activity of its own: a
# gateway conversation's first call waited for both round trips.
START_STORES_SYSTEM_PROMPT_PATCH = "start-stores-system-prompt"


async def start_lane(cfg: SessionConfig, tools: list[str], engine_options: dict[str, bool | int],
                     usage: Callable[[], UsagePolicy], publish: Callable[[Lane], None]) -> None:
    """Register the session, store its system prompt and hand its lane to ``publish``.
    ``usage`` is asked where runs recorded before asked it (it may record a patch marker)."""
    start = SessionStartInput(
        session_id=cfg.session_id,
        tenant=cfg.tenant,
        config={"model": cfg.model, "context_window": cfg.context_window, "replay": cfg.replay is not None},
        tools=tools,
        model=cfg.model,
        tool_set=cfg.tool_set,
    )
    if cfg.system_prompt is not None and patches.patched(START_STORES_SYSTEM_PROMPT_PATCH):
        # The lane's seqs and settings before the tool definitions are measured: of what
        # stores the prompt, only its preview width depends on them, and the activity sets it.
        draft = session_engine_config(cfg, 0, engine_options)
        lane = Lane(LaneState(session_id=cfg.session_id, model=cfg.model, context=engine.new_state(draft)), usage())
        prompt_input = lane.text_input(cfg.system_prompt, kind=Kind.SYSTEM, role="system", task_id=None)
        start.system_prompt, start.engine_config = prompt_input, draft
        started = await calls.start_session(start)
        lane.data.context = engine.new_state(session_engine_config(cfg, started.tool_definition_tokens, engine_options))
        prompt = started.system_prompt
        if prompt is None:  # a worker older than the field ran it: stored apart, as before
            prompt = await calls.store_text(prompt_input.model_copy(update={"preview_chars": lane.preview_chars}))
        engine.add_item(lane.state, prompt)
        publish(lane)
        return
    started = await calls.start_session(start)
    config = session_engine_config(cfg, started.tool_definition_tokens, engine_options)
    lane = Lane(LaneState(session_id=cfg.session_id, model=cfg.model, context=engine.new_state(config)), usage())
    if patches.patched(LANE_AFTER_SYSTEM_PROMPT_PATCH):
        # Published only once the system prompt is in it: a context query in between
        # would answer an empty working set instead of "still starting".
        if cfg.system_prompt is not None:
            await lane.add_text(cfg.system_prompt, kind=Kind.SYSTEM, role="system", task_id=None)
        publish(lane)
        return
    async with lane.lock:  # runs recorded before: handlers waiting for the lane ran in between
        publish(lane)
        if cfg.system_prompt is not None:
            await lane.add_text(cfg.system_prompt, kind=Kind.SYSTEM, role="system", task_id=None)
