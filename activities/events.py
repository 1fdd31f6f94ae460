"""The event log: what the workflows record about the engine's decisions.

Events are small (ids, counts, token figures, never content) and keyed by (lane, seq),
so a replayed workflow writes the same rows again and the store keeps one of each.
"""

from __future__ import annotations

from temporalio import activity

from activities import metrics
from activities.runtime import ActivityGroup
from activities.store_rows import EventRow
from workflows.contract.events import EventsInput


class EventActivities(ActivityGroup):
    """The event log's one write."""

    @activity.defn
    async def record_events(self, inp: EventsInput) -> int:
        """Append engine events (compactions, recoveries...) to the session's event log."""
        runtime = await self.runtime()
        rows = [EventRow(**e.model_dump()) for e in inp.events]
        inserted = await runtime.store.append_events(inp.session_id, rows)
        metrics.observe_events(rows)
        return inserted
