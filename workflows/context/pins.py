"""The budget check of a pinned note (``pin_note``, by the model or through the API).

Pinned content leaves the working set only in the final fallback (pass 3 rolls notes into
the ~400-token summary), so a note is admitted only while the pinned content stays within
the compaction target: the passes that run first can then still meet the target without
rolling anything. A note whose full cost is above the item share of the budget would
enter bounded, so it is refused too. A refusal names the need, what is pinned already, the
allowance and the budget, and changes nothing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .budget import budget, cost
from .items import Kind, Lifecycle
from .ledger import ContextState


class PinCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fits: bool
    need: int  # tokens of the note as a message
    pinned: int  # tokens of the pinned items already in the working set (capability context excluded)
    allowance: int  # the most pinned content may take: the compaction target (config.compaction_target)
    budget: int
    message: str


def pinned_tokens(state: ContextState) -> int:
    return sum(cost(state, i) for i in state.items.values()
               if i.lifecycle == Lifecycle.PINNED and i.kind != Kind.CAPABILITY.value)


def check_pin(state: ContextState, need: int) -> PinCheck:
    """Whether a note costing ``need`` tokens may be pinned now."""
    limit = budget(state)
    # pinned content stays within what a compaction aims for, so that no compaction has to
    # roll a pinned note into the summary (pass 3) to meet its target
    allowance = state.config.compaction_target(limit)
    pinned = pinned_tokens(state)
    item_limit = state.config.max_item_tokens
    if need > item_limit:
        message = (f"note refused: it needs {need} tokens, more than one item may take ({item_limit}, "
                   f"{state.config.max_item_share:.0%} of the budget {limit}); shorten it")
        return PinCheck(fits=False, need=need, pinned=pinned, allowance=allowance, budget=limit, message=message)
    if pinned + need > allowance:
        message = (f"note refused: it needs {need} tokens and pinned content already takes {pinned}; pinned content "
                   f"may take at most {allowance} tokens ({allowance / max(limit, 1):.0%} of the budget {limit}, the "
                   f"compaction target)")
        return PinCheck(fits=False, need=need, pinned=pinned, allowance=allowance, budget=limit, message=message)
    return PinCheck(fits=True, need=need, pinned=pinned, allowance=allowance, budget=limit,
                    message=f"note pinned ({need} tokens; pinned content now {pinned + need} of {allowance})")
