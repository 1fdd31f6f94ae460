"""Every id, lane name and size threshold the system derives, defined once.

Ids come from the session id, the lane name and the lane's own sequences, never from a
clock or randomness: a replayed workflow asks for the same writes, and the store, whose
writes are idempotent by id, keeps one of each. Workflows derive ids; activities receive
them and never derive their own.
"""

from __future__ import annotations

MAIN_LANE = "main"

# --- sizes -----------------------------------------------------------------------------

# User input longer than this reaches the model as a bounded source reference (head and
# address), its exact text stored as an observation.
OVERSIZED_INPUT_CHARS = 32_000
# One submitted message; larger input belongs in a file the agent reads.
MAX_SUBMIT_CHARS = 1_000_000
# Text an external agent sends inline through workflow history; larger text is stored in
# PostgreSQL first and passed as a ``content_ref``.
INLINE_TEXT_LIMIT = 16_384
# Arguments of a tool the workflow runs itself travel in the model activity's result.
MAX_WORKFLOW_TOOL_ARGUMENTS = 32_000


# --- lanes -----------------------------------------------------------------------------


def child_lane(number: int) -> str:
    """The n-th subagent lane of a session: ``sub-0001``..."""
    return f"sub-{number:04d}"


def child_workflow_id(session_id: str, lane: str) -> str:
    """A subagent's workflow id, from the session id so that replays issue the same one."""
    return f"{session_id}/{lane}"


def lane_of_workflow_id(workflow_id: str) -> str:
    return workflow_id.rsplit("/", 1)[-1]


def events_lane(lane: str) -> str:
    """Engine events of a lane are logged apart from its item events (which use item seqs)."""
    return f"{lane}:events"


def recovery_lane(lane: str) -> str:
    """Repairs made to a lane from outside it (a parent closing a dead child's episodes)."""
    return f"{lane}:recovery"


def tool_events_lane(lane: str) -> str:
    """What the tool activity itself reports about a lane's calls (interrupted attempts)."""
    return f"{lane}:tools"


def request_events_lane(lane: str) -> str:
    """The pressure of each request a lane planned, keyed by the item seq its answer takes
    (recorded by the activity that sends it, so a sample costs the workflow no command)."""
    return f"{lane}:requests"


def generated_lane(lane: str) -> str:
    """Items a compaction generates are stored apart: their seq repeats a lane position."""
    return f"{lane}.generated"


# --- items, observations, events -------------------------------------------------------


def item_id(lane: str, seq: int) -> str:
    """Item ids are unique in the session: a subagent lane's carry the lane name."""
    return f"itm-{seq:06d}" if lane == MAIN_LANE else f"{lane}-itm-{seq:06d}"


def observation_id(session_id: str, lane: str, seq: int) -> str:
    """Observation ids are unique in the whole store: they carry the session id (and lane)."""
    if lane == MAIN_LANE:
        return f"obs-{session_id}-{seq:06d}"
    return f"obs-{session_id}-{lane}-{seq:06d}"


def external_observation_id(session_id: str, digest: str) -> str:
    """Content an external agent sent too large for history, stored by the API first."""
    return f"obs-{session_id}-ext-{digest}"


def event_id(lane: str, seq: int) -> str:
    return f"evt-{lane}-{seq:06d}"


def item_event_id(item: str) -> str:
    """The event recording that an item joined its lane."""
    return f"evt-{item}"


def generated_id_prefix(lane: str) -> str:
    """Prefix of generated item ids: a child's "memory-3" must not collide with its parent's."""
    return "" if lane == MAIN_LANE else f"{lane}-"


def generated_item_id(prefix: str, key: str, number: int) -> str:
    return f"{prefix}{key}-{number}"


def generated_number(item: str) -> int:
    """The lane's counter of generated items, from a generated id."""
    return int(item.rsplit("-", 1)[1])


# --- tasks and runs --------------------------------------------------------------------


def task_id(number: int) -> str:
    return f"task-{number:04d}"


def child_task_id(lane: str) -> str:
    """A subagent lane runs one task."""
    return f"{lane}-task"


def checkpoint_id(session_id: str, runs: int, suffix: str) -> str:
    return f"ckpt-{session_id}-{runs:05d}-{suffix}"
