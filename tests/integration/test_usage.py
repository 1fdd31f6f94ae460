"""Provider usage on the real stack (issue 15, part 3): every model call's reported prompt,
cached and completion tokens reach the session's status, a ``model.usage`` event and the
Prometheus metrics; cost units follow the configured prices; the token estimate calibrates
against the provider's count and the budget follows it, bounded against garbage counts.

The model is the scripted OpenAI-compatible server, reporting the usage each test chooses:
``ours`` is the count the engine makes of the same request (activities/requests.py).
"""

from __future__ import annotations

import asyncio
import math
import uuid

import pytest

from activities.metrics import REGISTRY
from activities.tokens import count_message_tokens, count_tool_definitions
from tests.integration.scripted_model import ScriptedModel, tool_call
from worker import sessions
from workflows.context import RATIO_MAX, ModelPrice, cost_units
from workflows.contract.session import SessionConfig
from workflows.session import SessionWorkflow
from workflows.usage import CALIBRATION_RELAXED, MODEL_USAGE

pytestmark = pytest.mark.usefixtures("worker")


def ours(body: dict) -> int:
    """The engine's count of a request it sent (messages and tool definitions)."""
    model = body.get("model")
    return (sum(count_message_tokens(m, model) for m in body["messages"])
            + count_tool_definitions(body.get("tools") or [], model))


def scaled(factor: float, cached_share: float = 0.0):
    """A provider whose prompt count is ``factor`` x ours (rounded up), part of it cached."""
    def usage(body: dict) -> dict:
        prompt = math.ceil(ours(body) * factor)
        completion = 5 + len(body["messages"])
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": int(prompt * cached_share)}}
    return usage


def bash_steps(n: int, command: str = "echo step") -> list[dict]:
    return [{"content": f"step {i}", "tool_calls": [tool_call(f"c{i}", "bash", command=command)]} for i in range(n)] + [
        {"content": "done"}]


async def run_task(temporal_client, settings, config: SessionConfig, text: str = "do the steps"):
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    task_id = await sessions.submit(handle, text)
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=180)
    return handle, status


def reported(scripted_model: ScriptedModel, model: str) -> list[dict]:
    return [u for m, u in scripted_model.reported if m == model and u is not None]


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def usage_events(store, session_id: str) -> list[dict]:
    return [e.payload for e in await store.list_events(session_id, limit=2_000) if e.kind == MODEL_USAGE]


