"""A new session's start (workflows/session_start.py): registered, its tool definitions measured
and its system prompt stored by one activity, ``start_session``, not two round trips (a gateway
conversation's first call waits for the start). The prompt's item must be the one ``store_text``
would have made: exact text, measured with the preview width that follows the measured tool
definitions, an oversized prompt archived at its address."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest
from temporalio.api.enums.v1 import EventType

from activities.items import ItemActivities
from activities.runtime import store_source
from activities.sessions import SessionActivities
from worker import sessions
from worker.settings import Settings
from workflows.context import EngineConfig, Kind, cost_profile, ids
from workflows.contract.items import StoreTextInput
from workflows.contract.session import SessionConfig
from workflows.contract.session_start import SessionStartInput
from workflows.patches import SETTLED_MARKER
from workflows.session import SessionWorkflow

# Over ids.OVERSIZED_INPUT_CHARS: stored whole at an address, entering the request bounded.
LONG_PROMPT = "".join(f"House rule {n}: keep the public API stable and explain every change.\n" for n in range(600))


async def _recorded(temporal_client, session_id: str) -> tuple[list[str], list[str], int]:
    """The activities the run scheduled, the patches it recorded, its search-attribute upserts."""
    activities, patch_ids, upserts = [], [], 0
    async for event in temporal_client.get_workflow_handle(session_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activities.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == "core_patch":
                [payload] = marker.details["patch-data"].payloads
                patch_ids.append(json.loads(payload.data)["id"])
        elif event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            upserts += 1
    return activities, patch_ids, upserts


@pytest.mark.usefixtures("worker")
@pytest.mark.parametrize("prompt", ["You are a careful engineer.", LONG_PROMPT], ids=["short", "oversized"])
async def test_a_new_sessions_system_prompt_is_stored_by_its_start_alone(temporal_client, settings, store, prompt):
    session_id = sessions.new_session_id("start")
    config = SessionConfig(session_id=session_id, model="gpt-4o-mini", budget_tokens=20_000, system_prompt=prompt)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    report = await sessions.context(handle)  # answers once the lane is published, prompt in it

    assert report.tool_definition_tokens > 0  # the catalog's tools: the preview width depends on them
    [system] = report.items
    assert (system.kind, system.seq, system.id) == (Kind.SYSTEM.value, 0, ids.item_id(ids.MAIN_LANE, 0))
    rows = await store.list_items(session_id)
    assert [(r.item_id, r.kind, r.content["content"]["text"]) for r in rows] == [(system.id, "system", prompt)]
    if len(prompt) > ids.OVERSIZED_INPUT_CHARS:
        assert system.observation_id == ids.observation_id(session_id, ids.MAIN_LANE, 0)
        stored = await store.read_observation(session_id, system.observation_id, 0, len(prompt) + 1)
        assert stored.text == prompt
    else:
        assert system.observation_id is None
    activities, patch_ids, upserts = await _recorded(temporal_client, session_id)
    assert activities == ["start_session"]  # one round trip: no store_text (nor its former name) of its own
    # every patch the start asks is settled: one marker and one upsert of TemporalChangeVersion, not one each
    assert (patch_ids, upserts) == ([SETTLED_MARKER], 1)
    await handle.signal(SessionWorkflow.close)
    await handle.result()


async def test_the_prompt_stored_at_start_is_the_item_store_text_makes(database_url):
    settings = Settings(database_url=database_url)
    stores = store_source(settings)
    starts, items = SessionActivities(settings, stores), ItemActivities(settings, stores)
    session_id = f"start-{uuid.uuid4().hex[:8]}"
    start = SessionStartInput(session_id=session_id, tenant="default", config={}, tools=["read_file", "bash"],
                              model="gpt-4o-mini")
    draft = EngineConfig(context_window=128_000, max_output_tokens=4_096, budget_tokens=6_000, **cost_profile(False))

    def text(seq: int, preview_chars: int) -> StoreTextInput:
        # one session, seqs whose ids and addresses tokenize alike: only the width may differ
        return StoreTextInput(session_id=session_id, item_id=ids.item_id(ids.MAIN_LANE, seq), seq=seq, task_id="",
                              text=LONG_PROMPT, kind="system", role="system", model="gpt-4o-mini",
                              preview_chars=preview_chars, observation_id=ids.observation_id(session_id, ids.MAIN_LANE, seq))

    try:
        started = await starts.start_session(start.model_copy(update={"system_prompt": text(0, 1), "engine_config": draft}))
        assert started.tool_definition_tokens > 0 and started.system_prompt is not None
        width = draft.model_copy(update={"tool_definition_tokens": started.tool_definition_tokens}).effective_preview_chars
        assert width != draft.effective_preview_chars  # the measured definitions narrow the preview
        apart = await items.store_text(text(1, width))  # as before: stored apart at the measured width
        at_draft = await items.store_text(text(2, draft.effective_preview_chars))
        same = {"id": "", "seq": 0, "observation_id": None}
        assert replace(started.system_prompt, **same) == replace(apart, **same)
        assert started.system_prompt.tokens != at_draft.tokens  # the measure can tell the widths apart
        stored = await (await stores.get()).read_observation(session_id, started.system_prompt.observation_id or "", 0,
                                                             len(LONG_PROMPT) + 1)
        assert stored.text == LONG_PROMPT
    finally:
        await stores.close()
