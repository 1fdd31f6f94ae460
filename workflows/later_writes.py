"""Writes an external agent's step does not wait for, and the lock that waits for them.

A gateway step appends the agent's new turns and plans its next request; storing the turns
(and the items the plan generates: the rolling summary most steps, a checkpoint when it
compacts) cost the step an activity and a workflow task each before the request could go out.
Instead the turns are measured within the step's workflow task (a local activity that reads
only), the writes start with the step, and the step's result carries what the API needs to
render the request while they run. A write is scheduled in the workflow task that completes the
step, so it is as durable as the step's answer, and it is idempotent; nothing else can take its
ids in between (seqs are the workflow's, and every later writer takes the lock first).

A hosted step's generated items need no write of their own: the model call that follows
writes them before it renders its request (``carry``).

Whoever takes the lane's lock next (the next step, an append, a compaction, continue-as-new)
finds every such write done first, so nothing later reads an item before it is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.context import Item
    from workflows.contract.items import GeneratedItem, GeneratedItemsInput, IngestItemsInput


@dataclass
class _Write:
    task: asyncio.Task[Any]
    again: Callable[[], Coroutine[Any, Any, Any]]  # the same write, when the first one failed
    generated: list[GeneratedItem] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)


class LaterWrites:
    def __init__(self) -> None:
        self._writes: list[_Write] = []
        # generated items a hosted step's model call writes (ModelCallInput.generated) instead of
        # an activity of their own; until that call has answered, settling writes them itself
        self.carried: GeneratedItemsInput | None = None

    def carry(self, inp: GeneratedItemsInput) -> None:
        if self.carried is None:
            self.carried = inp
        else:
            self.carried = self.carried.model_copy(update={"items": [*self.carried.items, *inp.items],
                                                           "events": [*self.carried.events, *inp.events]})

    def carried_written(self) -> None:
        """The model call that carried them has answered: they are stored."""
        self.carried = None

    def store_generated(self, inp: GeneratedItemsInput) -> None:
        self._start(lambda: calls.store_generated_items(inp), generated=inp.items)

    def ingest(self, inp: IngestItemsInput, measured: list[Item]) -> None:
        """Store the items ``measured`` were measured from (by ``calls.measure_items``)."""
        self._start(lambda: calls.ingest_items(inp), items=measured)

    def _start(self, write: Callable[[], Coroutine[Any, Any, Any]], **unstored: Any) -> None:
        self._writes.append(_Write(task=asyncio.create_task(write()), again=write, **unstored))

    def unstored_generated(self) -> list[GeneratedItem]:
        """Generated items whose write has not finished (a request showing them carries them)."""
        return [g for w in self._writes if not w.task.done() for g in w.generated]

    def unstored_items(self) -> list[Item]:
        """Appended items whose write has not finished (the step's caller has their content)."""
        return [i for w in self._writes if not w.task.done() for i in w.items]

    async def settle(self) -> None:
        """Every write started is done. One that failed (its retries spent or refused) is
        written again here, and fails the caller if it fails again, so that nothing goes on
        as if it were stored."""
        while self._writes:
            write = self._writes[0]
            try:
                await write.task
            except ActivityError:
                await write.again()
            if write in self._writes:  # another settle may have finished it meanwhile
                self._writes.remove(write)
        if self.carried is not None:  # their model call failed or was cancelled: written here
            await calls.store_generated_items(self.carried)
            self.carried = None


class SettlingLock(asyncio.Lock):
    """The lane's lock: taking it waits for the later writes as well."""

    def __init__(self, writes: LaterWrites) -> None:
        super().__init__()
        self._writes = writes

    async def take(self) -> Literal[True]:
        """The lock alone (its holder settles itself when it must)."""
        return await super().acquire()

    async def acquire(self) -> Literal[True]:
        await super().acquire()
        try:
            await self._writes.settle()
        except BaseException:
            self.release()
            raise
        return True
