"""Client-side helpers for sessions: start, submit, wait, inspect.

Shared by the demo, the CLI, the HTTP API and the tests so that they all talk to
SessionWorkflow the same way.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from recordings import Trajectory
from workflows.context import ContextReport
from workflows.contract.rejections import HANDING_OVER
from workflows.contract.session import (
    ChildLane,
    ReplaySpec,
    SessionConfig,
    SessionInput,
    SessionStatus,
    SubmitRequest,
    SubmitResult,
)
from workflows.session import SessionWorkflow

T = TypeVar("T")
HANDOVER_RETRY_SECONDS = 30.0  # a hand-over takes one checkpoint write: well under a second

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def is_handing_over(error: BaseException) -> bool:
    """A call refused because the session is continuing as new: the same call succeeds shortly."""
    cause = error.cause if isinstance(error, WorkflowUpdateFailedError) else None
    return isinstance(cause, ApplicationError) and cause.type == HANDING_OVER


async def through_handover(call: Callable[[], Awaitable[T]], give_up_seconds: float = HANDOVER_RETRY_SECONDS) -> T:
    """``call()`` (an update), retried while the session hands over to its next run."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up_seconds
    delay = 0.02
    while True:
        try:
            return await call()
        except WorkflowUpdateFailedError as error:
            if not is_handing_over(error) or loop.time() + delay > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


def new_session_id(prefix: str = "ses") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def check_session_id(session_id: str) -> str:
    if not SESSION_ID.fullmatch(session_id or ""):
        raise ValueError(
            f"session id {session_id!r} must be 1-64 letters, digits, '_', '.', '-' and start with a letter or digit"
        )
    return session_id


def replay_session_config(session_id: str, trajectory: Trajectory, path: str | Path, model_base_url: str,
                          **overrides) -> SessionConfig:
    """A session that replays the recording at ``path`` (already loaded as ``trajectory``)
    against the replay model server at ``model_base_url``."""
    fields = {"model": "replay", "system_prompt": trajectory.system or "You are a helpful assistant.", **overrides}
    return SessionConfig(
        session_id=session_id,
        replay=ReplaySpec(trajectory_path=str(Path(path).resolve()), trajectory_id=trajectory.id,
                          model_base_url=model_base_url),
        **fields,
    )


async def start_session(client: Client, config: SessionConfig, task_queue: str) -> WorkflowHandle:
    check_session_id(config.session_id)
    return await client.start_workflow(
        SessionWorkflow.run,
        SessionInput(config=config),
        id=config.session_id,
        task_queue=task_queue,
    )


async def submit(handle: WorkflowHandle, text: str) -> str:
    """Submit a task; a submit that lands while the session continues as new is retried."""
    result: SubmitResult = await through_handover(
        lambda: handle.execute_update(SessionWorkflow.submit, SubmitRequest(text=text)))
    return result.task_id


async def status(handle: WorkflowHandle) -> SessionStatus:
    return await _query_when_ready(handle, SessionWorkflow.status)


async def context(handle: WorkflowHandle) -> ContextReport:
    return await _query_when_ready(handle, SessionWorkflow.context)


async def subagents(handle: WorkflowHandle) -> list[ChildLane]:
    return await _query_when_ready(handle, SessionWorkflow.subagents_status)


async def _query_when_ready(handle: WorkflowHandle, query, wait: float = 30.0):
    """Right after continue-as-new a run restores its checkpoint for a moment (its queries
    say it is still starting): that is waited for, up to ``wait`` seconds."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            return await handle.query(query)
        except WorkflowQueryFailedError as error:
            if "still starting" not in str(error) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def wait_task(handle: WorkflowHandle, task_id: str, *, poll: float = 0.2, on_status=None) -> SessionStatus:
    """Poll until the task has ended (completed or failed); ``on_status`` sees every poll."""
    while True:
        try:
            current = await status(handle)
        except RPCError:  # no worker polling right now (it is being replaced): try again
            await asyncio.sleep(poll)
            continue
        if on_status is not None:
            await on_status(current)
        task = next((t for t in current.tasks if t.task_id == task_id), None)
        if task is not None and task.finished:
            return current
        await asyncio.sleep(poll)


async def history_bytes(handle: WorkflowHandle) -> int:
    """Bytes of the Temporal history of this workflow's runs (protobuf size)."""
    history = await handle.fetch_history()
    return sum(event.ByteSize() for event in history.events)
