"""What a compaction draft reads of the lane before its passes run, kept with the plan cache.

A ``Draft`` (draft.py) needs the lane's cost, its omitted items (cleanup), its tool outputs
with an address (the only items pass 1 looks at) and the exchange groups still shown (the
protected window). Finding them is a pass over the whole working set. The plan cache
(plan_cache.py: derived, never stored) keeps them once its full scan has found them: each
appended item adds to them, and a compaction that only re-projects lane items (the plan
cache's patch) changes only the cost. Any other change leaves the cache stale, and the next
full scan finds them again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .budget import cost_of
from .items import TOOL_OUTPUT_KINDS, Item, Projection
from .ledger import NOT_LANE_KINDS


@dataclass
class LaneFacts:
    tokens: int = 0  # the lane items' cost under their projections (the omitted cost nothing)
    omitted: list[Item] = field(default_factory=list)  # lane items omitted, in item order
    tool_outputs: list[Item] = field(default_factory=list)  # lane tool outputs with an address, in item order
    shown_groups: set[int] = field(default_factory=set)  # groups with an item not omitted (any item)

    def add(self, items: Iterable[Item], preview: int) -> None:
        """Count ``items`` (in item order) in: one loop, since a full scan runs it over the working set."""
        omitted, not_lane, tool_kinds, tokens = Projection.OMITTED, NOT_LANE_KINDS, TOOL_OUTPUT_KINDS, self.tokens
        add_group, add_omitted, add_output = self.shown_groups.add, self.omitted.append, self.tool_outputs.append
        for item in items:
            projection, group = item.projection, item.group
            if group is not None and projection != omitted:
                add_group(group)
            kind = item.kind
            if kind in not_lane:
                continue
            if projection == omitted:
                add_omitted(item)
            else:
                measured = item.tokens.get(projection)  # cost_of written out for a measured projection
                tokens += measured if measured is not None else cost_of(item, projection, preview)
            if item.observation_id and (kind in tool_kinds or item.role == "tool"):
                add_output(item)
        self.tokens = tokens
