"""Exhaustive hosted tasks: the model's final answer does not end a task that still has
unread ranges of an observation it must traverse (its oversized input). The refusal is
logged (``task.end.refused``) and the task goes on with a message naming the ranges to
read with recall_observation; once every range was read, the next final answer ends it.
A model that keeps answering without reading anything new is not refused forever: after
``MAX_IDLE_REFUSALS`` refusals in a row with no range read in between, the task fails with
``IncompleteCoverage`` naming what was left unread.

Workflow code only; callers hold ``lane.lock``. Only tasks submitted as exhaustive reach
this (runs recorded before it never were).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows.context import IncompleteCoverageError, Kind, engine
    from workflows.lane import Lane

END_REFUSED = "task.end.refused"
INCOMPLETE_COVERAGE = "IncompleteCoverage"
MAX_IDLE_REFUSALS = 3
# Runs recorded before the cap refused every early end (a new command where they refused).
REFUSAL_CAP_PATCH = "exhaustive-refusal-cap"


class RefusalTracker:
    """Per task: the unread size at its last refusal and how many refusals in a row found it
    unchanged. Workflow memory only: a run continued as new starts counting afresh (the cap
    then comes a few turns later; the task's turn limit still bounds it)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[int, int]] = {}  # task -> (unread chars, idle refusals)

    def count(self, task_id: str, unread_chars: int) -> int:
        before, idle = self.last.get(task_id, (None, 0))
        idle = idle + 1 if before is not None and unread_chars >= before else 1
        self.last = {task_id: (unread_chars, idle)}  # only the running task matters
        return idle


def unread(state: engine.ContextState) -> dict[str, list[tuple[int, int]]]:
    if not state.task_exhaustive:
        return {}
    ranges = {obs: engine.unread_ranges(state, obs) for obs in state.required_coverage}
    return {obs: r for obs, r in ranges.items() if r}


async def refuse_incomplete_end(lane: Lane, task_id: str, turn: int, tracker: RefusalTracker) -> bool:
    """True when the task may not end yet: the refusal is logged and the model is told what
    to read. Raises ``IncompleteCoverage`` (failing the task) at the cap of idle refusals."""
    left = unread(lane.state)
    if not left:
        return False
    message = str(IncompleteCoverageError(task_id, left))
    unread_chars = sum(b - a for r in left.values() for a, b in r)
    idle = tracker.count(task_id, unread_chars)
    if idle > MAX_IDLE_REFUSALS and patches.patched(REFUSAL_CAP_PATCH):
        raise ApplicationError(f"the model ended {idle} times in a row without reading anything new: {message}",
                               type=INCOMPLETE_COVERAGE, non_retryable=True)
    await lane.log_event(END_REFUSED, {
        "task_id": task_id, "turn": turn, "unread": {o: [list(r) for r in ranges] for o, ranges in left.items()},
        "unread_chars": unread_chars, "idle_refusals": idle})
    await lane.add_text(f"Your answer did not end the task: {message}. Read them, then answer again.",
                        kind=Kind.USER, role="user", task_id=task_id)
    return True
