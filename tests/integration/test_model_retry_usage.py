"""A model call whose worker died after it stored the answer: the retry finds the answer and
reports the call's provider usage (kept with the answer), so the session counts it exactly
once. Run for real: the model activity in an ActivityEnvironment, the test session's
PostgreSQL, and the scripted model over HTTP through the ``openai`` client."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import ActivityEnvironment

from activities.items import store_item
from activities.model import ModelActivities
from activities.provider import ModelClients
from activities.runtime import store_source
from tests.integration.scripted_model import ScriptedModel
from worker.settings import Settings
from workflows.context import Item, ItemContent, Kind, Projection
from workflows.contract.model import ModelCallInput, ModelCallResult, PlanDelta

MODEL = "usage-retry-model"


@pytest.fixture
async def model_activities(settings: Settings) -> AsyncIterator[ModelActivities]:
    """The model activity as the worker builds it."""
    activities = ModelActivities(settings, store_source(settings), ModelClients())
    yield activities
    await activities.stores.close()
    await activities.clients.close()


async def test_a_retry_that_finds_the_answer_reports_its_usage_once(model_activities: ModelActivities,
                                                                   scripted_model: ScriptedModel, store):
    scripted_model.add(MODEL, [{"content": "the answer"}],
                       usage=lambda body: {"prompt_tokens": 321, "completion_tokens": 7, "total_tokens": 328,
                                           "prompt_tokens_details": {"cached_tokens": 64}})
    sid = f"usage-retry-{uuid.uuid4().hex[:8]}"
    await store.ensure_session(sid)
    system = Item(id="itm-000000", seq=0, kind=Kind.SYSTEM, role="system", tokens={Projection.FULL: 5})
    await store_item(store, sid, "main", system, ItemContent(text="You answer."))
    user = Item(id="itm-000001", seq=1, kind=Kind.USER, role="user", task="task-1", tokens={Projection.FULL: 5})
    await store_item(store, sid, "main", user, ItemContent(text="question"))
    inp = ModelCallInput(session_id=sid, plan=PlanDelta(version=1, base_version=None, entries=[
        ("itm-000000", Projection.FULL), ("itm-000001", Projection.FULL)]), response_item_id="itm-000002",
        response_seq=2, task_id="task-1", model=MODEL, max_output_tokens=100, preview_chars=2000, tools=[])
    calls_before = len([m for m, _ in scripted_model.reported if m == MODEL])

    first: ModelCallResult = await ActivityEnvironment().run(model_activities.call_model, inp)
    assert first.usage is not None and (first.usage.prompt, first.usage.cached, first.usage.completion) == (321, 64, 7)

    # the worker died before the result reached the workflow: attempt 2 finds the stored answer
    retry = ActivityEnvironment()
    retry.info = dataclasses.replace(retry.info, attempt=2)
    second: ModelCallResult = await retry.run(model_activities.call_model, inp)
    assert len([m for m, _ in scripted_model.reported if m == MODEL]) == calls_before + 1  # no second call
    assert second.stored.item.id == first.stored.item.id
    assert second.usage == first.usage  # the call's usage, reported by whichever attempt's result arrives
    assert (second.prompt_tokens, second.cached_tokens) == (321, 64)
