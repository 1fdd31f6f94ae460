"""Hosted mode (the session runs the loop), capability context and pinned notes (either mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    Field,
    field_validator,
)

from lanes_client.schemas._common import MAX_CAPABILITY_CHARS, MAX_NOTE_CHARS, CapabilityKind, Strict
from lanes_client.shapes import (
    MAX_SUBMIT_CHARS,
    TaskStatus,
)


class MessageIn(Strict):
    text: str = Field(min_length=1, max_length=MAX_SUBMIT_CHARS)
    exhaustive: bool = Field(False, description="the task may not end while its oversized input has unread ranges: "
                                                "the model's final answer is refused until it read them all")


MAX_MESSAGE_WAIT_SECONDS = 60.0  # POST /messages?wait= (below the client's default timeout)


class TaskAnswer(BaseModel):
    """A task's final answer: the model's last assistant item, read from PostgreSQL (also
    once it left the working set)."""

    item_id: str
    text: str
    size_chars: int
    truncated: bool  # text holds the first max_chars characters only


class TaskOut(TaskStatus):
    """A task's status, with its answer once it completed."""

    session_id: str
    answer: TaskAnswer | None = None

    @property
    def answer_text(self) -> str | None:
        return None if self.answer is None else self.answer.text


class MessageAccepted(BaseModel):
    session_id: str
    task_id: str
    # The Idempotency-Key was seen with the same message: the first call's task, nothing queued again.
    repeated: bool = False
    # With ?wait=: the task when the wait ended (finished: HTTP 200; still queued or running: 202).
    task: TaskOut | None = None



class CapabilityIn(Strict):
    """A tool schema or skill body for the current task (or the next, between tasks)."""

    name: str = Field(min_length=1, max_length=120, pattern=r"^[\x21-\x7e][\x20-\x7e]*$")
    kind: CapabilityKind = Field("skill", description="tool_schema, skill, or manual_skill (a slash-skill the user "
                                                      "asked for: skipped with a status message when it does not fit)")
    scope: Literal["step", "task"] = Field("task", description="step: cleared after one model step; task: when the "
                                                              "task ends (a manual skill is always task-scoped)")
    content: str = Field(min_length=1, max_length=MAX_CAPABILITY_CHARS)


class CapabilityOut(BaseModel):
    """The admission: admitted, refused or (a manual skill) skipped, with the estimated need,
    the safety margin, the ceiling and what was available; nothing is stored unless admitted."""

    session_id: str
    name: str
    status: Literal["admitted", "refused", "skipped"]
    item_id: str | None = None
    scope: str
    need: int
    margin: int
    ceiling: int
    available: int
    message: str


class NoteIn(Strict):
    text: str = Field(min_length=1, max_length=MAX_NOTE_CHARS)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("a note must be non-empty text, not only whitespace")
        return text


class NoteOut(BaseModel):
    """A pinned note, or why it was refused (pinned content would exceed its budget share)."""

    session_id: str
    status: Literal["pinned", "refused"]
    item_id: str | None = None
    need: int
    pinned: int
    allowance: int
    budget: int
    message: str


# --- external-agent mode -----------------------------------------------------------------
