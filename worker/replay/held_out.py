"""A held-out check of a policy choice: pick on one half of the recordings, measure on the other.

The cost profile was chosen by looking at every recording it is reported on. This asks whether
the choice carries over: the recordings are split into two halves (per folder, by a hash of the
file name, so the split is the same on every machine and every folder is in both halves); on
one half the selection rule picks a variant, and the other half, unseen by the pick, says
whether it still meets the targets. Both directions are reported.

The rule is the issue's: the cheapest variant (cost × full history) whose fidelity miss rate is
no higher than the baseline variant's on the same files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath


def halves(files: Iterable[str]) -> tuple[list[str], list[str]]:
    """Two halves of ``files``: within each folder the files ordered by the sha256 of their name
    go alternately to either half, so each folder is split evenly and the split does not depend
    on where the recordings are stored."""
    by_folder: dict[str, list[str]] = {}
    for f in files:
        by_folder.setdefault(PurePath(f).parent.name, []).append(f)
    first: list[str] = []
    second: list[str] = []
    for folder in sorted(by_folder):
        ordered = sorted(by_folder[folder], key=lambda f: hashlib.sha256(PurePath(f).name.encode()).hexdigest())
        first += ordered[0::2]
        second += ordered[1::2]
    return sorted(first), sorted(second)


@dataclass(frozen=True)
class FileFigures:
    """One recording under one variant: what its requests cost and what its next actions missed."""

    cost_units: float
    named: int
    missed: int


@dataclass(frozen=True)
class Score:
    """A variant over a set of files."""

    variant: str
    cost_vs_full: float
    cost_vs_masking: float
    miss_rate: float


def score(variant: str, figures: Mapping[str, FileFigures], full: Mapping[str, float],
          masking: Mapping[str, float], files: Iterable[str]) -> Score:
    """Sums over ``files`` (never an average of per-file ratios: long sessions weigh more, as in
    the replay benchmark)."""
    files = list(files)
    if not files:
        raise ValueError("no files to score")
    cost = sum(figures[f].cost_units for f in files)
    named = sum(figures[f].named for f in files)
    missed = sum(figures[f].missed for f in files)
    return Score(variant, cost / sum(full[f] for f in files), cost / sum(masking[f] for f in files),
                 missed / named if named else 0.0)


def select(scores: Iterable[Score], baseline: str) -> Score:
    """The cheapest score whose miss rate is at most the baseline's (the baseline itself always
    qualifies, so there is always a pick); ties go to the first in order."""
    scores = list(scores)
    limit = next((s.miss_rate for s in scores if s.variant == baseline), None)
    if limit is None:
        raise ValueError(f"baseline {baseline!r} is not among the variants scored")
    return min((s for s in scores if s.miss_rate <= limit), key=lambda s: s.cost_vs_full)
