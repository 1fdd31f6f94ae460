"""The client contract of ``SessionWorkflow``: its configuration, and what its updates
and queries take and return. The HTTP API, the CLI and any Temporal client speak these.

Everything here crosses Temporal's history, so it carries metadata only: ids, token
counts and small fields. Bulk text lives in PostgreSQL.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workflows.context import (
    INLINE_TEXT_LIMIT,
    MAX_SUBMIT_CHARS,
    ContinuationFacts,
    GeneratedRole,
    Item,
    ModelPrice,
    Projection,
    RecallStyle,
    ToolCall,
    ToolClass,
    UsageTotals,
)
from workflows.contract.events import EventSpec
from workflows.contract.tools import TOOL_SPECS, offered_tools, unknown_tools

# hosted: the session runs the agent loop (update submit); external: an agent running
# elsewhere appends items and asks for the next request.
SessionMode = Literal["hosted", "external"]
# What a task of an external session is: each user message begins one (an agent that submits
# work item by item), or the whole conversation is one (the gateway: agents such as
# mini-swe-agent send their tool outputs as user messages, one per turn).
TaskScope = Literal["per_user_message", "conversation"]
TaskState = Literal["queued", "running", "completed", "failed"]
ChildLaneState = Literal["running", "completed", "blocked", "failed", "abandoned"]
CondenseStatus = Literal["accepted", "rejected", "no-op"]


# How long a task retries transient failures (worker kills, the model's 5xx and 429, outages)
# before it fails with the cause.
GIVE_UP_SECONDS = 1800.0
# Room reserved for the model's answer when nobody chose one (the spec's 4,096): the session
# default, the worker's LANES_MAX_OUTPUT_TOKENS default and the offline replay's.
DEFAULT_MAX_OUTPUT_TOKENS = 4_096


class ReplaySpec(BaseModel):
    """Drive the session from a recorded trajectory instead of a live model."""

    trajectory_path: str
    trajectory_id: str
    model_base_url: str  # the replay model server (worker.replay.model_server) serving it
    # What subagent lanes replay: the n-th lane spawned replays subagents[n % len]; a
    # replayed session without recordings for its subagents cannot spawn any.
    subagents: list[ReplaySpec] = Field(default_factory=list)
    # Recorded tool outputs are looked up in a local activity (nothing runs in a workspace);
    # True: in the tool activity, as a live session's workspace tools run (what a live turn's
    # durable machinery costs: bench/durable_compare.py --tools-as-activities).
    tools_as_activities: bool = False


class CompactionSettings(BaseModel):
    """``compaction.enabled``: try one bounded LLM condensation at 80 % pressure before
    the deterministic fallback. Off, the fallback runs only over the budget (sessions
    started with the cost profile: over 75 % of it, EngineConfig.compact_at_ratio). False here
    (sessions started before it was on by default decode as they ran); the API turns it
    on for new sessions that are not replays (worker/api/session_config.py)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    condenser_model: str | None = None  # None: the worker's LANES_CONDENSER_MODEL (the API sets the session's)
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


# Fields earlier versions wrote into recorded histories and checkpoints; accepted and dropped.
_RETIRED_CONFIG_FIELDS = ("tool_definition_tokens",)


class SessionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    tenant: str = "default"
    # None: either kind of call (sessions started before modes were declared are read so)
    mode: SessionMode | None = "hosted"
    model: str = "gpt-4o-mini"
    context_window: int = 128_000
    # The model was resolved (a known family, or its window given): capability context is
    # admitted against its usable input; False: the engine's fixed 8,000 fallback ceiling.
    # True for sessions started before it was decided (as the engine assumed then).
    model_known: bool = True
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    budget_tokens: int | None = None  # explicit working-set budget (else the usable window)
    max_turns_per_task: int = 400
    # A run continues as new after this many model turns or this many updates (an external
    # agent's calls; Temporal refuses more than 2,000 per run), or earlier when its history
    # grows large or Temporal suggests it.
    turns_per_run: int = 250
    updates_per_run: int = Field(500, ge=10, le=1_500)
    # None: no system message (an external agent brings its own, or none)
    system_prompt: str | None = "You are a careful software engineering agent."
    replay: ReplaySpec | None = None
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    subagents: SubagentSettings = Field(default_factory=SubagentSettings)
    # The tools offered to the model (None: the mode's default; see workflows.session.session_tools).
    tools: list[str] | None = Field(default=None, max_length=30)
    # The agent's own tool definitions (external sessions), stored in PostgreSQL under this
    # id (a digest of them); rendered after the catalog tools and counted in the budget.
    tool_set: str | None = Field(default=None, pattern=r"^ts-[0-9a-f]{16,64}$")
    recall: RecallStyle = "tool"  # see EngineConfig.recall
    # Role of the texts the engine writes; "user" for sessions started before it was a choice.
    generated_role: GeneratedRole = "system"
    tool_network: bool = False  # bash may reach the network (its sandbox has none otherwise)
    # The budget notice (EngineConfig.budget_notice); None: on for hosted sessions that call a
    # model, off for external ones and replays (the recorded agent never saw one).
    budget_notice: bool | None = None
    # External sessions: what begins a task (TaskScope). As tasks, every user message but the
    # newest two rolls into the rolling summary at the next request whatever the pressure,
    # rewriting the request from there (no prompt cache) and leaving the task statement as a digest.
    tasks: TaskScope = "per_user_message"
    # How long a model or tool call retries transient failures (a killed worker, the
    # provider's 5xx or 429, an outage) before its task fails with the last cause.
    give_up_seconds: float = Field(GIVE_UP_SECONDS, gt=0)
    # The session's own prices per million tokens, by model (as LANES_PRICES; None: the worker's).
    prices: dict[str, ModelPrice] | None = Field(default=None, max_length=50)

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(f in data for f in _RETIRED_CONFIG_FIELDS):
            return {k: v for k, v in data.items() if k not in _RETIRED_CONFIG_FIELDS}
        return data

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: list[str] | None) -> list[str] | None:
        if unknown := unknown_tools(tools or []):
            raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOL_SPECS)}")
        return tools


def budget_notice_on(config: SessionConfig) -> bool:
    """Whether a session started with ``config`` tells its model of compactions."""
    if config.budget_notice is not None:
        return config.budget_notice
    return config.mode == "hosted" and config.replay is None


def session_tools(config: SessionConfig) -> list[str]:
    """The tools offered to the model: the configured list, else the mode's default; plus
    spawn_subagent when subagents are enabled."""
    return offered_tools(config.tools, replay=config.replay is not None, subagents=config.subagents.enabled)


class SessionInput(BaseModel):
    config: SessionConfig
    checkpoint_id: str | None = None  # set when continuing as new


# --- hosted mode -------------------------------------------------------------------------


class SubmitRequest(BaseModel):
    """A user message. ``text`` is checked by the update validator, not by decoding,
    so that bad input is rejected with a clear error instead of failing a workflow task.
    ``exhaustive``: the task may not end while an observation it must traverse (its
    oversized input) has unread ranges; the model's final answer is refused until then."""

    text: Any = None
    exhaustive: bool = False
    # Idempotency (as AppendItemsRequest.key): the same key and digest answer the first call's
    # task, across continue-as-new too; another digest is refused.
    key: str | None = Field(default=None, min_length=1, max_length=200)
    digest: str | None = Field(default=None, max_length=128)
    call_id: str | None = Field(default=None, max_length=64)  # as AppendItemsRequest.call_id


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
    repeated: bool = False  # the key was seen: the first call's task, nothing queued again
    call_id: str | None = None  # the call whose result this is


class TaskStatus(BaseModel):
    task_id: str
    state: TaskState
    turns: int = 0
    error: str | None = None
    # why it failed, as a type callers can branch on (e.g. RequestDoesNotFit); None: see error
    error_type: str | None = None
    # The model's final answer (an assistant item; its text is in PostgreSQL, never here).
    answer_item_id: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("completed", "failed")


class SessionStatus(BaseModel):
    session_id: str
    tasks: list[TaskStatus]
    turns: int
    items: int
    next_seq: int
    closed: bool
    # Provider-reported usage of the session's model calls (agent and condenser), its cost
    # units and the calibrated token ratio of each model (workflows/context/usage.py).
    usage: UsageTotals = Field(default_factory=UsageTotals)


# --- capability context and pinned notes (either mode) -----------------------------------

CAPABILITY_KINDS = ("tool_schema", "skill", "manual_skill")  # manual_skill: a slash-skill the user asked for
CAPABILITY_SCOPES = ("step", "task")
MAX_CAPABILITY_CHARS = 200_000
MAX_NOTE_CHARS = 20_000
CapabilityStatus = Literal["admitted", "refused", "skipped"]


class CapabilityRequest(BaseModel):
    """A tool schema or skill body for the current (or next) task; checked by the validator."""

    name: str = ""
    kind: str = "skill"
    scope: str = "task"  # a manual skill is always task-scoped
    text: Any = None


