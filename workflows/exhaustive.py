"""Exhaustive hosted tasks: the model's final answer does not end a task that still has
unread ranges of an observation it must traverse (its oversized input). The refusal is
logged (``task.end.refused``) and the task goes on with a message naming the ranges to
read with recall_observation; once every range was read, the next final answer ends it.

Workflow code only; callers hold ``lane.lock``. Only tasks submitted as exhaustive reach
this (runs recorded before it never were).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.context import engine
    from workflows.context.errors import IncompleteCoverageError
    from workflows.context.items import Kind
    from workflows.lane import Lane

END_REFUSED = "task.end.refused"


def unread(state: engine.ContextState) -> dict[str, list[tuple[int, int]]]:
    if not state.task_exhaustive:
        return {}
    ranges = {obs: engine.unread_ranges(state, obs) for obs in state.required_coverage}
    return {obs: r for obs, r in ranges.items() if r}


async def refuse_incomplete_end(lane: Lane, task_id: str, turn: int) -> bool:
    """True when the task may not end yet: the refusal is logged and the model is told what to read."""
    left = unread(lane.state)
    if not left:
        return False
    message = str(IncompleteCoverageError(task_id, left))
    await lane.log_event(END_REFUSED, {
        "task_id": task_id, "turn": turn, "unread": {o: [list(r) for r in ranges] for o, ranges in left.items()},
        "unread_chars": sum(b - a for r in left.values() for a, b in r)})
    await lane.add_text(f"Your answer did not end the task: {message}. Read them, then answer again.",
                        kind=Kind.USER, role="user", task_id=task_id)
    return True
