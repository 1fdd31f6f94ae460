"""A hosted task's answer: its status from the workflow, the text of its answer item from
PostgreSQL (the workflow keeps only the item's id, so the text is there whether or not the
item is still in the working set), and waiting a bounded time for it to finish."""

from __future__ import annotations

import asyncio

from lanes_client.schemas import TaskAnswer, TaskOut
from worker.api.backend import QUERY_TIMEOUT, Backend
from worker.api.errors import ApiError, not_found
from workflows.contract.session import SessionStatus, TaskStatus
from workflows.session import SessionWorkflow

POLL_SECONDS = (0.1, 0.2, 0.3, 0.5)  # then every 0.5 s


async def session_status(be: Backend, session_id: str) -> SessionStatus:
    return await be.temporal(session_id, "report its status", lambda h: h.query(SessionWorkflow.status), QUERY_TIMEOUT)


def find_task(status: SessionStatus, task_id: str) -> TaskStatus:
    task = next((t for t in status.tasks if t.task_id == task_id), None)
    if task is None:
        raise not_found(f"task {task_id!r}")
    return task


async def task_out(be: Backend, session_id: str, task: TaskStatus, max_chars: int) -> TaskOut:
    """The task with its answer's text (the first ``max_chars`` characters)."""
    out = TaskOut(session_id=session_id, **task.model_dump())
    if task.answer_item_id is not None:
        rows = await (await be.store()).get_items(session_id, [task.answer_item_id])
        row = rows.get(task.answer_item_id)
        if row is not None:
            text = str((row.content.get("content") or {}).get("text") or "")
            out.answer = TaskAnswer(item_id=row.item_id, text=text[:max_chars], size_chars=len(text),
                                    truncated=len(text) > max_chars)
    return out


async def wait_for_task(be: Backend, session_id: str, task_id: str, seconds: float) -> TaskStatus:
    """The task once it finished, or as it is when ``seconds`` ran out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    polls = 0
    while True:
        try:
            task = find_task(await session_status(be, session_id), task_id)
        except ApiError as error:  # a run continuing as new restores its checkpoint: a moment
            if error.code != "starting" or loop.time() >= deadline:
                raise
            await asyncio.sleep(POLL_SECONDS[-1])
            continue
        remaining = deadline - loop.time()
        if task.finished or remaining <= 0:
            return task
        await asyncio.sleep(min(remaining, POLL_SECONDS[min(polls, len(POLL_SECONDS) - 1)]))
        polls += 1
