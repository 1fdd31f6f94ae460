"""Task and step boundaries.

When a top-level task ends, its user-visible assistant prose becomes retained (still sent,
reclaimable), its tool traffic is omitted from later requests (the exact output stays
recallable), its final answer is marked terminal, its open episodes are abandoned and its
task-scoped capability context is cleared, so the next task starts from a fresh snapshot.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .capabilities import clear_capabilities
from .coverage import unread_ranges
from .episodes import abandon_task_episodes
from .errors import IncompleteCoverageError, TaskError
from .items import Kind, Lifecycle, Projection, is_tool_output
from .layout import rebuild_layout
from .ledger import ContextState, lane_items


class TaskEnd(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    retained: list[str] = Field(default_factory=list)
    omitted: list[str] = Field(default_factory=list)
    terminal: str | None = None
    abandoned_episodes: list[str] = Field(default_factory=list)
    cleared_capabilities: list[str] = Field(default_factory=list)


def begin_task(state: ContextState, task_id: str, exhaustive: bool = False) -> None:
    """Start a top-level task; ``exhaustive`` tasks must traverse every required observation."""
    if state.current_task is not None:
        raise TaskError(f"task {state.current_task!r} is still running; end it before beginning {task_id!r}", conflict=True)
    if not task_id:
        raise TaskError("task id is empty")
    state.current_task = task_id
    state.task_exhaustive = exhaustive
    state.required_coverage = []
    state.generation += 1


def end_task(state: ContextState, task_id: str, abandoned: bool = False) -> TaskEnd:
    """End the current task (refused, unchanged, while an exhaustive task has unread ranges,
    unless recovery is abandoning a task whose owner is gone)."""
    if state.current_task != task_id:
        raise TaskError(f"task {task_id!r} is not the current task (current: {state.current_task!r})", conflict=True)
    if state.task_exhaustive and not abandoned:
        unread = {obs: unread_ranges(state, obs) for obs in state.required_coverage}
        unread = {obs: ranges for obs, ranges in unread.items() if ranges}
        if unread:
            raise IncompleteCoverageError(task_id, unread)
    result = TaskEnd(task_id=task_id)
    result.abandoned_episodes = abandon_task_episodes(state, task_id)
    own = [i for i in lane_items(state) if i.task == task_id and i.lifecycle != Lifecycle.PINNED]
    for item in own:
        if item.kind == Kind.ASSISTANT.value and item.size_chars > 0:
            item.lifecycle, item.reason = Lifecycle.RETAINED, "task-ended:retained"
            result.retained.append(item.id)
        elif item.kind == Kind.ASSISTANT.value or is_tool_output(item):
            item.lifecycle, item.projection = Lifecycle.RETAINED, Projection.OMITTED
            item.reason = "task-ended:tool-traffic-omitted"
            result.omitted.append(item.id)
    if result.retained:  # the final answer: protected from explicit condensation later
        result.terminal = result.retained[-1]
        state.items[result.terminal].terminal = True
    result.cleared_capabilities = clear_capabilities(state, "task")
    state.current_task = None
    state.task_exhaustive = False
    state.required_coverage = []
    rebuild_layout(state)  # a task end is a layout change point, like a compaction
    state.generation += 1
    return result


def end_step(state: ContextState) -> list[str]:
    """After one model step: clear step-scoped capability context; returns the cleared ids."""
    return clear_capabilities(state, "step")
