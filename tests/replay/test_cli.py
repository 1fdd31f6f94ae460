"""``lanes replay`` as a user runs it: a subprocess, JSON on stdout, errors on stderr."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.replay.helpers import ROOT, require_data

REPO = Path(__file__).resolve().parents[2]
ONE_FILE = ROOT / "claude-code" / "subagent.jsonl.gz"
POLICY_KEYS = {"input_tokens", "cached_input_tokens", "cost_units", "peak_input_tokens", "over_budget_steps",
               "compactions", "plan_ms_p50", "plan_ms_p99", "lost_items"}


def replay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker.replay.command", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_json_on_one_file() -> None:
    require_data()
    proc = replay("--json", "--budget", "16000", "--policy", "full", "--policy", "masking-10", "--policy", "lanes",
                  str(ONE_FILE))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {"files", "steps", "budget", "policies"}
    assert (data["files"], data["budget"]) == (1, 16000) and data["steps"] > 0
    assert list(data["policies"]) == ["full", "masking-10", "lanes"]
    for name, policy in data["policies"].items():
        assert set(policy) >= POLICY_KEYS, name
        assert policy["cost_units"] == pytest.approx(
            policy["input_tokens"] - 0.9 * policy["cached_input_tokens"], abs=0.1)
    assert data["policies"]["lanes"]["lost_items"] == 0


def test_table_without_json() -> None:
    require_data()
    proc = replay("--policy", "full", "--policy", "lanes", str(ONE_FILE))
    assert proc.returncode == 0, proc.stderr
    assert "full" in proc.stdout and "lanes" in proc.stdout and "cost units" in proc.stdout


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-trajectory.json"
    proc = replay("--json", str(missing))
    assert proc.returncode != 0
    assert str(missing) in proc.stderr and "no such file" in proc.stderr
    assert proc.stdout == ""


def test_unreadable_trajectory_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"messages": [{"role": "user"')[:-8])  # truncated gzip
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hello": "world"}))
    for path in (broken, unknown):
        proc = replay("--json", str(path))
        assert proc.returncode != 0, path
        assert str(path) in proc.stderr, proc.stderr


def test_bad_policy_is_a_usage_error(tmp_path: Path) -> None:
    proc = replay("--policy", "masking", str(tmp_path))
    assert proc.returncode == 2
    assert "unknown policy 'masking'" in proc.stderr
