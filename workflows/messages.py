"""Payloads exchanged between clients, workflows and activities.

Everything here crosses Temporal's history, so it carries metadata only: ids,
token counts and small fields. Bulk text lives in PostgreSQL.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from workflows.context.items import Item, Projection
from workflows.context.ledger import SharedEntry
from workflows.handoff import Handoff

MAX_SUBMIT_CHARS = 1_000_000  # larger input belongs in a file the agent reads


class ReplaySpec(BaseModel):
    """Drive the session from a recorded trajectory instead of a live model."""

    trajectory_path: str
    trajectory_id: str
    model_base_url: str  # the replay model server (worker.replay_model) serving it
    # What subagent lanes replay: the n-th lane spawned replays subagents[n % len]; a
    # replayed session without recordings for its subagents cannot spawn any.
    subagents: list[ReplaySpec] = Field(default_factory=list)


class CompactionSettings(BaseModel):
    """``compaction.enabled``: try one bounded LLM condensation at 80 % pressure before
    the deterministic fallback. Off, the fallback runs only over the budget."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    condenser_model: str | None = None  # None: the worker's LANES_CONDENSER_MODEL
    condenser_base_url: str | None = None  # None: the worker's OPENAI_BASE_URL
    condenser_window: int = Field(128_000, gt=0)
    timeout_seconds: float = Field(120.0, gt=0)
    # loop guard: after this many failed attempts in a row, wait until the source grew
    max_consecutive_failures: int = Field(3, ge=1)
    retry_after_growth_tokens: int = Field(2_000, ge=0)


class SubagentSettings(BaseModel):
    """Subagent lanes: child workflows started by the ``spawn_subagent`` tool or the API."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False  # offer the spawn_subagent tool to the model
    max_concurrent: int = Field(3, ge=1, le=50)  # running children; more wait (tool) or are refused (API)
    # model turns of one child; a child does not continue as new, so this bounds its history
    # (about 16 events a turn: 250 turns stay far below Temporal's limits)
    max_turns: int = Field(100, ge=1, le=250)
    budget_tokens: int | None = Field(None, gt=0)  # a child's working-set budget (default: the parent's)
    # The most of a child's budget the parent's shared prefix may take; a larger request is
    # shared as its stable and memory segments only.
    max_prefix_share: float = Field(0.6, gt=0, lt=1)


class SessionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    tenant: str = "default"
    model: str = "gpt-4o-mini"
    context_window: int = 128_000
    max_output_tokens: int = 4_096
    budget_tokens: int | None = None  # explicit working-set budget (else the usable window)
    max_turns_per_task: int = 400
    # A run continues as new after this many model turns, or earlier when Temporal suggests it.
    turns_per_run: int = 250
    system_prompt: str = "You are a careful software engineering agent."
    replay: ReplaySpec | None = None
    tool_definition_tokens: int = 0  # measured by the describe_tools activity at start
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    subagents: SubagentSettings = Field(default_factory=SubagentSettings)
    # The tools offered to the model (None: the mode's default; see workflows.session.session_tools).
    tools: list[str] | None = Field(default=None, max_length=30)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: list[str] | None) -> list[str] | None:
        from activities.tool_specs import TOOL_SPECS  # plain data; no I/O

        unknown = [t for t in tools or [] if t not in TOOL_SPECS]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOL_SPECS)}")
        return tools


class SessionInput(BaseModel):
    config: SessionConfig
    checkpoint_id: str | None = None  # set when continuing as new


class SubmitRequest(BaseModel):
    """A user message. ``text`` is checked by the update validator, not by decoding,
    so that bad input is rejected with a clear error instead of failing a workflow task."""

    text: Any = None


def submit_text_problem(value: object) -> str | None:
    """What is wrong with a submitted message, or None when it is acceptable."""
    if not isinstance(value, str):
        return f"message must be text, got {type(value).__name__}"
    if not value.strip():
        return "message is empty"
    if len(value) > MAX_SUBMIT_CHARS:
        return f"message has {len(value)} characters; the limit is {MAX_SUBMIT_CHARS}"
    return None


class SubmitResult(BaseModel):
    task_id: str


class TaskStatus(BaseModel):
    task_id: str
    state: str  # queued / running / completed / failed
    turns: int = 0
    error: str | None = None


class SessionStatus(BaseModel):
    session_id: str
    tasks: list[TaskStatus]
    turns: int
    items: int
    next_seq: int
    closed: bool


# --- activities -------------------------------------------------------------


class StoredItem(BaseModel):
    """Metadata an activity returns after it stored an item's content."""

    item: Item
    tool_calls: list[ToolCallRef] = Field(default_factory=list)


class ToolCallRef(BaseModel):
    id: str
    name: str
    arguments: str | None = None  # only for tools the workflow runs itself (condense_context)


StoredItem.model_rebuild()


class SessionStartInput(BaseModel):
    session_id: str
    tenant: str
    config: dict
    tools: list[str]
    model: str


