"""The external chaos driver, small: concurrent keyed and unkeyed appends and steps to one
external session while a worker is killed (kill) and while a worker stalls past the workflow
task timeout on a loaded machine (overload); every acknowledged id holds its own content, once.
The committed run (20 rounds per mode) is bench/results/external-chaos.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.api.stack import CHECKOUT_PYTHONPATH, REPO

pytestmark = pytest.mark.timeout(900)


def test_acknowledged_calls_are_stored_exactly_once_under_kills_and_stalls(tmp_path):
    out = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, "bench/external_chaos.py", "--rounds", "2", "--calls", "16", "--modes", "kill,overload",
         "--kill-every", "4", "--api-kill-every", "3", "--pause-every", "5", "--pause-seconds", "11",
         "--burners", "2", "--seed", "7", "--min-faults", "2", "--out", str(out)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": CHECKOUT_PYTHONPATH},
        capture_output=True, text=True, timeout=840)
    assert out.exists(), done.stderr[-3000:]
    result = json.loads(out.read_text())
    for mode, figures in result["modes"].items():
        assert figures["calls_acknowledged"] > 0, (mode, figures)
        for what in ("lost", "misattributed", "duplicated", "applied_though_refused", "unlogged"):
            assert figures[what] == 0, (mode, what, figures["examples"])
    assert result["modes"]["kill"]["kills"], result["modes"]["kill"]  # the faults happened
    assert result["modes"]["overload"]["pauses"], result["modes"]["overload"]
    assert done.returncode == 0, done.stderr[-3000:]

