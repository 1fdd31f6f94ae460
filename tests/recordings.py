"""The recorded sessions the stack tests replay, loaded with a clear failure when
``../shared/data`` is not beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from recordings import LONG_TRAJECTORY, SHORT_TRAJECTORY, Trajectory, load_trajectory

__all__ = ["LONG_TRAJECTORY", "SHORT_TRAJECTORY", "load_recording"]


def load_recording(path: Path) -> Trajectory:
    if not path.exists():
        pytest.fail(f"recorded trajectory {path} is missing (../shared/data)")
    return load_trajectory(path)