class SessionStartResult(BaseModel):
    tool_definition_tokens: int


class GeneratedItem(BaseModel):
    item: Item
    text: str
    number: int  # the engine's counter of generated items: their seq in the generated lane


class GeneratedItemsInput(BaseModel):
    session_id: str
    lane: str = "main"
    items: list[GeneratedItem]


class MeasureTextsInput(BaseModel):
    model: str
    texts: dict[str, str]


class EventsInput(BaseModel):
    session_id: str
    events: list[EventSpec]


class EventSpec(BaseModel):
    lane: str = "main"
    seq: int
    event_id: str
    kind: str
    payload: dict = Field(default_factory=dict)


EventsInput.model_rebuild()


class StoreUserMessageInput(BaseModel):
    session_id: str
    lane: str = "main"
    observation_id: str | None = None  # set for oversized input
    item_id: str
    seq: int
    task_id: str
    text: str
    kind: str = "user"
    role: str = "user"
    model: str
    preview_chars: int


class PlanDelta(BaseModel):
    """A request plan, sent as a change against the previous one.

    Between compactions a request only grows at its end, so the delta is the items
    appended since the previous plan and history grows by O(1) per turn.
    """

    version: int
    base_version: int | None  # None: ``entries`` is the whole plan
    entries: list[tuple[str, Projection]]


class ModelCallInput(BaseModel):
    session_id: str
    lane: str = "main"
    plan: PlanDelta
    response_item_id: str
    response_seq: int
    task_id: str
    model: str
    max_output_tokens: int
    preview_chars: int
    tools: list[str]
    replay: ReplaySpec | None = None
    replay_turn: int = 0


class ModelCallResult(BaseModel):
    stored: StoredItem
    finish_reason: str | None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    request_tokens: int  # our own count of what was sent


class ToolRunInput(BaseModel):
    session_id: str
    lane: str = "main"
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
    replay: ReplaySpec | None = None
    output: str | None = None  # set: the workflow already ran the tool; store this as its result
    exit_code: int = 0


class ToolRunResult(BaseModel):
    stored: StoredItem
    recall: RecallMark | None = None  # set for recall_observation: what was read


class RecallMark(BaseModel):
    observation_id: str
    offset: int
    limit: int
    total_chars: int


ToolRunResult.model_rebuild()


# --- external-agent mode (the agent loop runs elsewhere) ----------------------------

INLINE_TEXT_LIMIT = 16_384  # larger content is written to PostgreSQL first and sent by reference


class ExternalToolCall(BaseModel):
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = "{}"


