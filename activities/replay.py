"""What a replayed session reads from its recording: the recorded tool outputs, and the
user text recorded after each model turn (fed to the session so the whole recording runs).

Recordings are read once per worker process and path: a worker replays as many recordings at
once as it has sessions (128 in ``bench/scale.py``), and reading one again costs more than the turn
that asked for it. What is kept of each is what turns read (its tool outputs and follow-ups).
"""

from __future__ import annotations

import functools

from recordings import ToolResultRec, load_trajectory, recorded_outputs

RECORDINGS_KEPT = 512  # recordings replayed at once by one worker, at most, before one is read again


@functools.lru_cache(maxsize=RECORDINGS_KEPT)
def _read(path: str) -> tuple[dict[str, ToolResultRec], list[list[str]]]:
    """A recording's tool outputs by call id, and the user text after each model turn."""
    trajectory = load_trajectory(path)
    return recorded_outputs(trajectory), [list(turn.user_after) for turn in trajectory.turns]


def _outputs(path: str) -> dict[str, ToolResultRec]:
    return _read(path)[0]


def recorded_output(path: str, call_id: str) -> ToolResultRec | None:
    return _outputs(path).get(call_id)


def follow_ups(path: str, turn: int) -> list[str]:
    """The user text recorded after model turn ``turn`` (before the next one)."""
    after = _read(path)[1]
    return list(after[turn]) if 0 <= turn < len(after) else []
