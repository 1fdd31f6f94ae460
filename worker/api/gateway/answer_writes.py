"""Answers stored in the session after the agent has them.

The gateway answers a call once the answer is durable in its own table (``gateway_turns``,
one PostgreSQL write); appending the answer's items to the session (a workflow update) runs
after, in the background, so the agent does not wait for it. Whoever comes next makes sure it
happened: the conversation's next call waits for this process's write, or, when the write is
not in this process (the API restarted, another replica answered), stores the answer from its
row itself. Both write the same items under the same key and update id, so the session holds
them once whichever runs (or both).

A write may wait a moment before it begins (``delay``): an agent whose next call comes within
it has that call store the answer with its own turns, in one workflow update instead of two
(``take``). Reads (``settle``) and shutdown (``drain``) start waiting writes at once; a write
lost with its process is stored by the next call or by the sweep (answer_store.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("lanes.gateway")

Key = tuple[str, int]  # (session, position of the answer row)


@dataclass
class _Write:
    task: asyncio.Task[None] = field(init=False)  # set once made: the task runs this entry
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # begin now, delay or not
    begun: bool = False


class AnswerWrites:
    """The background writes of one API process, by answer row."""

    def __init__(self) -> None:
        self._writes: dict[Key, _Write] = {}

    def start(self, key: Key, write: Callable[[], Awaitable[None]], delay: float = 0.0) -> None:
        """Run ``write`` in the background, after ``delay`` seconds unless woken or taken
        first; nothing when a write of ``key`` is already here."""
        if key not in self._writes:
            entry = self._writes[key] = _Write()
            entry.task = asyncio.create_task(self._run(key, entry, write, delay),
                                             name=f"gateway answer {key[0]}@{key[1]}")

    async def _run(self, key: Key, entry: _Write, write: Callable[[], Awaitable[None]], delay: float) -> None:
        try:
            if delay > 0:
                try:
                    await asyncio.wait_for(entry.wake.wait(), delay)
                except TimeoutError:
                    pass
            entry.begun = True
            await write()
        except asyncio.CancelledError:
            if entry.begun:
                raise
            # taken before it began: the caller stores the answer
        except Exception as error:  # the conversation's next call stores it (see module doc)
            log.warning("gateway: the answer at %s of %s is not stored yet (%s: %s); the next call stores it",
                        key[1], key[0], type(error).__name__, error)
        finally:
            if self._writes.get(key) is entry:
                del self._writes[key]

    def waiting(self, key: Key) -> bool:
        """Whether this process holds a write of ``key`` that has not begun (``take`` would hand it over)."""
        entry = self._writes.get(key)
        return entry is not None and not entry.begun

    def take(self, key: Key) -> bool:
        """The write of ``key`` handed to the caller, who stores the answer itself, when it has
        not begun (True); False when there is none or it has begun (``wait`` for it then)."""
        entry = self._writes.get(key)
        if entry is None or entry.begun:
            return False
        del self._writes[key]
        entry.task.cancel()
        return True

    async def wait(self, key: Key) -> bool:
        """Wait for this process's write of ``key`` (begun now if it was waiting); False when
        there is none (none ran here, or it has finished: the caller reads the row to know
        whether it stored the answer)."""
        entry = self._writes.get(key)
        if entry is None:
            return False
        entry.wake.set()
        await asyncio.shield(entry.task)  # a cancelled caller leaves the write running
        return True

    async def settle(self, session_id: str) -> None:
        """Wait for this process's writes into ``session_id``: a read through this API after
        the gateway answered sees the answer in the session (another replica's write may still
        be running: it is in the session once that replica's write or the next call stores it)."""
        await self._finish([entry for key, entry in self._writes.items() if key[0] == session_id])

    async def drain(self, seconds: float) -> None:
        """Let the writes finish (the API is stopping); what is left, the next call or the sweep stores."""
        await self._finish(list(self._writes.values()), seconds)

    @staticmethod
    async def _finish(entries: list[_Write], seconds: float | None = None) -> None:
        for entry in entries:
            entry.wake.set()
        tasks = [entry.task for entry in entries]
        if tasks:
            await asyncio.wait(tasks, timeout=seconds)  # never cancels them, even when the caller is
