"""Recorded agent sessions (trajectories): their normalised shape, the readers of each
recorded format, and a synthetic generator. Used by replays (the replay model server and
tool executor, the offline simulator), tests and benchmarks."""

from recordings.files import (
    DEFAULT_TRAJECTORY_ROOT,
    LONG_TRAJECTORY,
    SHORT_TRAJECTORY,
    detect_format,
    dump_trajectory,
    iter_trajectories,
    load_trajectory,
    parse_trajectory,
    trajectory_files,
)
from recordings.model import (
    FORMAT_CLAUDE_CODE,
    FORMAT_MSWEA_1,
    FORMAT_MSWEA_1_1,
    FORMAT_NORMALISED,
    FORMAT_SYNTHETIC,
    ToolResultRec,
    Trajectory,
    TrajectoryError,
    Turn,
    recorded_outputs,
)
from recordings.synthetic import synthetic_trajectory

__all__ = [
    "DEFAULT_TRAJECTORY_ROOT", "LONG_TRAJECTORY", "SHORT_TRAJECTORY",
    "FORMAT_CLAUDE_CODE", "FORMAT_MSWEA_1", "FORMAT_MSWEA_1_1", "FORMAT_NORMALISED",
    "FORMAT_SYNTHETIC", "ToolResultRec", "Trajectory", "TrajectoryError", "Turn", "detect_format",
    "dump_trajectory", "iter_trajectories", "load_trajectory", "parse_trajectory", "recorded_outputs",
    "synthetic_trajectory", "trajectory_files",
]
