"""Replay sessions for people: a recording, the bundled replay model, a session through the API.

``lanes dev --replay`` starts the replay model (:mod:`worker.replay.model_server`) and writes
its address to ``<data dir>/replay-model.json``; ``lanes session new --replay`` reads it
there. A recording is named by a path, or by its path under the recordings folder
(``LANES_TRAJECTORY_ROOT``), with or without ``.json``/``.jsonl``/``.gz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, TrajectoryError, load_trajectory

DEFAULT_TRAJECTORY = (
    Path(DEFAULT_TRAJECTORY_ROOT)
    / "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pydicom__pydicom-1256.traj.json.gz"
)
# Small enough that the default recording compacts several times.
DEFAULT_REPLAY_BUDGET = 12_000
MODEL_FILE = "replay-model.json"
_SUFFIXES = ("", ".json.gz", ".jsonl.gz", ".json", ".jsonl", ".gz")


class ReplayUnavailable(Exception):
    """No recording by that name, or no replay model to play it."""


def resolve_trajectory(name: str | Path | None) -> Path:
    """The recording file ``name`` designates (the bundled demo recording when None)."""
    if name is None:
        return DEFAULT_TRAJECTORY.resolve()
    for base in (Path.cwd(), Path(DEFAULT_TRAJECTORY_ROOT)):
        for suffix in _SUFFIXES:
            candidate = base / (str(name) + suffix)
            if candidate.is_file():
                return candidate.resolve()
    raise ReplayUnavailable(f"no recording {str(name)!r} (neither a file nor a recording under {DEFAULT_TRAJECTORY_ROOT})")


def load(path: Path) -> Trajectory:
    try:
        return load_trajectory(path)
    except TrajectoryError as exc:
        raise ReplayUnavailable(str(exc)) from None


def session_body(path: Path, trajectory: Trajectory, model_base_url: str, **overrides: Any) -> dict[str, Any]:
    """``POST /v1/sessions`` body of a hosted session replaying ``trajectory`` (at ``path``)."""
    body: dict[str, Any] = {
        "mode": "hosted",
        "model": "replay",
        "system_prompt": trajectory.system or "You are a helpful assistant.",
        "replay": {"trajectory_path": str(path), "trajectory_id": trajectory.id, "model_base_url": model_base_url},
    }
    body.update({k: v for k, v in overrides.items() if v is not None})
    return body


def write_model_url(data_dir: Path, base_url: str) -> Path:
    path = data_dir / MODEL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"base_url": base_url}) + "\n", encoding="utf-8")
    return path


def read_model_url(data_dir: Path) -> str:
    path = data_dir / MODEL_FILE
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["base_url"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ReplayUnavailable(f"no replay model: {path} does not name one; start `lanes dev --replay` "
                                "(with this LANES_DATA_DIR) or pass --replay-model-url") from None
