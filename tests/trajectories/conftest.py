"""Shared fixtures for the trajectory loader and replay model tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from recordings import DEFAULT_TRAJECTORY_ROOT

ROOT = DEFAULT_TRAJECTORY_ROOT
GEMINI = ROOT / "mini-swe-agent-gemini"
DEEPSEEK = ROOT / "mini-swe-agent-deepseek"
CLAUDE = ROOT / "claude-code"


def require_data() -> None:
    if not ROOT.is_dir():
        pytest.skip(f"trajectory data not found at {ROOT} (set LANES_TRAJECTORY_ROOT)")


def raw_json(path: Path) -> Any:
    return json.loads(gzip.decompress(path.read_bytes()).decode())


def raw_jsonl(path: Path) -> list[dict[str, Any]]:
    text = gzip.decompress(path.read_bytes()).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def data_root() -> Path:
    require_data()
    return ROOT


