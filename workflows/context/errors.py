"""Errors of the engine: all ValueErrors, so update validators can reject with the message."""

from __future__ import annotations


class EngineError(ValueError):
    """An operation was refused; the state is unchanged.

    ``conflict``: the lane's current state is why (the same call may succeed later), as
    opposed to input that can never be accepted. Callers report the two differently.
    """

    def __init__(self, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


class EpisodeError(EngineError):
    pass


class TaskError(EngineError):
    pass


class IncompleteCoverageError(TaskError):
    """An exhaustive task tried to end with unread observation ranges."""

    def __init__(self, task_id: str, unread: dict[str, list[tuple[int, int]]]):
        self.task_id = task_id
        self.unread = unread
        from .observations import range_address  # local: keep this module dependency-free

        listed = [range_address(obs, start, end - start) for obs, ranges in unread.items() for start, end in ranges]
        shown = ", ".join(listed[:20]) + (f" and {len(listed) - 20} more" if len(listed) > 20 else "")
        super().__init__(
            f"exhaustive task {task_id!r} cannot end: {len(listed)} unread observation range(s) remain; "
            f"read them with recall_observation: {shown}",
            conflict=True,
        )