def capability_problem(request: CapabilityRequest) -> str | None:
    if request.kind not in CAPABILITY_KINDS:
        return f"kind must be one of {list(CAPABILITY_KINDS)}, got {request.kind!r}"
    if request.scope not in CAPABILITY_SCOPES:
        return f"scope must be one of {list(CAPABILITY_SCOPES)}, got {request.scope!r}"
    if not request.name.strip() or len(request.name) > 120:
        return "name must be 1-120 characters"
    if not isinstance(request.text, str) or not request.text.strip():
        return "content must be non-empty text"
    if len(request.text) > MAX_CAPABILITY_CHARS:
        return f"content has {len(request.text)} characters; the limit is {MAX_CAPABILITY_CHARS}"
    return None


class CapabilityResult(BaseModel):
    """Admission of a capability: admitted, refused (it does not fit: need, margin and
    ceiling in the message) or, for a manual skill that does not fit, skipped."""

    status: CapabilityStatus
    item_id: str | None = None  # the capability item, when admitted
    scope: str
    need: int
    margin: int
    ceiling: int
    available: int
    message: str


class PinRequest(BaseModel):
    text: Any = None


def note_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return "note must be non-empty text"
    if len(value) > MAX_NOTE_CHARS:
        return f"note has {len(value)} characters; the limit is {MAX_NOTE_CHARS}"
    return None


class PinResult(BaseModel):
    status: Literal["pinned", "refused"]
    item_id: str | None = None
    need: int
    pinned: int
    allowance: int
    budget: int
    message: str


# --- external-agent mode -----------------------------------------------------------------


