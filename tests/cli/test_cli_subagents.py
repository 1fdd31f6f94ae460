"""``lanes subagents`` as a subprocess against the real API: spawn, list, a lane's context."""

from __future__ import annotations

import asyncio
import json
import time

from tests.cli.test_cli import env, lanes  # noqa: F401  (the module-scoped env fixture)
from tests.integration.subagent_script import (
    child_trajectory,
    parent_trajectory,
    replay_field,
    write_recordings,
)
from worker.cli.sessions import EXIT_API
from worker.replay.model_server import ReplayModelServer


async def test_subagents_command_spawns_lists_and_shows_a_lane(env, client_a, api_settings):  # noqa: F811
    folder = api_settings.replay_roots[-1] / "subagents-cli"
    parent, children = write_recordings(folder, parent_trajectory([]), [child_trajectory(0)])
    with ReplayModelServer([parent[0], children[0][0]]) as server:
        created = await client_a.create_session(
            replay=replay_field(*parent, server, [replay_field(*children[0], server)]), subagents={"enabled": True})
        sid = created.session_id
        spawned = lanes(env, "subagents", sid, "--spawn", "Inspect module 0.")
        assert spawned.returncode == 0, spawned.stderr
        assert "started subagent lane sub-0001" in spawned.stdout
        deadline = time.monotonic() + 60
        while True:
            listed = json.loads(lanes(env, "subagents", sid, "--json").stdout)
            if listed[0]["state"] != "running" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
    assert listed[0]["state"] == "completed" and listed[0]["handoff_item_id"]
    table = lanes(env, "subagents", sid)
    assert table.returncode == 0 and "sub-0001" in table.stdout and "completed" in table.stdout
    lane = lanes(env, "subagents", sid, "--lane", "sub-0001")
    assert lane.returncode == 0 and "shared prefix" in lane.stdout
    missing = lanes(env, "subagents", sid, "--lane", "sub-0042")
    assert missing.returncode == EXIT_API and "no subagent lane 'sub-0042'" in missing.stderr
    shown = lanes(env, "session", "show", sid)
    assert "subagents=True" in shown.stdout
