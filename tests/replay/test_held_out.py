"""The held-out check's split and selection rule (worker/replay/held_out.py) on hand-made figures."""

from __future__ import annotations

import pytest

from worker.replay.held_out import FileFigures, Score, halves, score, select

FILES = [f"/data/{folder}/{name}.json.gz" for folder, count in (("a", 7), ("b", 4), ("c", 1))
         for name in (f"{folder}{i}" for i in range(count))]


def test_halves_split_every_folder_evenly_and_cover_every_file_once() -> None:
    first, second = halves(FILES)
    assert sorted(first + second) == sorted(FILES)
    assert not set(first) & set(second)
    for folder, count in (("a", 7), ("b", 4), ("c", 1)):
        in_first = sum(f"/{folder}/" in f for f in first)
        assert in_first == (count + 1) // 2  # the larger share goes to the first half
        assert sum(f"/{folder}/" in f for f in second) == count // 2


def test_halves_do_not_depend_on_order_or_where_the_files_are() -> None:
    first, _ = halves(FILES)
    moved = [f.replace("/data/", "/elsewhere/deeper/") for f in reversed(FILES)]
    assert [f.replace("/data/", "/elsewhere/deeper/") for f in first] == halves(moved)[0]


def test_halves_are_not_the_name_order() -> None:
    # the hash decides, so a folder's first half is not simply every other name in sorted order
    names = [f"/d/f/x{i:02}" for i in range(40)]
    assert halves(names)[0] != sorted(names)[0::2]


def test_score_sums_over_files_instead_of_averaging_ratios() -> None:
    figures = {"long": FileFigures(cost_units=50, named=90, missed=9),
               "short": FileFigures(cost_units=9, named=10, missed=5)}
    full = {"long": 100.0, "short": 10.0}
    masking = {"long": 200.0, "short": 20.0}
    s = score("v", figures, full, masking, ["long", "short"])
    assert s.cost_vs_full == pytest.approx(59 / 110)  # the mean of the ratios would be 0.7
    assert s.cost_vs_masking == pytest.approx(59 / 220)
    assert s.miss_rate == pytest.approx(14 / 100)
    assert score("v", figures, full, masking, ["short"]).cost_vs_full == pytest.approx(0.9)
    with pytest.raises(ValueError, match="no files"):
        score("v", figures, full, masking, [])


def test_select_takes_the_cheapest_variant_that_misses_no_more_than_the_baseline() -> None:
    scores = [Score("baseline", 0.66, 0.33, 0.060), Score("cheap but lossy", 0.40, 0.20, 0.080),
              Score("profile", 0.55, 0.27, 0.053), Score("dearer", 0.60, 0.30, 0.040)]
    assert select(scores, "baseline").variant == "profile"
    # a baseline that misses more lets the lossy one through
    assert select(scores, "cheap but lossy").variant == "cheap but lossy"
    # the baseline always qualifies
    assert select([Score("baseline", 0.9, 0.5, 0.1), Score("worse", 0.5, 0.3, 0.2)], "baseline").variant == "baseline"
    with pytest.raises(ValueError, match="'missing'"):
        select(scores, "missing")
