"""Provider-reported usage: per-call counts, session totals, cost units and the calibration
of our token estimates against the provider's counts.

Pure arithmetic on small numbers, deterministic (the inputs come from activity results,
which replay from history):

- A model activity reports what the provider counted for one call (:class:`CallUsage`:
  prompt, cached and completion tokens), our own count of what was sent (``estimate``) and
  its cost in units (tokens x price per million, :func:`cost_units`).
- :func:`record_call` adds it to a lane's :class:`UsageTotals` (in total and by kind:
  ``agent``, ``condenser``) and updates the model's :class:`Calibration`: a running ratio
  provider prompt tokens / our estimate, the mean of the first :data:`CALIBRATION_WINDOW`
  samples and then an exponential moving average with weight 1/window. Each sample is
  bounded to [:data:`RATIO_MIN`, :data:`RATIO_MAX`] and a count that is no count (missing,
  zero, negative) is ignored, so a garbage provider cannot move the ratio out of bounds.
- :func:`budget_ratio`: the ratio the budget is divided by. Only ever >= 1: when the
  provider counts fewer tokens than we do, budgeting on our own count is already safe.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

RATIO_MIN = 0.5
RATIO_MAX = 2.0
CALIBRATION_WINDOW = 10
MILLION = 1_000_000


class ModelPrice(BaseModel):
    """Prices per million tokens, in whatever unit the team bills in ("cost units")."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(0.0, ge=0)
    cached_input: float | None = Field(None, ge=0)  # None: the input price
    output: float = Field(0.0, ge=0)


class CallUsage(BaseModel):
    """One model call (or a condensation's calls) as the provider counted it."""

    prompt: int = Field(0, ge=0)
    cached: int = Field(0, ge=0)  # of ``prompt``, served from the provider's prompt cache
    completion: int = Field(0, ge=0)
    calls: int = Field(1, ge=0)
    estimate: int = Field(0, ge=0)  # our count of the prompts sent (0: unknown)
    reported: bool = True  # the provider reported a prompt count (False: no sample for calibration)
    cost: float = Field(0.0, ge=0)


class UsageCounts(BaseModel):
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    calls: int = 0
    cached_share: float = 0.0  # cached / prompt
    cost: float = 0.0  # cost units (configured prices)


class Calibration(BaseModel):
    """Provider prompt tokens / our estimate, learned for one model."""

    ratio: float = 1.0
    samples: int = 0
    ignored: int = 0  # calls whose provider count was missing, zero or negative
    last_sample: float | None = None  # the last sample, after bounding


class UsageTotals(UsageCounts):
    """A lane's (a session's) totals, by kind, and the calibration of each model seen."""

    by_kind: dict[str, UsageCounts] = Field(default_factory=dict)
    calibration: dict[str, Calibration] = Field(default_factory=dict)
    token_ratio: float = 1.0  # the ratio the budget is divided by now (budget_ratio)


def sanitized(prompt: int | None, cached: int | None, completion: int | None) -> tuple[int, int, int, bool]:
    """(prompt, cached, completion, reported): negatives and missing counts are 0, cached is at
    most prompt; ``reported``: the provider gave a positive prompt count."""
    p = prompt if isinstance(prompt, int) and prompt > 0 else 0
    c = cached if isinstance(cached, int) and cached > 0 else 0
    o = completion if isinstance(completion, int) and completion > 0 else 0
    return p, min(c, p), o, p > 0


def cost_units(price: ModelPrice | None, prompt: int, cached: int, completion: int) -> float:
    """Tokens x price per million: uncached prompt at ``input``, cached at ``cached_input``."""
    if price is None:
        return 0.0
    cached_price = price.input if price.cached_input is None else price.cached_input
    return ((prompt - cached) * price.input + cached * cached_price + completion * price.output) / MILLION


def price_for(prices: dict[str, ModelPrice] | None, model: str | None) -> ModelPrice | None:
    """``model``'s price: its exact name, else the longest ``prefix*`` key it starts with,
    else ``*``; None when nothing matches."""
    if not prices or not model:
        return None
    if model in prices:
        return prices[model]
    prefixes = sorted((k for k in prices if k.endswith("*") and model.startswith(k[:-1])), key=len, reverse=True)
    return prices[prefixes[0]] if prefixes else None


def _add(counts: UsageCounts, usage: CallUsage) -> None:
    counts.prompt += usage.prompt
    counts.cached += usage.cached
    counts.completion += usage.completion
    counts.calls += usage.calls
    counts.cost = round(counts.cost + usage.cost, 9)
    counts.cached_share = round(counts.cached / counts.prompt, 4) if counts.prompt else 0.0


def add_counts(totals: UsageTotals, kind: str, counts: UsageCounts) -> None:
    """Add another lane's totals (a subagent's) to ``totals`` under ``kind``, in place; no
    calibration (its calls calibrated its own lane)."""
    usage = CallUsage(prompt=max(0, counts.prompt), cached=max(0, min(counts.cached, counts.prompt)),
                      completion=max(0, counts.completion), calls=max(0, counts.calls), cost=max(0.0, counts.cost))
    _add(totals, usage)
    _add(totals.by_kind.setdefault(kind, UsageCounts()), usage)


def counts_of(totals: UsageCounts) -> UsageCounts:
    """The plain counts of ``totals`` (what a subagent hands its parent)."""
    return UsageCounts(prompt=totals.prompt, cached=totals.cached, completion=totals.completion, calls=totals.calls,
                       cached_share=totals.cached_share, cost=totals.cost)


def calibrate(calibration: Calibration, provider: int, estimate: int, reported: bool = True) -> Calibration:
    """The calibration after one call: provider count / our estimate, bounded, averaged."""
    if not reported or provider <= 0 or estimate <= 0:
        return calibration.model_copy(update={"ignored": calibration.ignored + 1})
    sample = min(RATIO_MAX, max(RATIO_MIN, provider / estimate))
    samples = calibration.samples + 1
    weight = max(1 / samples, 1 / CALIBRATION_WINDOW)
    ratio = calibration.ratio + weight * (sample - calibration.ratio)
    return Calibration(ratio=round(min(RATIO_MAX, max(RATIO_MIN, ratio)), 4), samples=samples,
                       ignored=calibration.ignored, last_sample=round(sample, 4))


def record_call(totals: UsageTotals, kind: str, model: str, usage: CallUsage) -> Calibration:
    """Add one call to ``totals`` (in place); returns ``model``'s calibration after it."""
    _add(totals, usage)
    _add(totals.by_kind.setdefault(kind, UsageCounts()), usage)
    before = totals.calibration.get(model, Calibration())
    after = calibrate(before, usage.prompt, usage.estimate, usage.reported)
    totals.calibration[model] = after
    return after


def budget_ratio(totals: UsageTotals, model: str) -> float:
    """What the budget is divided by for ``model``: its learned ratio when above 1, else 1."""
    calibration = totals.calibration.get(model)
    return 1.0 if calibration is None or calibration.samples == 0 else max(1.0, calibration.ratio)
