"""Reading recorded agent sessions (trajectories) from files and folders.

Three recorded formats are understood, detected from content (never from the file name):
mini-swe-agent-1 and -1.1 (``recordings.mini_swe_agent``) and Claude Code session JSONL
(``recordings.claude_code``). Files may be gzip-compressed or plain (detected by the gzip
magic bytes), JSON or JSON Lines.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from recordings.claude_code import is_claude_event, parse_claude_code
from recordings.mini_swe_agent import parse_mswea_1, parse_mswea_1_1
from recordings.model import (
    FORMAT_CLAUDE_CODE,
    FORMAT_MSWEA_1,
    FORMAT_MSWEA_1_1,
    FORMAT_NORMALISED,
    Trajectory,
    TrajectoryError,
)

_SKIP_NAMES = ("license", "readme", "copying", "notice")


#: Ids of files under this folder are their path relative to it (``folder/sub/file``), whatever
#: path the caller used to reach them. Override with ``LANES_TRAJECTORY_ROOT``.
def _default_root() -> Path:
    """``LANES_TRAJECTORY_ROOT``, else ``../shared/data/trajectories`` beside the checkout."""
    if configured := os.environ.get("LANES_TRAJECTORY_ROOT"):
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


DEFAULT_TRAJECTORY_ROOT = _default_root()
# Two recordings the stack tests and benchmarks replay by name.
# 53 recorded tool-calling steps, 40 k characters of tool output
LONG_TRAJECTORY = (Path(DEFAULT_TRAJECTORY_ROOT)
                   / "mini-swe-agent-deepseek/deepseek_lite_dev_noparallel/pydicom__pydicom-1256.traj.json.gz")
# 16 recorded steps: quick sessions for API, CLI, UI and multi-worker tests
SHORT_TRAJECTORY = (Path(DEFAULT_TRAJECTORY_ROOT)
                    / "mini-swe-agent-deepseek/deepseek_reasoner_dev/pvlib__pvlib-python-1707.traj.json.gz")

def _strip_suffixes(name: str) -> str:
    for suffix in (".gz",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name


def _trajectory_id(path: Path, root: Path | None, fallback_root: Path | None = None) -> str:
    """Relative to ``root`` if given, else to the default data root, else to ``fallback_root``."""
    resolved = path.resolve()
    for base in (root, DEFAULT_TRAJECTORY_ROOT, fallback_root):
        if base is None:
            continue
        try:
            rel = resolved.relative_to(Path(base).resolve())
        except ValueError:
            continue
        return _strip_suffixes(rel.as_posix())
    return _strip_suffixes(path.name)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TrajectoryError(path, f"cannot read file: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TrajectoryError(path, f"truncated or corrupt gzip data ({exc})") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrajectoryError(path, f"not UTF-8 text ({exc})") from exc


def _parse_json_or_jsonl(text: str, source: str) -> Any:
    if not text.strip():
        raise TrajectoryError(source, "empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole_err:
        first_err = whole_err
    # JSON Lines: every non-blank line one JSON value.
    lines = text.splitlines()
    events: list[Any] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if first_err.msg == "Extra data" or events:
                raise TrajectoryError(
                    source, f"invalid JSON on line {lineno}: {exc.msg} (column {exc.colno})"
                ) from exc
            raise TrajectoryError(
                source,
                f"not JSON or JSON Lines: {first_err.msg} "
                f"(line {first_err.lineno}, column {first_err.colno})",
            ) from exc
    return events


def detect_format(obj: Any, source: str = "<object>") -> str:
    """Return the recorded format of an already parsed file (dict for JSON, list for JSONL).

    Raises :class:`TrajectoryError` when the shape matches none of the known formats.
    """
    if isinstance(obj, dict) and "messages" in obj:
        declared = obj.get("trajectory_format")
        if declared in (FORMAT_MSWEA_1, FORMAT_MSWEA_1_1):
            return declared
        if declared is not None:
            raise TrajectoryError(source, f"unknown trajectory_format {declared!r}")
        messages = obj["messages"]
        if not isinstance(messages, list):
            raise TrajectoryError(source, "field 'messages' is not a list")
        for m in messages:
            if isinstance(m, dict) and (m.get("role") in ("tool", "exit") or m.get("tool_calls")):
                return FORMAT_MSWEA_1_1
        return FORMAT_MSWEA_1
    if is_claude_event(obj):
        return FORMAT_CLAUDE_CODE
    if (isinstance(obj, list) and obj and all(isinstance(e, dict) for e in obj)
            and any(is_claude_event(e) and "message" in e for e in obj)):
        return FORMAT_CLAUDE_CODE
    if isinstance(obj, dict):
        shape = "object with keys " + ", ".join(sorted(map(str, obj))[:8])
    elif isinstance(obj, list):
        shape = f"list of {len(obj)} values"
    else:
        shape = type(obj).__name__
    raise TrajectoryError(
        source,
        f"unknown trajectory format ({shape}); expected mini-swe-agent-1, "
        "mini-swe-agent-1.1 or Claude Code session JSONL",
    )


def parse_trajectory(obj: Any, traj_id: str, source: str = "<object>") -> Trajectory:
    """Normalise an already parsed file (dict for JSON, list of events for JSONL)."""
    if isinstance(obj, dict) and obj.get("format") == FORMAT_NORMALISED:
        # our own normalised dump (``dump_trajectory``), e.g. a long synthetic session
        try:
            return Trajectory.model_validate(obj["trajectory"])
        except (KeyError, ValidationError) as error:
            raise TrajectoryError(source, f"not a valid normalised trajectory: {error}") from None
    fmt = detect_format(obj, source)
    if fmt == FORMAT_MSWEA_1:
        return parse_mswea_1(obj, traj_id, source)
    if fmt == FORMAT_MSWEA_1_1:
        return parse_mswea_1_1(obj, traj_id, source)
    events = obj if isinstance(obj, list) else [obj]
    return parse_claude_code(events, traj_id, source)


def dump_trajectory(traj: Trajectory, path: str | os.PathLike[str]) -> Path:
    """Write ``traj`` in the normalised form ``load_trajectory`` reads back unchanged."""
    target = Path(path)
    target.write_text(json.dumps({"format": FORMAT_NORMALISED, "trajectory": traj.model_dump(mode="json")}))
    return target


def load_trajectory(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
                    ) -> Trajectory:
    """Load one trajectory file (gzip or plain; JSON or JSON Lines; format from content).

    The id is the path relative to ``root`` (or to :data:`DEFAULT_TRAJECTORY_ROOT` when the file
    lies under it, else just the file name), without ``.gz`` and ``.json``/``.jsonl``.
    """
    return _load_file(Path(path), Path(root) if root is not None else None, None)


def _load_file(p: Path, root: Path | None, fallback_root: Path | None) -> Trajectory:
    if p.is_dir():
        raise TrajectoryError(p, "is a directory; use iter_trajectories() for folders")
    text = _read_text(p)
    obj = _parse_json_or_jsonl(text, str(p))
    return parse_trajectory(obj, _trajectory_id(p, root, fallback_root), str(p))


def _skip(name: str) -> bool:
    low = name.lower()
    return low.startswith(".") or low.startswith(_SKIP_NAMES)


def trajectory_files(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, Path | None]]:
    """Expand files and folders (recursively, sorted) into ``(file, folder argument)`` pairs.

    Skips hidden files and LICENSE / README / COPYING / NOTICE files.
    """
    out: list[tuple[Path, Path | None]] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(
                (f for f in p.rglob("*")
                 if f.is_file() and not any(_skip(part) for part in f.relative_to(p).parts)),
                key=lambda f: f.relative_to(p).as_posix(),
            )
            pairs: list[tuple[Path, Path | None]] = [(f, p) for f in files]
        elif p.exists():
            pairs = [(p, None)]
        else:
            raise TrajectoryError(p, "no such file or directory")
        for f, root in pairs:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append((f, root))
    return out


def iter_trajectories(paths: Sequence[str | os.PathLike[str]]) -> Iterator[Trajectory]:
    """Yield every trajectory under the given files/folders, in a deterministic order.

    Files are taken in argument order; a folder's files sorted by relative path. Ids are as in
    :func:`load_trajectory`, except that a file outside the default data root gets its path
    relative to the folder argument that contained it.
    """
    for f, folder in trajectory_files(paths):
        yield _load_file(f, None, folder)
