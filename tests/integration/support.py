"""Helpers for hosted-session tests: replayed sessions and worker processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from temporalio.client import Client

from activities.tokens import count_tokens
from recordings import Trajectory
from tests.integration.scripted_model import tool_call
from tests.recordings import LONG_TRAJECTORY
from worker import sessions
from worker.local.stack import popen_group
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from workflows.contract.session import SessionConfig

REPO = Path(__file__).resolve().parents[2]

# What the scripted live model does in a task: write, read, run, try to escape, answer.
LIVE_SCRIPT = [
    {"content": "Writing the note.", "tool_calls": [tool_call("c1", "write_file", path="notes/a.txt", content="hello lanes\n")]},
    {"content": None, "tool_calls": [tool_call("c2", "read_file", path="notes/a.txt")]},
    {"content": None, "tool_calls": [tool_call("c3", "bash", command="wc -c < notes/a.txt; pwd")]},
    {"content": None, "tool_calls": [tool_call("c4", "write_file", path="../outside.txt", content="no")]},
    {"content": None, "tool_calls": [tool_call("c5", "list_files", path=".")]},
    {"content": None, "tool_calls": [tool_call("c6", "condense_context", completed_work=["wrote notes/a.txt"],
                                               references=["notes/a.txt"])]},
    {"content": None, "tool_calls": [tool_call("c7", "condense_context", completed_work=["x"],
                                               references=["/etc/passwd"])]},
    {"content": "Done: notes/a.txt holds the note."},
]


def worker_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "DATABASE_URL": settings.database_url or "",
        "LANES_TASK_QUEUE": settings.task_queue,
        "LANES_DATA_DIR": str(settings.data_dir),
        "PYTHONPATH": str(REPO),
        "LANES_STORE_OUTAGE_SECONDS": str(settings.store_outage_seconds),
        "OPENAI_BASE_URL": settings.openai_base_url or "",
        "OPENAI_API_KEY": settings.api_key() or "",
    }


def spawn_worker(settings: Settings, log_path: Path) -> subprocess.Popen:
    """A worker in its own process (so that a test can SIGKILL it)."""
    return popen_group([sys.executable, "-m", "worker.worker"], log_path, env=worker_env(settings), cwd=REPO)


def replay_config(session_id: str, trajectory: Trajectory, server: ReplayModelServer, **overrides) -> SessionConfig:
    return replay_config_for(session_id, trajectory, LONG_TRAJECTORY, server, **overrides)


def replay_config_for(session_id: str, trajectory: Trajectory, path: Path, server: ReplayModelServer,
                      **overrides) -> SessionConfig:
    """A session that replays the recording at ``path`` (already loaded as ``trajectory``)."""
    return sessions.replay_session_config(session_id, trajectory, path, server.base_url, **overrides)


def twin_session_ids() -> tuple[str, str]:
    """Two fresh session ids that differ in one digit only, so that every text quoting them (an
    observation address, the checkpoint) counts the same tokens under both. Two sessions compared
    under ids of other shapes could compact differently for that reason alone: a compaction is
    decided on a token's margin (a kill -9 test failed so, now and then)."""
    stem = sessions.new_session_id("test")
    ids = (f"{stem}-0001", f"{stem}-0002")
    addresses = [f"observation://obs-{i}-000084 ckpt-{i}-00001" for i in ids]
    assert count_tokens(addresses[0], "replay") == count_tokens(addresses[1], "replay"), ids
    return ids


def comparable(report) -> list[tuple]:
    """A session's context without its ids, for comparing two sessions run under twin ids
    (:func:`twin_session_ids`): then generated text quoting their addresses, the checkpoint,
    counts the same tokens under both, so every figure compares."""
    return [
        (i.seq, i.kind, i.lifecycle, i.projection, i.tokens, i.reason, i.size_chars)
        for i in sorted(report.items, key=lambda i: i.seq)
    ] + [(report.working_set_tokens, report.budget, report.compactions)]


async def run_replayed_session(client: Client, settings: Settings, trajectory: Trajectory,
                               server: ReplayModelServer, *, on_status=None, path: Path = LONG_TRAJECTORY,
                               session_id: str | None = None, **overrides):
    """Start a replayed session of the recording at ``path``, submit the recorded task, wait for
    it; returns (handle, status)."""
    session_id = session_id or sessions.new_session_id("test")
    config = replay_config_for(session_id, trajectory, path, server, **overrides)
    handle = await sessions.start_session(client, config, settings.task_queue)
    task_id = await sessions.submit(handle, trajectory.task)
    status = await asyncio.wait_for(sessions.wait_task(handle, task_id, on_status=on_status), timeout=300)
    return handle, status

