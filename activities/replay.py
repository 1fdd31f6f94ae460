"""What a replayed session reads from its recording: the recorded tool outputs, and the
user text recorded after each model turn (fed to the session so the whole recording runs).

Recordings are read once per worker process and path.
"""

from __future__ import annotations

import functools

from recordings import ToolResultRec, Trajectory, load_trajectory, recorded_outputs


@functools.lru_cache(maxsize=32)
def recording(path: str) -> Trajectory:
    return load_trajectory(path)


@functools.lru_cache(maxsize=32)
def _outputs(path: str) -> dict[str, ToolResultRec]:
    return recorded_outputs(recording(path))


def recorded_output(path: str, call_id: str) -> ToolResultRec | None:
    return _outputs(path).get(call_id)


def follow_ups(path: str, turn: int) -> list[str]:
    """The user text recorded after model turn ``turn`` (before the next one)."""
    turns = recording(path).turns
    return list(turns[turn].user_after) if 0 <= turn < len(turns) else []
