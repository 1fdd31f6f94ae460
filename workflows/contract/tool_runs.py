"""The tool activity's input and result: one tool call to run (or a result the workflow already
has) and the item that stores its output.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from workflows.context import ids
from workflows.contract.events import EventSpec
from workflows.contract.items import StoredItem
from workflows.contract.session import ReplaySpec


class RecallMark(BaseModel):
    """What a recall_observation call showed (coverage of exhaustive tasks)."""

    observation_id: str
    offset: int
    limit: int
    total_chars: int


class ToolRunInput(BaseModel):
    session_id: str
    lane: str = ids.MAIN_LANE
    call_id: str
    tool_name: str
    assistant_item_id: str
    result_item_id: str
    result_seq: int
    observation_id: str
    task_id: str
    group: int
    model: str
    preview_chars: int
    preview_lines: bool = False  # its preview shows lines of the omitted part (EngineConfig.preview_lines)
    replay: ReplaySpec | None = None
    output: str | None = None  # set: the workflow already ran the tool; store this as its result
    exit_code: int = 0
    network: bool = False  # the session lets bash reach the network
    # the most a recall_observation result may hold, header included (engine rules 2: the
    # preview, so that it enters whole); None: as asked (runs of rules 1)
    recall_max_chars: int | None = None
    # Events of the step the workflow deferred to this call (the model's usage): written first,
    # idempotent by (lane, seq), so they need no record_events activity of their own.
    events: list[EventSpec] = Field(default_factory=list)


class ToolRunResult(BaseModel):
    stored: StoredItem
    recall: RecallMark | None = None  # set for recall_observation: what was read
