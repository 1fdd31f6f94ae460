"""Provider usage in a lane: every model call's counts recorded in the lane's totals, logged
as a ``model.usage`` event, and the model's calibrated token ratio applied to the budget.

Workflow code only. The counts come from activity results (the model and condenser
activities read them from the provider's answer and cost them), so replay recomputes the
same totals and ratio. Runs recorded before this existed keep their totals in state only:
no event, no calibration (``USAGE_PATCH``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows.context import CallUsage, ModelPrice, budget_ratio, price_for, record_call

if TYPE_CHECKING:
    from workflows.lane import Lane

# Gates the model.usage events and the calibrated budget (both change commands).
USAGE_PATCH = "model-usage"
# Gates the agent's model.usage event travelling with the step's tool activity (no
# record_events command, activity and workflow task of its own per turn).
USAGE_WITH_TOOL_PATCH = "usage-event-with-tool"
MODEL_USAGE = "model.usage"
CALIBRATION_RELAXED = "context.calibration.relaxed"


@dataclass(frozen=True)
class UsagePolicy:
    events: bool = False  # log model.usage events and calibrate (the patch is on)
    # divide the budget by the learned ratio: live sessions only (a replay server's counts
    # are character estimates, not a tokenizer's)
    calibrate_budget: bool = False
    prices: dict[str, ModelPrice] = field(default_factory=dict)  # the session's own prices
    defer_events: bool = False  # the agent's model.usage event waits for the step's next activity

    def price(self, model: str | None) -> ModelPrice | None:
        """The session's price of ``model``; None: the worker's LANES_PRICES decide."""
        return price_for(self.prices, model)


def usage_policy(live: bool, prices: dict[str, ModelPrice] | None = None) -> UsagePolicy:
    """Decided once per run, where its lane is made (calls ``workflow.patched``)."""
    on = patches.patched(USAGE_PATCH)
    return UsagePolicy(events=on, calibrate_budget=on and live, prices=dict(prices or {}),
                       defer_events=on and patches.patched(USAGE_WITH_TOOL_PATCH))


async def record_usage(lane: Lane, kind: str, model: str, usage: CallUsage | None, *, defer: bool = False,
                       **facts) -> None:
    """Add one call's usage (``kind``: agent or condenser) to the lane's totals, recalibrate the
    budget for the lane's model, and log it. ``facts``: small fields for the event (turn...).
    ``defer``: when the policy allows, the event goes with the lane's next activity (see
    ``Lane.defer_event``) instead of one of its own."""
    if usage is None:  # no call was made (an earlier attempt's stored answer)
        return
    totals = lane.data.usage
    calibration = record_call(totals, kind, model, usage)
    if not lane.usage.events:
        return
    ratio = budget_ratio(totals, lane.data.model) if lane.usage.calibrate_budget else 1.0
    totals.token_ratio = ratio
    config = lane.state.config
    if config.token_ratio != ratio:
        lane.state.config = config.model_copy(update={"token_ratio": ratio})
    log = lane.defer_event if defer and lane.usage.defer_events else lane.log_event
    await log(MODEL_USAGE, {
        **facts, "kind": kind, "model": model, "prompt": usage.prompt, "cached": usage.cached,
        "completion": usage.completion, "calls": usage.calls, "estimate": usage.estimate,
        "reported": usage.reported, "cost": usage.cost,
        "sample": calibration.last_sample if usage.reported and usage.estimate > 0 else None,
        "ratio": calibration.ratio, "budget_ratio": ratio})