async def test_usage_totals_equal_what_the_server_reported_in_status_events_and_metrics(
        temporal_client, settings, store, scripted_model):
    model = scripted_model.add(f"usage-{uuid.uuid4().hex[:8]}", bash_steps(4), scaled(1.1, cached_share=0.5))
    price = ModelPrice(input=2.0, cached_input=0.5, output=8.0)
    config = SessionConfig(session_id=sessions.new_session_id("usage"), model=model, prices={model: price})
    handle, status = await run_task(temporal_client, settings, config)
    assert status.tasks[0].state == "completed", status.tasks[0].error

    sent = reported(scripted_model, model)
    assert len(sent) == 5
    prompt = sum(u["prompt_tokens"] for u in sent)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in sent)
    completion = sum(u["completion_tokens"] for u in sent)
    usage = status.usage
    assert (usage.prompt, usage.cached, usage.completion, usage.calls) == (prompt, cached, completion, 5)
    assert usage.cached_share == round(cached / prompt, 4)
    expected_cost = sum(cost_units(price, u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"],
                                   u["completion_tokens"]) for u in sent)
    assert usage.cost == pytest.approx(expected_cost)
    assert usage.by_kind["agent"].calls == 5 and usage.by_kind["agent"].prompt == prompt

    events = await usage_events(store, handle.id)
    assert [(e["prompt"], e["cached"], e["completion"]) for e in events] == [
        (u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"]) for u in sent]
    assert [e["turn"] for e in events] == [0, 1, 2, 3, 4] and {e["kind"] for e in events} == {"agent"}
    assert [e["estimate"] for e in events] == [ours(r) for r in scripted_model.requests if r["model"] == model]

    # the worker runs in this process: its registry counted the same tokens (one model label per test)
    assert sample("lanes_model_tokens_total", purpose="agent", model=model, type="prompt") == prompt
    assert sample("lanes_model_tokens_total", purpose="agent", model=model, type="cached") == cached
    assert sample("lanes_model_tokens_total", purpose="agent", model=model, type="completion") == completion
    assert sample("lanes_model_cost_units_total", purpose="agent", model=model) == pytest.approx(expected_cost)
    assert sample("lanes_token_estimate_ratio_count", purpose="agent", model=model) == 5
    await handle.signal(SessionWorkflow.close)


async def test_the_ratio_converges_on_a_provider_counting_1_3x_and_requests_fit_its_count(
        temporal_client, settings, store, scripted_model):
    budget = 3_000
    # each step's output is a few hundred tokens: the session compacts many times
    script = bash_steps(14, command="seq 1 150")
    model = scripted_model.add(f"usage-cal-{uuid.uuid4().hex[:8]}", script, scaled(1.3), sequential=True)
    config = SessionConfig(session_id=sessions.new_session_id("usage-cal"), model=model, budget_tokens=budget)
    handle, status = await run_task(temporal_client, settings, config)
    assert status.tasks[0].state == "completed", status.tasks[0].error

    sent = reported(scripted_model, model)
    # after the first answer calibrated the ratio, every request fits by the provider's count
    assert all(u["prompt_tokens"] <= budget for u in sent[1:]), [u["prompt_tokens"] for u in sent]
    assert max(u["prompt_tokens"] for u in sent[1:]) > budget * 0.6  # the budget was used, not avoided
    calibration = status.usage.calibration[model]
    assert calibration.samples == 15 and calibration.ignored == 0
    assert calibration.ratio == pytest.approx(1.3, abs=0.01)
    assert status.usage.token_ratio == calibration.ratio
    report = await sessions.context(handle)
    assert report.budget <= int(budget / calibration.ratio)  # planned against budget / ratio
    kinds = [e.kind for e in await store.list_events(handle.id, limit=2_000)]
    assert any(k.startswith("context.compaction.") for k in kinds)
    await handle.signal(SessionWorkflow.close)


async def test_garbage_counts_are_bounded_and_never_wedge_the_session(
        temporal_client, settings, store, scripted_model):
    garbage = iter([{"prompt_tokens": 0, "completion_tokens": 3}, {"prompt_tokens": -40, "completion_tokens": -2},
                    {"prompt_tokens": 10**12, "completion_tokens": 1}, None])

    def report(body: dict) -> dict | None:
        return next(garbage, {"prompt_tokens": 10**12, "completion_tokens": 1})

    model = scripted_model.add(f"usage-bad-{uuid.uuid4().hex[:8]}", bash_steps(5), report, sequential=True)
    # the system prompt alone takes more than half the budget: a halved budget cannot hold it
    prompt = "".join(f"rule {n}: be careful with item {n}.\n" for n in range(120))
    config = SessionConfig(session_id=sessions.new_session_id("usage-bad"), model=model, budget_tokens=2_500,
                           system_prompt=prompt)
    handle, status = await run_task(temporal_client, settings, config)
    assert status.tasks[0].state == "completed", status.tasks[0].error
    usage = status.usage
    calibration = usage.calibration[model]
    assert calibration.ignored == 3  # zero, negative, missing: no count at all
    assert calibration.samples == 3 and calibration.ratio == RATIO_MAX  # huge: bounded
    assert usage.token_ratio == RATIO_MAX
    assert usage.completion == 3 + 0 + 1 + 0 + 1 + 1 and usage.calls == 6  # negative and missing count as 0
    assert usage.prompt == 3 * 10**12
    kinds = [e.kind for e in await store.list_events(handle.id, limit=2_000)]
    assert CALIBRATION_RELAXED in kinds  # planned on our own count when the calibrated budget held nothing
    # the session stays usable
    task_id = await sessions.submit(handle, "again")
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)
    assert status.tasks[-1].state == "completed", status.tasks[-1].error
    await handle.signal(SessionWorkflow.close)


async def test_totals_survive_continue_as_new(temporal_client, settings, store, scripted_model):
    model = scripted_model.add(f"usage-can-{uuid.uuid4().hex[:8]}", bash_steps(6), scaled(1.2, cached_share=0.25))
    config = SessionConfig(session_id=sessions.new_session_id("usage-can"), model=model, turns_per_run=2,
                           prices={"usage-can-*": ModelPrice(input=1.0, output=4.0)})
    handle, status = await run_task(temporal_client, settings, config)
    assert status.tasks[0].state == "completed", status.tasks[0].error
    runs = [r async for r in temporal_client.list_workflows(f'WorkflowId = "{handle.id}"')]
    assert len(runs) >= 3  # it continued as new
    sent = reported(scripted_model, model)
    assert status.usage.calls == len(sent) == 7
    assert status.usage.prompt == sum(u["prompt_tokens"] for u in sent)
    assert status.usage.cached == sum(u["prompt_tokens_details"]["cached_tokens"] for u in sent)
    assert status.usage.cost == pytest.approx(sum(
        (u["prompt_tokens"] * 1.0 + u["completion_tokens"] * 4.0) / 1e6 for u in sent))  # cached: the input price
    assert status.usage.calibration[model].samples == 7
    assert len(await usage_events(store, handle.id)) == 7
    await handle.signal(SessionWorkflow.close)
