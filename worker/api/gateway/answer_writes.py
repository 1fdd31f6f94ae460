"""Answers stored in the session after the agent has them.

The gateway answers a call once the answer is durable in its own table (``gateway_turns``,
one PostgreSQL write); appending the answer's items to the session (a workflow update) runs
after, in the background, so the agent does not wait for it. Whoever comes next makes sure it
happened: the conversation's next call waits for this process's write, or, when the write is
not in this process (the API restarted, another replica answered), stores the answer from its
row itself. Both write the same items under the same key and update id, so the session holds
them once whichever runs (or both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("lanes.gateway")

Key = tuple[str, int]  # (session, position of the answer row)


class AnswerWrites:
    """The background writes of one API process, by answer row."""

    def __init__(self) -> None:
        self._tasks: dict[Key, asyncio.Task[None]] = {}

    def start(self, key: Key, write: Callable[[], Awaitable[None]]) -> None:
        """Run ``write`` in the background unless a write of ``key`` is already running."""
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._run(key, write), name=f"gateway answer {key[0]}@{key[1]}")

    async def _run(self, key: Key, write: Callable[[], Awaitable[None]]) -> None:
        try:
            await write()
        except Exception as error:  # the conversation's next call stores it (see module doc)
            log.warning("gateway: the answer at %s of %s is not stored yet (%s: %s); the next call stores it",
                        key[1], key[0], type(error).__name__, error)
        finally:
            self._tasks.pop(key, None)

    async def wait(self, key: Key) -> bool:
        """Wait for this process's write of ``key``; False when there is none (none ran here,
        or it has finished: the caller reads the row to know whether it stored the answer)."""
        task = self._tasks.get(key)
        if task is None:
            return False
        await asyncio.shield(task)  # a cancelled caller leaves the write running
        return True

    async def settle(self, session_id: str) -> None:
        """Wait for this process's writes into ``session_id``: a read through this API after
        the gateway answered sees the answer in the session (another replica's write may still
        be running: it is in the session once that replica's write or the next call stores it)."""
        tasks = [task for key, task in self._tasks.items() if key[0] == session_id]
        if tasks:
            await asyncio.wait(tasks)  # never cancels them, even when the caller is

    async def drain(self, seconds: float) -> None:
        """Let the running writes finish (the API is stopping); what is left, the next call stores."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=seconds)
