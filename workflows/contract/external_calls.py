"""External-agent calls (``append_items``, ``step``): what their items must satisfy before
anything is stored, and the record that makes a retried call idempotent.

Validators run these checks, so a refused call leaves nothing stored and the session as it
was. Nothing vanishes silently: a tool result must answer a call that is still open, and a
new assistant turn or user message cannot leave a call without its result (both name the
call). A call carries a key (the API's ``Idempotency-Key``, a step id) and a digest of what
it asked; a repeated key with the same digest answers what the first call stored, across
continue-as-new too, and a repeated key with another digest is refused naming the key.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, Field

from workflows.context import Kind, engine
from workflows.contract import rejections
from workflows.contract.session import ExternalItem

MAX_CALL_FIELD_CHARS = 200  # a tool call's id and name, as the HTTP API documents them
KEPT_CALLS = 256  # keys remembered (a client retries a call within minutes, not hundreds of calls later)


class RecordedCall(BaseModel):
    key: str
    digest: str
    item_ids: list[str]


class RecentCalls(BaseModel):
    """The latest keyed calls, oldest first (carried in the session checkpoint)."""

    calls: list[RecordedCall] = Field(default_factory=list)

    def repeated(self, key: str | None, digest: str) -> RecordedCall | None:
        """The earlier call with ``key`` (None: a new call); a different digest is refused."""
        if key is None:
            return None
        for call in reversed(self.calls):
            if call.key == key:
                if call.digest != digest:
                    raise rejections.key_reused(key)
                return call
        return None

    def record(self, key: str | None, digest: str, item_ids: list[str]) -> None:
        if key is None:
            return
        self.calls.append(RecordedCall(key=key, digest=digest, item_ids=item_ids))
        del self.calls[:-KEPT_CALLS]


# Fields added to ExternalItem after calls were recorded: left out of a digest while unset,
# so a call recorded before them keeps its digest.
_LATER_FIELDS = ("extra_ref", "client_id", "client_digest")


def json_digest(value: object) -> str:
    """SHA-256 of ``value`` as canonical JSON (sorted keys, text as is): what a call asked."""
    body = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def items_digest(items: list[ExternalItem]) -> str:
    """What a call asked, for comparing a repeated key (the API sends a digest of the whole
    body instead: content stored by reference is compared by its text, not its address)."""
    return json_digest([i.model_dump(mode="json", exclude={f for f in _LATER_FIELDS if getattr(i, f) is None})
                        for i in items])


def check_items(state: engine.ContextState | None, items: list[ExternalItem]) -> None:
    """Raise the typed rejection for the first item the session must refuse (``state``:
    None while the session starts, when no call can be open yet)."""
    open_calls = [] if state is None else _open_calls(state)
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if (problem := engine.kind_problem(item.kind)) is not None:
            raise rejections.invalid_input(f"{where}: an item that {problem} cannot be appended")
        if (item.text is None) == (item.content_ref is None):
            raise rejections.invalid_input(f"{where}: give exactly one of text and content_ref")
        if item.kind == Kind.NOTE.value and item.text is not None and not item.text.strip():
            raise rejections.invalid_input(f"{where}: a note must be non-empty text (a note is pinned: it stays "
                                           "in every request)")
        for call in item.tool_calls:
            if not (0 < len(call.id) <= MAX_CALL_FIELD_CHARS and 0 < len(call.name) <= MAX_CALL_FIELD_CHARS):
                raise rejections.invalid_input(f"{where}: a tool call's id and name need 1 to "
                                               f"{MAX_CALL_FIELD_CHARS} characters")
        if item.kind == Kind.TOOL_RESULT.value:
            if not item.tool_call_id:
                raise rejections.invalid_input(f"{where}: a tool_result needs the tool_call_id it answers")
            if item.tool_call_id not in open_calls:
                raise rejections.unpaired(f"{where}: tool result for call {item.tool_call_id!r}, which no assistant "
                                          "turn made or which already has its result")
            open_calls.remove(item.tool_call_id)
        elif item.kind in (Kind.ASSISTANT.value, Kind.USER.value):
            _require_answered(open_calls, where, item.kind)
            open_calls = [c.id for c in item.tool_calls]


def _require_answered(open_calls: list[str], where: str, kind: str) -> None:
    if open_calls:
        raise rejections.unpaired(f"{where}: a {kind} item while call {open_calls[0]!r} has no result; append the "
                                  "tool_result of every call of the previous assistant turn first")


def _open_calls(state: engine.ContextState) -> list[str]:
    """Calls of the newest assistant turn that have no result yet."""
    answered: set[str] = set()
    for item_id in reversed(state.order):
        item = state.items[item_id]
        if item.kind == Kind.ASSISTANT.value:
            return [c for c in item.tool_call_ids if c not in answered]
        if item.kind in (Kind.TOOL_RESULT.value, Kind.USER.value):
            if item.kind == Kind.USER.value:
                return []  # a text-protocol agent answers in user messages: nothing is open
            answered.update(item.tool_call_ids)
    return []


class ExternalProgress(BaseModel):
    """What one append tells about the agent's progress: its model turns (a run of assistant
    items is one turn) before and after the last user message in it, and whether the newest
    item is an answer (an assistant turn without tool calls: the task is done until more comes)."""

    turns_before_user: int = 0
    turns: int = 0  # of the task running after the append
    answered: bool = False


def external_progress(items: list[ExternalItem]) -> ExternalProgress:
    progress = ExternalProgress()
    previous: str | None = None
    for item in items:
        if item.kind == Kind.USER.value:
            progress.turns_before_user += progress.turns
            progress.turns = 0
        elif item.kind == Kind.ASSISTANT.value and previous != Kind.ASSISTANT.value:
            progress.turns += 1
        previous = item.kind
    progress.answered = bool(items) and items[-1].kind == Kind.ASSISTANT.value and not items[-1].tool_calls
    return progress
