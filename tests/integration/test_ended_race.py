"""A call that races a session's end is answered 409 session_ended, never 404.

An update admitted just as the run completes comes back from Temporal as NOT_FOUND, with a
message that varies with the server version (seen once through the API, as a 404 "session not
found" for a session whose context was still readable). The failing call stands for that race;
the session, its workflow and their state are real.
"""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from worker import sessions
from worker.api.backend import Backend
from worker.api.errors import ACCEPTED_UPDATE_COMPLETED_WORKFLOW, ApiError, from_temporal
from workflows.contract.session import SessionConfig
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


async def _not_found(handle) -> None:
    raise RPCError("update wasn't found on server", RPCStatusCode.NOT_FOUND, b"")


async def _refusal(backend: Backend, session_id: str) -> ApiError:
    with pytest.raises(ApiError) as raised:
        await backend.temporal(session_id, "take the step", _not_found)
    return raised.value


async def test_not_found_from_an_ended_session_is_409_and_from_a_missing_one_404(temporal_client, settings):
    backend = Backend(settings, client=temporal_client)
    config = SessionConfig(session_id=sessions.new_session_id("ended"), mode="external", budget_tokens=6_000)
    handle = await sessions.start_session(temporal_client, config, settings.task_queue)

    running = await _refusal(backend, config.session_id)
    assert (running.status, running.code) == (404, "not_found")  # running: nothing to reinterpret

    await handle.signal(SessionWorkflow.close)
    await handle.result()
    ended = await _refusal(backend, config.session_id)
    assert (ended.status, ended.code) == (409, "session_ended")
    assert config.session_id in ended.message and "take the step" in ended.message

    missing = await _refusal(backend, sessions.new_session_id("never-started"))
    assert (missing.status, missing.code) == (404, "not_found")


def test_an_accepted_update_the_run_ended_under_is_409_session_ended():
    # what Temporal raises when a session is terminated while its update runs
    error = WorkflowUpdateFailedError(ApplicationError("Workflow Update failed because the Workflow completed "
                                                       "before the Update completed.",
                                                       type=ACCEPTED_UPDATE_COMPLETED_WORKFLOW))
    refusal = from_temporal(error, "ses-x", "take the step")
    assert (refusal.status, refusal.code) == (409, "session_ended")
    other = from_temporal(WorkflowUpdateFailedError(ApplicationError("boom", type="SomethingElse")), "ses-x", "step")
    assert other.status == 500  # any other untyped failure stays a server error