class ExternalItem(BaseModel):
    """One item an external agent appends. Content travels inline when small, else as
    ``content_ref``: an observation the API already stored in PostgreSQL."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1, max_length=64)  # user / assistant / tool_result / note / decision / ...
    role: str | None = None  # default from kind
    text: str | None = Field(default=None, max_length=INLINE_TEXT_LIMIT)
    content_ref: str | None = Field(default=None, pattern=r"^obs-[A-Za-z0-9][A-Za-z0-9_.-]*$")
    tool_calls: list[ExternalToolCall] = Field(default_factory=list, max_length=64)
    tool_call_id: str | None = None
    tool_name: str | None = None
    exit_code: int | None = None


class AppendItemsRequest(BaseModel):
    items: list[ExternalItem] = Field(min_length=1, max_length=100)


class AppendItemsResult(BaseModel):
    item_ids: list[str]


class IngestItemsInput(BaseModel):
    session_id: str
    lane: str = "main"
    model: str
    preview_chars: int
    task_id: str | None
    first_seq: int
    items: list[ExternalItem]


class PreparedRequest(BaseModel):
    """What ``GET /request`` renders: the plan, after any compaction it needed."""

    entries: list[tuple[str, Projection]]
    stable_prefix_entries: int
    total_tokens: int
    budget: int
    fits: bool
    reason: str = ""
    preview_chars: int
    model: str
    tools: list[str]


class EpisodeBegin(BaseModel):
    episode_id: str = Field(min_length=1, max_length=120)
    kind: str  # exploration / action
    goal: str = Field(min_length=1, max_length=2_000)
    depends_on: list[str] = Field(default_factory=list, max_length=50)


class EpisodeEnd(BaseModel):
    episode_id: str = Field(min_length=1, max_length=120)
    conclusion: str | None = Field(default=None, max_length=4_000)


class CondenseRequest(BaseModel):
    """Memory JSON for ``condense_context`` (validated by the engine's schema)."""

    memory: dict


class CondenseResult(BaseModel):
    status: str  # accepted / rejected / no-op
    reason: str = ""
    memory_id: str | None = None
    archived: int = 0


# --- LLM condensation (activities/condense.py) ----------------------------------------

CondensationStatus = Literal["succeeded", "invalid", "oversized", "unavailable"]


class CondensationInput(BaseModel):
    session_id: str
    lane: str = "main"
    source_item_ids: list[str]  # the prefix to condense, in seq order
    anchor_item_ids: list[str] = Field(default_factory=list)  # newest pinned user messages/notes first; first 12 used
    live_memory_item_id: str | None = None  # the live memory to merge, if any
    known_observation_ids: list[str] = Field(default_factory=list)  # "obs-..." references may name
    model: str | None = None  # None: settings.condenser_model
    base_url: str | None = None  # replay sessions: the replay model server (no API key is sent)
    condenser_window: int = Field(gt=0)  # input window of the condenser model, tokens
    reserve_tokens: int = Field(4096, ge=0)  # room for the answer (spec: 4,096)
    max_memory_tokens: int = Field(2000, gt=0)
    preview_chars: int = Field(4000, ge=16)  # COMPACT projection size of each source item
    timeout_seconds: float = Field(120.0, gt=0)  # one HTTP call
    max_retry_delay_seconds: float = Field(60.0, ge=0)  # a longer Retry-After is not waited for
    json_mode: bool = True  # send response_format={"type": "json_object"}


class CondensationOutcome(BaseModel):
    status: CondensationStatus
    memory: dict | None = None  # the validated MemoryDoc (model_dump), when succeeded
    memory_text: str | None = None  # memory_text(doc): what the memory item will hold
    memory_tokens: int = 0  # measured like measure_texts does (message overhead included)
    attempts: int = 0  # model calls made
    errors: list[str] = Field(default_factory=list)
    source_tokens: int = 0  # the rendered source transcript
    request_tokens: int = 0  # the whole first request (system + anchors + memory + source)
    model: str = ""
    latency_ms: int = 0


# --- subagent lanes (workflows/lane_workflow.py, workflows/subagents.py) ---------------

LaneState_ = Literal["running", "completed", "blocked", "failed", "abandoned"]


class SpawnRequest(BaseModel):
    """Start a subagent: the ``spawn_subagent`` tool's arguments, or the API's body."""

    model_config = ConfigDict(extra="forbid")

    brief: str = Field(min_length=1, max_length=20_000)
    tools: list[str] | None = Field(default=None, max_length=20)  # None: the parent's tools


class SpawnResult(BaseModel):
    lane: str
    workflow_id: str


class LaneConfig(BaseModel):
    """What a child lane runs with (derived from its parent's session config)."""

    model: str
    context_window: int
    max_output_tokens: int
    budget_tokens: int | None
    preview_chars: int  # the parent's, so the shared prefix renders byte for byte
    tools: list[str]
    max_turns: int
    compaction: CompactionSettings
    replay: ReplaySpec | None = None


class LaneInput(BaseModel):
    session_id: str
    lane: str  # "sub-0001"...
    parent_workflow_id: str
    parent_task_id: str | None
    brief: str
    config: LaneConfig
    # The parent's messages the child's requests start with: ids and projections, never content.
    shared_prefix: list[SharedEntry]
    fork_source: str  # where the prefix comes from, e.g. "main plan 12"


class HandoffRef(BaseModel):
    """A child's handoff, stored in its own lane; what the child signals and returns."""

    lane: str
    workflow_id: str
    item_id: str  # the handoff item in the child's lane
    status: str  # completed / blocked / failed


class ChildLane(BaseModel):
    """A subagent lane as its parent tracks it (metadata only)."""

    lane: str
    workflow_id: str
    brief_digest: str
    tools: list[str]
    task_id: str | None  # the parent task that spawned it (None: the API, outside a task)
    tool_call_id: str | None  # the spawn_subagent call it answers (None: spawned by the API)
    state: LaneState_ = "running"
    handoff_item_id: str | None = None  # the handoff item in the parent's lane, once recorded
    reason: str = ""


class FinishLaneInput(BaseModel):
    """Turn a child's final answer (or its failure) into its handoff item."""

    session_id: str
    lane: str
    workflow_id: str
    final_item_id: str | None  # the child's last assistant answer, when it gave one
    failure: str | None = None  # why the child could not finish
    handoff_item_id: str
    handoff_seq: int
    task_id: str
    model: str
    preview_chars: int


class RecordHandoffInput(BaseModel):
    """Record a child's handoff as one item of the parent's lane."""

    session_id: str
    lane: str  # the parent's lane
    child_lane: str
    item_id: str
    seq: int
    observation_id: str
    task_id: str | None
    tool_call_id: str | None  # answers this spawn_subagent call (else a user-role item)
    group: int | None = None
    source_item_id: str | None = None  # the child's handoff item
    handoff: Handoff | None = None  # or this one (a lane that died without handing off)
    model: str
    preview_chars: int


class LaneStatus(BaseModel):
    workflow_id: str
    status: str  # RUNNING / COMPLETED / FAILED / TERMINATED / CANCELED / TIMED_OUT / CONTINUED_AS_NEW / NOT_FOUND
    handoff: HandoffRef | None = None  # a completed child's result


class CloseLaneEpisodesInput(BaseModel):
    session_id: str
    lane: str
    reason: str
    repair_id: str  # deterministic id of this repair; events carry it so a retried call reports the same episodes
