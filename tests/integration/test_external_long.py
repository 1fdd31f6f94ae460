"""An external-agent session runs for thousands of steps (issue 14): it continues as new on
its calls, not only on model turns, and every run's history stays bounded.

Before, only hosted turns counted: an external session never continued as new and died at
about 1,000 steps, when Temporal refused its 2,001st update of the run.
"""

from __future__ import annotations

import json
import time
from functools import partial

import pytest

from worker import sessions
from workflows.contract.session import ExternalItem, SessionConfig, StepRequest
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

STEPS = 2_500
UPDATES_PER_RUN = 250
MAX_RUN_EVENTS = 4_000
MAX_RUN_BYTES = 4 * 1024 * 1024


def _exchange(n: int) -> list[ExternalItem]:
    call = {"id": f"c{n}", "name": "bash", "arguments": json.dumps({"command": f"cat part{n}.txt"})}
    return [ExternalItem(kind="assistant", text="", tool_calls=[call]),
            ExternalItem(kind="tool_result", tool_call_id=f"c{n}", tool_name="bash", exit_code=0,
                         text=f"part {n}: " + "data " * 40)]


async def test_an_external_session_of_2500_steps_continues_as_new(temporal_client, settings, store):
    session_id = sessions.new_session_id("ext-long")
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=6_000,
                           updates_per_run=UPDATES_PER_RUN)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    started = time.monotonic()
    await handle.execute_update(SessionWorkflow.step, StepRequest(items=[ExternalItem(kind="user", text="go")]))
    for n in range(1, STEPS):
        result = await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.step,
                                                         StepRequest(items=_exchange(n), step_id=f"s{n}")))
        assert result.request.fits and len(result.item_ids) == 2, n
    took = time.monotonic() - started

    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{session_id}"')]
    assert len(runs) >= STEPS // UPDATES_PER_RUN
    for run in runs:
        history = await temporal_client.get_workflow_handle(session_id, run_id=run.run_id).fetch_history()
        size = sum(event.ByteSize() for event in history.events)
        assert len(history.events) < MAX_RUN_EVENTS and size < MAX_RUN_BYTES, (run.run_id, len(history.events), size)
    rows = await store.list_items(session_id, lane="main", limit=10_000)
    results = [r for r in rows if r.kind == "tool_result"]
    assert len(results) == STEPS - 1 and len({r.item_id for r in rows}) == len(rows)
    assert results[-1].content["content"]["text"].startswith(f"part {STEPS - 1}: ")
    report = await sessions.context(handle)
    assert report.working_set_tokens <= report.budget
    print(f"{STEPS} steps in {took:.1f} s over {len(runs)} runs")
    await handle.signal(SessionWorkflow.close)
