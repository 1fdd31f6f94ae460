"""The recorded sessions the stack tests replay, loaded with a clear failure when
``../shared/data`` is not beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from recordings import DEFAULT_TRAJECTORY_ROOT, Trajectory, load_trajectory

# 53 recorded tool-calling steps, 40 k characters of tool output
LONG_TRAJECTORY = (
    Path(DEFAULT_TRAJECTORY_ROOT)
    / "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pydicom__pydicom-1256.traj.json.gz"
)
# 16 recorded steps: quick sessions for API, CLI, UI and multi-worker tests
SHORT_TRAJECTORY = (
    Path(DEFAULT_TRAJECTORY_ROOT)
    / "mini-swe-agent-deepseek/deepseek_reasoner_dev/pvlib__pvlib-python-1707.traj.json.gz"
)


def load_recording(path: Path) -> Trajectory:
    if not path.exists():
        pytest.fail(f"recorded trajectory {path} is missing (../shared/data)")
    return load_trajectory(path)
