"""The client's own wire models of shapes the engine owns: a session's task status, its
context report, subagent lanes, tool calls and the memory document.

The server defines these in ``workflows`` (the engine's contract); the client cannot import
that package (it would pull in the server), so it declares what crosses the wire here.
``tests/client/test_wire_drift.py`` compares both sets field by field, type by type, so
neither side can change alone. Responses ignore unknown fields (an older client keeps
working against a newer server); request bodies refuse them, as the server does.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_SUBMIT_CHARS = 1_000_000  # one user message (workflows.context.ids.MAX_SUBMIT_CHARS)

SessionMode = Literal["hosted", "external"]
TaskState = Literal["queued", "running", "completed", "failed"]
ChildLaneState = Literal["running", "completed", "blocked", "failed", "abandoned"]
CondenseStatus = Literal["accepted", "rejected", "no-op"]
EpisodeKind = Literal["exploration", "action"]
EpisodeStatus = Literal["active", "completed", "abandoned", "archived"]
RequestFormat = Literal["chat", "responses", "anthropic"]  # the shapes GET /request lays a request out in


class Strict(BaseModel):
    """A request body: unknown fields are a mistake, refused before anything is sent."""

    model_config = ConfigDict(extra="forbid")


# --- request pieces --------------------------------------------------------------------


class ToolCall(Strict):
    id: str
    name: str
    arguments: str = "{}"  # the raw argument string exactly as the model produced it


# One memory section (workflows.context.memory: MAX_ENTRIES entries of MAX_ENTRY_CHARS at most).
Entries = Annotated[list[Annotated[str, StringConstraints(max_length=8_000)]], Field(max_length=100)]


class MemoryDoc(Strict):
    """The memory JSON of ``condense``; ``references`` are observation:// addresses or
    workspace-relative paths."""

    completed_work: Entries = Field(default_factory=list)
    strategies_and_outcomes: Entries = Field(default_factory=list)
    environment_changes: Entries = Field(default_factory=list)
    constraints: Entries = Field(default_factory=list)
    open_questions: Entries = Field(default_factory=list)
    references: Entries = Field(default_factory=list)


# --- responses ---------------------------------------------------------------------------


class TaskStatus(BaseModel):
    task_id: str
    state: TaskState
    turns: int = 0
    error: str | None = None
    error_type: str | None = None  # why it failed, as a type to branch on (e.g. RequestDoesNotFit)
    answer_item_id: str | None = None  # the final answer's item (GET /tasks/{id} adds its text)

    @property
    def finished(self) -> bool:
        return self.state in ("completed", "failed")


class UsageCounts(BaseModel):
    prompt: int = 0  # provider-reported prompt tokens
    cached: int = 0  # of which served from the provider's prompt cache
    completion: int = 0
    calls: int = 0
    cached_share: float = 0.0  # cached / prompt
    cost: float = 0.0  # cost units: tokens x configured price per million


class Calibration(BaseModel):
    """Provider prompt tokens / the engine's count, learned for one model."""

    ratio: float = 1.0
    samples: int = 0
    ignored: int = 0  # calls whose provider count was missing, zero or negative
    last_sample: float | None = None


class UsageTotals(UsageCounts):
    by_kind: dict[str, UsageCounts] = Field(default_factory=dict)  # agent, condenser, subagent
    calibration: dict[str, Calibration] = Field(default_factory=dict)  # by model
    token_ratio: float = 1.0  # what the budget is divided by now


class SessionStatus(BaseModel):
    session_id: str
    tasks: list[TaskStatus]
    turns: int
    items: int
    next_seq: int
    closed: bool
    usage: UsageTotals = Field(default_factory=UsageTotals)  # provider-reported usage and cost


class SpawnResult(BaseModel):
    lane: str
    workflow_id: str


class ChildLane(BaseModel):
    """A subagent lane as its parent tracks it."""

    lane: str
    workflow_id: str
    brief_digest: str
    tools: list[str]
    task_id: str | None
    tool_call_id: str | None
    state: ChildLaneState = "running"
    handoff_item_id: str | None = None
    reason: str = ""

    @property
    def finished(self) -> bool:
        return self.state != "running"


class ItemReport(BaseModel):
    id: str
    seq: int
    kind: str
    role: str
    lifecycle: str
    projection: str
    tokens: int  # cost under the current projection
    tokens_by_projection: dict[str, int]
    measured: list[str]
    reason: str
    episode: str | None
    task: str | None
    group: int | None
    tool_class: str | None
    observation_id: str | None
    size_chars: int


class Counters(BaseModel):
    compactions: int = 0
    fallback_compactions: int = 0
    explicit_condensations: int = 0
    llm_condensations: int = 0
    archived_items: int = 0
    archived_tokens: int = 0
    archived_observations: int = 0  # archived items whose exact text is recallable at an observation address
    rolled_into_summary: int = 0
    generated_items: int = 0


class Episode(BaseModel):
    id: str
    kind: EpisodeKind
    goal: str
    depends_on: list[str] = Field(default_factory=list)
    status: EpisodeStatus = "active"
    conclusion: str | None = None
    task: str | None = None
    begun_after_seq: int = -1


class ContextReport(BaseModel):
    """``GET /context``: every working-set item with its state, projection, token cost and
    the reason of its last transition, plus totals."""

    items: list[ItemReport]
    tokens_by_lifecycle: dict[str, int]
    count_by_lifecycle: dict[str, int]
    tokens_by_kind: dict[str, int]
    count_by_kind: dict[str, int]
    usable_input: int
    tool_definition_tokens: int
    capability_tokens: int
    shared_prefix_entries: int
    shared_prefix_tokens: int
    budget: int
    working_set_tokens: int
    pressure: float
    compactions: int
    counters: Counters
    live_memory_id: str | None
    summary_id: str | None
    checkpoint_id: str | None
    archived_range: tuple[int, int] | None
    active_episodes: list[str]
    episodes: list[Episode]
    current_task: str | None
    generation: int
    layout_epoch: int
