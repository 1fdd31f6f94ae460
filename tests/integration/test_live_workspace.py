"""Live mode: with OPENAI_BASE_URL set, sessions that are not replays call that model
and get real workspace tools confined to a per-session directory."""

from __future__ import annotations

import asyncio

import pytest

from worker import sessions
from worker.payload_codec import ENCODING
from workflows.contract.session import SessionConfig
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


async def test_live_session_uses_the_model_and_confined_workspace_tools(temporal_client, settings, store,
                                                                         scripted_model):
    session_id = sessions.new_session_id("live")
    handle = await sessions.start_session(temporal_client, SessionConfig(session_id=session_id, model="scripted"),
                                          settings.task_queue)
    task_id = await sessions.submit(handle, "Write a note and check it.")
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)
    assert status.tasks[0].state == "completed", status.tasks[0].error

    workspace = settings.workspace_root / session_id
    assert (workspace / "notes/a.txt").read_text() == "hello lanes\n"
    assert not (workspace.parent / "outside.txt").exists()

    report = await sessions.context(handle)
    results = sorted((i for i in report.items if i.kind == "tool_result"), key=lambda i: i.seq)
    outputs = [(await store.read_observation(session_id, i.observation_id, 0, 1000)).text for i in results]
    assert outputs[1] == "hello lanes\n"  # read_file returns the exact file
    assert outputs[2].splitlines() == ["12", "/workspace"]  # bash ran in its sandbox, the workspace mounted there
    assert "outside the workspace" in outputs[3]
    assert [i.tool_class for i in results[:4]] == ["write", "read", "read", "error"]
    assert outputs[4] == "notes/a.txt"
    # condense_context runs in the workflow: within the one task everything is the current
    # task's, which explicit condensation protects (a no-op, nothing written), then a bad
    # reference is rejected with the reason
    assert outputs[5].startswith("condense_context no-op") and "nothing eligible" in outputs[5]
    assert report.live_memory_id is None
    assert outputs[6].startswith("condense_context rejected") and "/etc/passwd" in outputs[6]
    assert results[6].tool_class == "error"
    # the model saw each tool result in the next request, and never the API key
    last = scripted_model.requests[-1]
    assert [m["content"] for m in last["messages"] if m["role"] == "tool"][1] == "hello lanes\n"
    assert "sk-test-not-a-secret" not in str(scripted_model.requests)
    history = await handle.fetch_history()
    recorded = b"".join(e.SerializeToString() for e in history.events)
    assert b"sk-test-not-a-secret" not in recorded and ENCODING not in recorded  # nothing compressed hides it
    await handle.signal(SessionWorkflow.close)
