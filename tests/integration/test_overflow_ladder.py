"""Provider overflow recovery: full -> reference -> minimal-reference, then terminal.

The replay model rejects requests above N estimated tokens with OpenAI's
``context_length_exceeded`` error. Recordings are crafted so that a known ladder
step is the first that fits.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recordings import load_trajectory
from tests.integration.support import replay_config_for
from worker import sessions
from worker.replay.model_server import ReplayModelServer
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")


def recording(path: Path, turns: list[tuple[str, str]]) -> Path:
    """A mini-swe-agent-1.1 file: each turn is (assistant prose, tool output), then exit."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    for index, (prose, output) in enumerate(turns):
        call_id = f"call-{index}"
        messages.append({"role": "assistant", "content": prose, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    messages.append({"role": "exit", "content": ""})
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "messages": messages}))
    return path


async def run_with_limit(tmp_path, temporal_client, settings, store, turns, limit):
    path = recording(tmp_path / f"overflow-{uuid.uuid4().hex[:6]}.json", turns)
    trajectory = load_trajectory(path)
    with ReplayModelServer([trajectory]) as server:
        server.set_faults("context_length", count=-1, max_prompt_tokens=limit)
        session_id = sessions.new_session_id("overflow")
        handle = await sessions.start_session(
            temporal_client, replay_config_for(session_id, trajectory, path, server), settings.task_queue
        )
        task_id = await sessions.submit(handle, trajectory.task)
        status = await asyncio.wait_for(sessions.wait_task(handle, task_id), timeout=120)
        events = await store.list_events(session_id, limit=1000)
        requests = server.requests()
    await handle.signal(SessionWorkflow.close)
    steps = [(e.kind, e.payload["turn"], e.payload["rejected"]) for e in events if e.kind.startswith("context.overflow")]
    return status.tasks[0], steps, requests


async def test_turn_succeeds_on_the_reference_step_when_that_fits(tmp_path, temporal_client, settings, store):
    # call 1 carries output A (~2,000 tokens) in full; call 2 also carries B (~1,500):
    # too much in full, but fine once A is a reference
    task, steps, _ = await run_with_limit(
        tmp_path, temporal_client, settings, store, [("a", "A" * 8000), ("b", "B" * 6000)], limit=3000
    )
    assert task.state == "completed", task.error
    assert steps == [("context.overflow.retry", 2, "full")]


async def test_turn_succeeds_on_minimal_reference_when_only_that_fits(tmp_path, temporal_client, settings, store):
    # long assistant prose in the first turn: references keep it, minimal-reference does not
    task, steps, _ = await run_with_limit(
        tmp_path, temporal_client, settings, store, [("P" * 6000, "x"), ("b", "B" * 4800)], limit=2500
    )
    assert task.state == "completed", task.error
    assert steps == [("context.overflow.retry", 2, "full"), ("context.overflow.retry", 2, "reference")]


async def test_overflow_is_terminal_after_exactly_two_retries(tmp_path, temporal_client, settings, store):
    task, steps, requests = await run_with_limit(
        tmp_path, temporal_client, settings, store, [("a", "x")], limit=10
    )
    assert task.state == "failed"
    assert "too long" in task.error and "maximum context length" in task.error
    assert steps == [
        ("context.overflow.retry", 0, "full"),
        ("context.overflow.retry", 0, "reference"),
        ("context.overflow.failed", 0, "minimal-reference"),
    ]
    assert len(requests) == 3  # the first request and exactly two retries