class ExternalItem(BaseModel):
    """One item an external agent appends. Content travels inline when small, else as
    ``content_ref``: an observation the API already stored in PostgreSQL."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1, max_length=64)  # user / assistant / tool_result / note / decision / ...
    role: str | None = None  # default from kind
    text: str | None = Field(default=None, max_length=max(INLINE_TEXT_LIMIT, MAX_NOTE_CHARS))  # see travels_inline
    content_ref: str | None = Field(default=None, pattern=r"^obs-[A-Za-z0-9][A-Za-z0-9_.-]*$")
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=64)
    tool_call_id: str | None = None
    tool_name: str | None = None
    exit_code: int | None = None
    # The client's own id of the item (unique in the session) and a digest of what it holds,
    # so the same id sent again is recognised and another content under it refused.
    client_id: str | None = Field(default=None, min_length=1, max_length=200)
    client_digest: str | None = Field(default=None, max_length=128)
    # Verbatim extras the API stored first (JSON: ``reasoning_content``, ``responses_items``):
    # reasoning and provider items are content, never workflow state.
    extra_ref: str | None = Field(default=None, pattern=r"^obs-[A-Za-z0-9][A-Za-z0-9_.-]*$")
    # A tool output's class as the caller read it from its call (the gateway has the whole
    # conversation): used when the call was appended before this batch (its arguments are not
    # in the batch to classify it by)
    tool_class: ToolClass | None = None

    @model_validator(mode="after")
    def _inline_text_fits_history(self) -> ExternalItem:
        if self.text is not None and not travels_inline(self.kind, self.text):
            raise ValueError(f"inline text takes at most {INLINE_TEXT_LIMIT} characters; larger text goes as "
                             "content_ref")
        return self


def travels_inline(kind: str, text: str) -> bool:
    """Whether an appended item's text goes through workflow history (else the API stores it
    first and sends its ``content_ref``). A note always does (at most MAX_NOTE_CHARS): the session
    measures it against the budget before it stores anything of the call."""
    return kind == "note" or len(text) <= INLINE_TEXT_LIMIT


class ReportedUsage(BaseModel):
    """An external agent's provider counts for the call it made with the session's last
    prepared request. ``price``: the API's LANES_PRICES entry for the model, used when the
    session has no price of its own."""

    prompt: int = Field(ge=0)
    cached: int = Field(0, ge=0)
    completion: int = Field(0, ge=0)
    model: str | None = None
    price: ModelPrice | None = None


# Items one append or step takes; a longer batch (a long conversation's first gateway call) goes
# in several.
MAX_ITEMS_PER_CALL = 100


class AppendItemsRequest(BaseModel):
    items: list[ExternalItem] = Field(min_length=1, max_length=MAX_ITEMS_PER_CALL)
    # Idempotency: the same key with the same digest answers the first call's result (across
    # continue-as-new too); with another digest it is refused. No digest: one of the items.
    key: str | None = Field(default=None, min_length=1, max_length=200)
    digest: str | None = Field(default=None, max_length=128)
    # A fresh id per API call, echoed by the result: Temporal answers an update id it has seen in
    # the run with the first call's result, so a result naming another call answers a repeat.
    call_id: str | None = Field(default=None, max_length=64)
    # The provider's counts of the call these items answer (the gateway appends the model's
    # answer with them); recorded like StepRequest.usage.
    usage: ReportedUsage | None = None


class AppendItemsResult(BaseModel):
    item_ids: list[str]
    repeated: bool = False  # the key was seen: nothing was appended again
    call_id: str | None = None  # the call whose result this is


class GeneratedItem(BaseModel):
    """An item a compaction created, with its text (what ``store_generated_items`` stores)."""

    item: Item
    text: str
    number: int  # the engine's counter of generated items: their seq in the generated lane


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
    tool_set: str | None = None  # the agent's own definitions, after ``tools`` (SessionConfig.tool_set)
    recall: RecallStyle = "tool"
    # context.request (the inspector's pressure timeline): the API writes it with the request
    request_event: EventSpec | None = None
    # Items this plan generated whose write is still running (workflows/later_writes.py): the
    # request is rendered from them, not from the store
    generated: list[GeneratedItem] = Field(default_factory=list)
    # The step's own items whose write is still running (StepRequest.write_behind): the caller
    # renders them from the content it sent
    unstored_items: list[Item] = Field(default_factory=list)
    # What lets a caller send the next request before the session stores its new items
    # (workflows/context/continuation.py); None from workers before it
    continuation: ContinuationFacts | None = None


class ContinuedRequest(BaseModel):
    """The caller sent the request before this step (``StepRequest.continued``): the last
    prepared request with the step's first ``items`` appended whole, planned after the state's
    ``generation``; ``digest``: its entries (continuation.entries_digest)."""

    generation: int
    items: int = Field(ge=1, le=MAX_ITEMS_PER_CALL)
    digest: str = Field(max_length=64)
    tokens: int = Field(ge=0)  # what the provider counts of it, by our count (the step's usage is its)


class StepRequest(BaseModel):
    """One step of an external agent in one call: the items since its last request, then
    the next request. ``step_id`` makes it idempotent (like ``AppendItemsRequest.key``)."""

    items: list[ExternalItem] = Field(default_factory=list, max_length=MAX_ITEMS_PER_CALL)
    step_id: str | None = Field(default=None, min_length=1, max_length=200)
    digest: str | None = Field(default=None, max_length=128)
    usage: ReportedUsage | None = None
    call_id: str | None = Field(default=None, max_length=64)  # as AppendItemsRequest.call_id
    # The caller renders the request from the result (PreparedRequest.unstored_items): the
    # items are measured within the step and stored by a write it does not wait for
    write_behind: bool = False
    # The request for the step's first items was sent already, planned by the caller: the session
    # checks it would have planned the same (StepResult.continued_held)
    continued: ContinuedRequest | None = None


class StepResult(BaseModel):
    item_ids: list[str]
    request: PreparedRequest
    repeated: bool = False  # the step id was seen: nothing was appended again
    call_id: str | None = None  # the call whose result this is
    continued_held: bool | None = None  # StepRequest.continued: the session would have sent the same


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
    status: CondenseStatus
    reason: str = ""
    memory_id: str | None = None
    archived: int = 0


# --- subagent lanes ----------------------------------------------------------------------


class SpawnRequest(BaseModel):
    """Start a subagent: the ``spawn_subagent`` tool's arguments, or the API's body."""

    model_config = ConfigDict(extra="forbid")

    brief: str = Field(min_length=1, max_length=20_000)
    tools: list[str] | None = Field(default=None, max_length=20)  # None: the parent's tools


class SpawnResult(BaseModel):
    lane: str
    workflow_id: str


class ChildLane(BaseModel):
    """A subagent lane as its parent tracks it (metadata only)."""

    lane: str
    workflow_id: str
    brief_digest: str
    tools: list[str]
    task_id: str | None  # the parent task that spawned it (None: the API, outside a task)
    tool_call_id: str | None  # the spawn_subagent call it answers (None: spawned by the API)
    state: ChildLaneState = "running"
    handoff_item_id: str | None = None  # the handoff item in the parent's lane, once recorded
    reason: str = ""

    @property
    def finished(self) -> bool:
        return self.state != "running"
