"""A hosted replay runs the whole recording: the user text recorded after a turn (a reply,
or the format error a text-protocol agent got when it answered without an action) is fed to
the session, so the replay does not stop at the first answer without tool calls."""

from __future__ import annotations

import pytest

from recordings import DEFAULT_TRAJECTORY_ROOT
from tests.integration.support import run_replayed_session
from tests.recordings import load_recording
from worker.replay.model_server import ReplayModelServer
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

RECORDINGS = [
    "mini-swe-agent-gemini/django__django-11066.traj.json.gz",  # two answers without an action, each followed by an error
    "claude-code/tool_heavy.jsonl.gz",  # user text arrives after a turn with tool calls
]


@pytest.mark.parametrize("name", RECORDINGS)
async def test_a_replay_runs_every_recorded_turn_and_feeds_the_recorded_user_text(temporal_client, settings, store,
                                                                                   name):
    path = DEFAULT_TRAJECTORY_ROOT / name
    trajectory = load_recording(path)
    follow_ups = [text for turn in trajectory.turns for text in turn.user_after]
    assert follow_ups, "the recording must have user text between turns"
    with ReplayModelServer([trajectory]) as server:
        handle, status = await run_replayed_session(temporal_client, settings, trajectory, server,
                                                    path=path, budget_tokens=200_000)
        served = sorted(server.state.served_turns(trajectory.id))
    task = status.tasks[0]
    assert task.state == "completed", task.error
    assert served == list(range(len(trajectory.turns)))  # every recorded turn
    users = [r for r in await store.list_items(handle.id, lane="main", limit=10_000) if r.kind == "user"]
    texts = [r.content["content"]["text"] for r in sorted(users, key=lambda r: r.seq)]
    assert texts == [trajectory.task, *follow_ups]
    await handle.signal(SessionWorkflow.close)
