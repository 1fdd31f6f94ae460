"""Token arithmetic: the cost of an item under a projection, the budget, the pressure.

Costs are measured outside the engine (tiktoken, on ``render.item_message``) and stored
in ``Item.tokens``. A projection the caller did not measure is estimated from the bounds
of its rendered text, never above the FULL cost, so a plan made on estimates stays safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import plan_cache
from .items import Item, Kind, Lifecycle, Projection, is_tool_output
from .text import REFERENCE_EXCERPT_CHARS, SOURCE_HEAD_MAX, chars_to_tokens

if TYPE_CHECKING:
    from .ledger import ContextState


# Enum members as plain module constants: ``Projection.FULL`` is a class-attribute lookup
# through the enum machinery, measurable in loops over the whole working set.
_FULL, _OMITTED, _ARCHIVED = Projection.FULL, Projection.OMITTED, Lifecycle.ARCHIVED


def cost_of(item: Item, projection: Projection, preview_chars: int) -> int:
    if projection == _OMITTED:
        return 0
    measured = item.tokens.get(projection)
    if measured is not None:
        return measured
    full = item.tokens.get(_FULL)
    if full is None:
        full = chars_to_tokens(item.size_chars)
    if projection == _FULL:
        return full
    return min(full, chars_to_tokens(_projected_chars(item, projection, preview_chars)))


def _projected_chars(item: Item, projection: Projection, preview_chars: int) -> int:
    """Upper bound of the characters ``render.projection_text`` produces (plus call overhead)."""
    address = len(item.observation_id or "") + 16
    if projection == Projection.COMPACT:
        return min(item.size_chars, preview_chars) + 2 * address + 260  # + the omitted-range marker
    if projection == Projection.MINIMAL_REFERENCE:
        return address + 40
    if item.observation_id is None:  # REFERENCE without an address keeps a short excerpt
        return REFERENCE_EXCERPT_CHARS + 60
    if is_tool_output(item):
        return len(item.tool_name or "tool") + address + 60
    return min(SOURCE_HEAD_MAX, preview_chars // 2) + 2 * address + 260


def cost(state: ContextState, item: Item, projection: Projection | None = None) -> int:
    """Cost of ``item`` under ``projection`` (default: its current one) in this state's config."""
    return cost_of(item, projection or item.projection, state.config.effective_preview_chars)


_CAPABILITY = Kind.CAPABILITY.value


def is_capability(item: Item) -> bool:
    return item.kind == _CAPABILITY


def working_set_cost(item: Item, preview_chars: int) -> int:
    """What ``item`` adds to ``working_set_tokens``."""
    if item.kind == _CAPABILITY or item.lifecycle == _ARCHIVED:
        return 0
    return cost_of(item, item.projection, preview_chars)


def capability_tokens(state: ContextState) -> int:
    cache = plan_cache.current(state)
    return cache.capability if cache is not None else scan_capability_tokens(state)


def scan_capability_tokens(state: ContextState) -> int:
    """``capability_tokens`` by a full scan (what the plan cache is built from)."""
    preview = state.config.effective_preview_chars
    return sum(cost_of(i, i.projection, preview) for i in state.items.values() if i.kind == _CAPABILITY)


def budget(state: ContextState) -> int:
    """Conversation budget: usable input (calibrated: ``EngineConfig.token_ratio``) − tool
    definitions − admitted capability context − the prefix a child lane shares with its parent."""
    return max(0, state.config.calibrated_base_budget - capability_tokens(state) - state.shared_tokens)


def working_set_tokens(state: ContextState) -> int:
    """Current cost of everything the next request would carry except capability context."""
    cache = plan_cache.current(state)
    return cache.working_set if cache is not None else scan_working_set_tokens(state)


def scan_working_set_tokens(state: ContextState) -> int:
    """``working_set_tokens`` by a full scan (what the plan cache is built from)."""
    preview = state.config.effective_preview_chars
    return sum(
        cost_of(i, i.projection, preview)
        for i in state.items.values()
        if i.kind != _CAPABILITY and i.lifecycle != _ARCHIVED
    )


def pressure(state: ContextState) -> float:
    """Working-set tokens / budget (a zero budget counts as one token, so it stays finite)."""
    return working_set_tokens(state) / max(budget(state), 1)
