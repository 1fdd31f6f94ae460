"""A session whose working set holds thousands of small items continues as new.

The engine keeps only metadata in workflow state, but that metadata grows with the number of
items the budget admits: thousands of short messages under a large budget make a state of
several MB. The checkpoint passes through Temporal (the save activity's input, the load
activity's result), and Temporal refuses a payload over 2 MiB: before payloads were
compressed, such a session stuck at its first continue-as-new, retrying the refused task.
"""

from __future__ import annotations

import json
from functools import partial

import pytest

from worker import sessions
from workflows.contract.session import ExternalItem, SessionConfig, StepRequest
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

STEPS = 60
PER_STEP = 100  # what one external call may append
UPDATES_PER_RUN = 40
LIMIT = 2 * 1024 * 1024  # Temporal's payload size limit


def _batch(step: int) -> list[ExternalItem]:
    """Short tool exchanges of one task: nothing ends, nothing is under pressure, all is kept."""
    items = []
    for n in range(step * PER_STEP // 2, (step + 1) * PER_STEP // 2):
        call = {"id": f"c{n}", "name": "bash", "arguments": json.dumps({"command": f"git show {n:05d}"})}
        items += [ExternalItem(kind="assistant", text="", tool_calls=[call]),
                  ExternalItem(kind="tool_result", tool_call_id=f"c{n}", tool_name="bash", exit_code=0,
                               text=f"commit {n:05d}: ok")]
    return items


async def test_a_state_larger_than_temporals_payload_limit_continues_as_new(temporal_client, settings, store):
    session_id = sessions.new_session_id("big-state")
    config = SessionConfig(session_id=session_id, mode="external", model="gpt-4.1", budget_tokens=900_000,
                           updates_per_run=UPDATES_PER_RUN)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)
    await handle.execute_update(SessionWorkflow.step, StepRequest(items=[ExternalItem(kind="user", text="go")]))
    for step in range(STEPS):
        result = await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.step,
                                                         StepRequest(items=_batch(step), step_id=f"s{step}")))
        assert result.request.fits and len(result.item_ids) == PER_STEP, step

    report = await sessions.context(handle)
    assert len(report.items) > STEPS * PER_STEP  # nothing was compacted: all of it is carried
    assert len(report.model_dump_json()) > LIMIT  # the report alone would not fit one payload uncompressed
    runs = [run async for run in temporal_client.list_workflows(f'WorkflowId = "{session_id}"')]
    assert len(runs) >= 2  # it did continue as new, with the whole state
    rows = await store.list_items(session_id, lane="main", limit=10_000)  # with the system prompt and "go"
    assert len(rows) == STEPS * PER_STEP + 2 and len({r.item_id for r in rows}) == len(rows)
    await handle.signal(SessionWorkflow.close)
