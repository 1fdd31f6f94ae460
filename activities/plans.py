"""Rebuilding a full request plan from the delta the workflow sent."""

from __future__ import annotations

from activities.store import Store
from workflows.context.items import Projection
from workflows.messages import PlanDelta

PlanEntries = list[tuple[str, Projection]]


class PlanBaseMissing(LookupError):
    """The delta names a base plan that was never stored (a workflow bug, not retryable)."""


async def materialize_plan(store: Store, session_id: str, lane: str, delta: PlanDelta) -> PlanEntries:
    """The full plan of ``delta.version``; stored so the next delta can build on it.

    Idempotent: a retried activity rebuilds the same plan and the second write is
    a no-op.
    """
    if delta.base_version is None:
        entries = list(delta.entries)
    else:
        base = await store.get_plan(session_id, lane, delta.base_version)
        if base is None:
            raise PlanBaseMissing(
                f"session {session_id} lane {lane}: base plan {delta.base_version} is not stored"
            )
        entries = [(item_id, Projection(p)) for item_id, p in base] + list(delta.entries)
    await store.put_plan(session_id, lane, delta.version, [[i, p.value] for i, p in entries])
    return entries
