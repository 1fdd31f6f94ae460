"""Request and response bodies of the HTTP API: the server validates with them, the client
parses with them. Pydantic only (no FastAPI, Temporal, database or engine imports), so the
client installs and imports without the server; the engine's shapes it needs have their
wire models in :mod:`lanes_client.shapes`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from lanes_client.responses_items import ResponsesItemIn
from lanes_client.shapes import (
    MAX_SUBMIT_CHARS,
    CondenseStatus,
    ContextReport,
    MemoryDoc,
    RequestFormat,
    SessionMode,
    SessionStatus,
    TaskStatus,
    ToolCall,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
OBS_PATTERN = r"^obs-[A-Za-z0-9][A-Za-z0-9_.-]*$"
MAX_ITEM_CHARS = 1_000_000  # one appended item; the request body limit applies on top
MAX_PROMPT_CHARS = 100_000

ToolsMode = Literal["workspace", "recall", "none"]
# Context-management tools a session can offer its model on top of its tools mode.
ContextTool = Literal["begin_episode", "end_episode", "condense_context", "pin_note"]
CapabilityKind = Literal["tool_schema", "skill", "manual_skill"]
MAX_CAPABILITY_CHARS = 200_000
MAX_NOTE_CHARS = 20_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- sessions --------------------------------------------------------------------------


class ReplayIn(Strict):
    """Drive a hosted session from a recorded trajectory (servers started with replay allowed only)."""

    trajectory_path: str = Field(min_length=1, max_length=4096)
    trajectory_id: str = Field(min_length=1, max_length=500)
    model_base_url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://")
    subagents: list[ReplayIn] = Field(default_factory=list, max_length=20,
                                      description="what subagent lanes replay (the n-th lane: subagents[n % len])")


class CompactionIn(Strict):
    """LLM condensation before the deterministic fallback (the worker's condenser endpoint)."""

    enabled: bool | None = Field(None, description="default: on for hosted sessions that are not replays")
    condenser_model: str | None = Field(None, min_length=1, max_length=200,
                                        description="default: the worker's LANES_CONDENSER_MODEL when set, else "
                                                    "the session's model")


class SubagentsIn(Strict):
    """Subagent lanes: the spawn_subagent tool for the model, and POST /subagents."""

    enabled: bool = False
    max_concurrent: int | None = Field(None, ge=1, le=50, description="running subagents at once (default 3)")
    max_turns: int | None = Field(None, ge=1, le=250, description="model turns of one subagent (default 100)")
    budget_tokens: int | None = Field(None, ge=256, le=10_000_000,
                                      description="a subagent's working-set budget (default: the session's)")


class FunctionIn(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = Field(None, max_length=10_000)
    parameters: dict[str, Any] | None = None  # a JSON Schema object
    strict: bool | None = None


class FunctionToolIn(Strict):
    """One of the agent's own tools, in the Chat Completions function-tool form."""

    type: Literal["function"] = "function"
    function: FunctionIn


MAX_TOOL_DEFINITIONS_CHARS = 200_000  # all of a session's tool definitions, as JSON


class PriceIn(Strict):
    input: float = Field(0.0, ge=0)
    cached_input: float | None = Field(None, ge=0, description="default: the input price")
    output: float = Field(0.0, ge=0)


class SessionCreate(Strict):
    mode: SessionMode = Field("hosted", description="hosted: the worker runs the agent loop (POST /messages); "
                                             "external: your agent runs it (POST /items, GET /request)")
    model: str | None = Field(None, min_length=1, max_length=200, description="default: LANES_MODEL")
    context_window: int | None = Field(None, ge=1024, le=10_000_000, description="default: LANES_CONTEXT_WINDOW")
    max_output_tokens: int | None = Field(None, ge=1, le=1_000_000, description="default: LANES_MAX_OUTPUT_TOKENS")
    budget_tokens: int | None = Field(None, ge=256, le=10_000_000,
                                      description="working-set budget (default: the usable input window)")
    tools: ToolsMode | None = Field(None, description="tools mode: workspace tools, recall only, or none")
    context_tools: list[ContextTool] | None = Field(
        None, max_length=4, description="context-management tools offered on top of the tools mode: the episode "
        "markers begin_episode/end_episode, condense_context and pin_note (run by the session itself)")
    system_prompt: str | None = Field(None, min_length=1, max_length=MAX_PROMPT_CHARS,
                                      description="hosted default: a coding-agent prompt; external: none")
    tool_definitions: list[FunctionToolIn] | None = Field(
        None, max_length=128, description="external sessions: the agent's own tools, rendered in every request "
        "(after any of tools) and counted in the budget")
    recall: Literal["tool", "endpoint"] | None = Field(
        None, description="external sessions: how placeholders say to read archived text back. tool: call "
        "recall_observation (the agent has a tool of that name); endpoint: GET /v1/sessions/{id}/observations/"
        "{obs}. Default: tool when the session offers a recall_observation tool, else endpoint")
    generated_role: Literal["system", "developer", "user"] | None = Field(
        None, description="role of the texts Lanes writes into the request (checkpoint, memory, summary); "
        "default system")
    max_turns_per_task: int | None = Field(None, ge=1, le=10_000)
    give_up_seconds: float | None = Field(
        None, gt=0, le=86_400, description="how long a model or tool call retries transient failures (an unreachable "
        "model, 5xx, 429) before its task fails with the cause (default 1800)")
    updates_per_run: int | None = Field(None, ge=10, le=1_500, description="calls a workflow run takes before it "
                                        "continues as new (default 500; transparent to clients)")
    compaction: CompactionIn | None = None
    subagents: SubagentsIn | None = None
    replay: ReplayIn | None = None
    prices: dict[str, PriceIn] | None = Field(
        None, max_length=50, description="prices per million tokens by model name (exact, 'prefix*' or '*'), "
        "for the session's cost units; default: the worker's LANES_PRICES")


class SessionCreated(BaseModel):
    session_id: str
    mode: str
    created_at: datetime | None = None
    config: dict[str, Any]


class SessionSummary(BaseModel):
    session_id: str
    mode: str
    created_at: datetime
    config: dict[str, Any]


class SessionList(BaseModel):
    sessions: list[SessionSummary]
    next_cursor: str | None = None


class WorkflowInfo(BaseModel):
    status: str  # RUNNING / COMPLETED / TERMINATED / ...
    start_time: datetime | None = None
    close_time: datetime | None = None
    history_length: int = 0


class SessionInfo(BaseModel):
    session_id: str
    mode: str
    created_at: datetime
    config: dict[str, Any]
    workflow: WorkflowInfo | None = None
    status: SessionStatus | None = None
    status_error: str | None = None


class CancelRequest(Strict):
    action: Literal["close", "terminate"] = Field(
        "close", description="close: finish once queued tasks are done; terminate: stop now (with a reason)"
    )
    reason: str | None = Field(None, min_length=1, max_length=1000)


class CancelResult(BaseModel):
    session_id: str
    action: str
    workflow_status: str | None = None


# --- hosted mode -----------------------------------------------------------------------


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


# --- capability context and pinned notes (either mode) -----------------------------------


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


class ToolCallIn(ToolCall):
    """A tool call of an appended assistant item, bounded as the API accepts it."""

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: str = Field("{}", max_length=MAX_ITEM_CHARS)


class ItemIn(Strict):
    """One item your agent appends: a user message, its own answer (with tool calls), a tool
    result, a note or decision. Large text is stored in PostgreSQL first and passed by reference."""

    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$",
                      description="user / assistant / tool_result / note / decision / ...")
    role: Literal["system", "user", "assistant", "tool"] | None = Field(None, description="default: from kind")
    text: str | None = Field(None, max_length=MAX_ITEM_CHARS)
    tool_calls: list[ToolCallIn] = Field(default_factory=list, max_length=64)
    tool_call_id: str | None = Field(None, min_length=1, max_length=200)
    tool_name: str | None = Field(None, min_length=1, max_length=200)
    exit_code: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    item_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
                                description="your own id of the item, unique in the session: sent again with "
                                "the same content it is recognised (not stored twice), with other content 409")
    reasoning_content: str | None = Field(
        None, max_length=MAX_ITEM_CHARS,
        description="assistant items: the model's chat-style reasoning (DeepSeek, Kimi...), stored verbatim and "
                    "passed back as reasoning_content (format=chat) while this turn is kept at full fidelity")

    @model_validator(mode="after")
    def _reasoning_of_an_answer(self) -> ItemIn:
        if self.reasoning_content is not None and (self.role or self.kind) != "assistant":
            raise ValueError("reasoning_content belongs to an assistant item")
        return self


RESPONSES_ITEMS_DESCRIPTION = (
    "instead of items: OpenAI Responses API input items (a Responses request's input, or a response's output): "
    "message (input_text/output_text/refusal parts, or {role, content: str}), function_call, function_call_output, "
    "reasoning. Each run of assistant-side items (reasoning, assistant message, function_call) is stored as one "
    "assistant turn, all of them verbatim; a reasoning item belongs to the turn it precedes or accompanies")


class AppendItemsIn(Strict):
    items: list[ItemIn] = Field(default_factory=list, max_length=100)
    responses_items: list[ResponsesItemIn] = Field(default_factory=list, max_length=400,
                                                   description=RESPONSES_ITEMS_DESCRIPTION)

    @model_validator(mode="after")
    def _one_list(self) -> AppendItemsIn:
        if bool(self.items) == bool(self.responses_items):
            raise ValueError("give items or responses_items (one of them, not empty)")
        return self


class AppendItemsOut(BaseModel):
    session_id: str
    item_ids: list[str]
    stored_observations: list[str] = Field(default_factory=list)  # large texts stored by reference
    repeated: bool = False  # the Idempotency-Key was seen: nothing was appended again
    already_stored: list[str] = Field(default_factory=list)  # client item ids stored by an earlier call


class UsageIn(Strict):
    """What the provider reported for the model call the agent made with the request this
    session prepared last (its ``usage``): totals, cost and the calibrated token ratio follow it."""

    prompt_tokens: int = Field(ge=0, le=100_000_000)
    cached_tokens: int = Field(0, ge=0, le=100_000_000, description="of prompt_tokens, served from the cache")
    completion_tokens: int = Field(0, ge=0, le=100_000_000)
    model: str | None = Field(None, min_length=1, max_length=200, description="default: the session's model")

    @model_validator(mode="after")
    def _cached_within_prompt(self) -> UsageIn:
        if self.cached_tokens > self.prompt_tokens:
            raise ValueError("cached_tokens cannot exceed prompt_tokens")
        return self


class StepIn(Strict):
    """One agent step in one call: the items since the last request (may be none), then the
    next request. ``step_id`` makes a retry safe: the same id and body answer the same items.
    ``usage``: the provider's counts for the call made with the previous request."""

    step_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
    items: list[ItemIn] = Field(default_factory=list, max_length=100)
    responses_items: list[ResponsesItemIn] = Field(default_factory=list, max_length=400,
                                                   description=RESPONSES_ITEMS_DESCRIPTION)
    format: RequestFormat = Field("chat", description="the format of the request returned (see GET /request)")
    usage: UsageIn | None = None

    @model_validator(mode="after")
    def _one_list(self) -> StepIn:
        if self.items and self.responses_items:
            raise ValueError("give items or responses_items, not both")
        return self


class StoredItemOut(BaseModel):
    """One stored item of the raw history (what was appended or generated, whatever the
    working set holds now)."""

    item_id: str
    seq: int
    lane: str
    kind: str
    role: str
    task_id: str | None = None
    text: str
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_call_id: str | None = None
    observation_id: str | None = None
    client_id: str | None = None  # your item_id, when you gave one
    reasoning_content: str | None = None  # as appended (assistant items)
    responses_items: list[dict[str, Any]] = Field(
        default_factory=list, description="the Responses API items this item was appended as, verbatim")


class StoredItemPage(BaseModel):
    session_id: str
    items: list[StoredItemOut]
    next_after_seq: int | None = None  # pass as after_seq for the next page; None: no more


class EpisodeBeginIn(Strict):
    episode_id: str = Field(min_length=1, max_length=120, pattern=ID_PATTERN)
    kind: Literal["exploration", "action"]
    goal: str = Field(min_length=1, max_length=2_000)
    depends_on: list[Annotated[str, Field(min_length=1, max_length=120)]] = Field(default_factory=list,
                                                                                  max_length=50)


class EpisodeEndIn(Strict):
    conclusion: str | None = Field(None, min_length=1, max_length=4_000)


class EpisodeAck(BaseModel):
    session_id: str
    episode_id: str
    state: Literal["begun", "ended"]


class CondenseIn(Strict):
    memory: MemoryDoc


class CondenseOut(BaseModel):
    session_id: str
    status: CondenseStatus
    reason: str = ""
    memory_id: str | None = None
    archived: int = 0


class PlanEntryOut(BaseModel):
    item_id: str
    projection: str


class PreparedRequestOut(BaseModel):
    """The exact request to send next, materialised from PostgreSQL in the format asked for:

    - ``chat`` (Chat Completions): ``messages``, ``tools`` (``{type: function, function}``);
    - ``responses`` (Responses API): ``instructions`` (the system prompt), ``input`` items,
      ``tools`` (flat ``{type, name, description, parameters, strict}``); reasoning items
      passed back verbatim right before their turn while it is kept at full fidelity;
    - ``anthropic`` (Messages API): ``system`` blocks, ``messages`` (tool_use/tool_result
      blocks, consecutive same-role turns merged), ``tools`` (``{name, description,
      input_schema}``), with ``cache_control`` breakpoints at the end of the stable segment,
      of the unchanged history prefix and of the request (``cache_breakpoints``).
    """

    session_id: str
    model: str
    format: RequestFormat = "chat"
    messages: list[dict[str, Any]]  # chat messages (format chat) or Anthropic messages (format anthropic)
    tools: list[dict[str, Any]]  # the session's tool definitions, in the format's form
    input: list[dict[str, Any]] = Field(default_factory=list)  # format responses
    instructions: str | None = None  # format responses
    system: list[dict[str, Any]] | None = None  # format anthropic
    # format anthropic: indices in the chat rendering of the messages whose end is a cache breakpoint
    cache_breakpoints: list[int] = Field(default_factory=list)
    token_estimate: int  # tiktoken count of the chat rendering (the same text in every format) + tool definitions
    tokenizer: str = ""  # the encoding counting, and why it is an estimate when it is
    plan_tokens: int  # the engine's conversation tokens for this plan
    budget: int
    fits: bool
    reason: str = ""
    stable_prefix_entries: int  # plan entries laid out at the last layout change
    stable_prefix_messages: int  # leading chat messages byte-identical until the next compaction
    stable_prefix_tokens: int
    entries: list[PlanEntryOut]


class StepOut(BaseModel):
    session_id: str
    item_ids: list[str]
    stored_observations: list[str] = Field(default_factory=list)
    repeated: bool = False  # the step id was seen: nothing was appended again
    already_stored: list[str] = Field(default_factory=list)  # client item ids stored by an earlier call
    request: PreparedRequestOut


# --- reads -------------------------------------------------------------------------------


class ItemContentOut(BaseModel):
    item_id: str
    lane: str
    seq: int
    kind: str
    role: str
    text: str
    size_chars: int
    truncated: bool
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ObservationOut(BaseModel):
    session_id: str
    obs_id: str
    address: str
    offset: int
    limit: int
    text: str
    total_chars: int
    next_offset: int | None
    eof: bool


class EventOut(BaseModel):
    id: int
    lane: str
    seq: int
    event_id: str
    kind: str
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    events: list[EventOut]
    next_after: int  # pass as ?after= for the next page
    has_more: bool


LedgerState = Literal["pinned", "active", "retained", "archived"]


class LedgerEntry(BaseModel):
    """One stored item: its lifecycle state, projection, token cost and the reason of its
    last transition (archived items: as the event log recorded them when they left)."""

    item_id: str
    lane: str  # the lane, or the lane of the engine's generated items (checkpoint, memory, ...)
    seq: int
    kind: str
    role: str
    state: str  # pinned / active / retained / archived
    projection: str  # full / compact / reference / minimal-reference / omitted
    tokens: int  # its cost in the next request (0 once archived)
    full_tokens: int  # its cost at full fidelity
    reason: str
    in_working_set: bool
    task_id: str | None = None
    episode: str | None = None
    observation_id: str | None = None


class LedgerCounts(BaseModel):
    working_set: int  # items in the working set
    history: int  # stored items of the lane (every state)
    archived: int  # stored items out of the working set
    observations: int  # exact outputs and oversized inputs stored for recall
    by_state: dict[str, int]


class LedgerPage(BaseModel):
    session_id: str
    items: list[LedgerEntry]
    counts: LedgerCounts
    next_cursor: str | None = None  # pass as ?cursor= for the next page; None: no more


class ContextOut(ContextReport):
    """``GET /context``: the working-set report; with ``?all=true`` also ``ledger``, one page
    of every stored item. Without ``all`` there is no ``ledger`` key at all: the answer is
    the report as it always was."""

    ledger: LedgerPage | None = None

    # Not Field(exclude_if=...): that needs pydantic 2.12, the client supports 2.10. Unannotated
    # on purpose: an annotated return would replace the model's schema in the OpenAPI document.
    @model_serializer(mode="wrap")
    def _no_ledger_key_without_all(self, handler: SerializerFunctionWrapHandler):
        data = handler(self)
        if self.ledger is None and isinstance(data, dict):
            data.pop("ledger", None)
        return data


class EpisodeOut(BaseModel):
    id: str
    kind: str | None = None
    goal: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    status: str  # active / completed / abandoned / archived / unknown
    conclusion: str | None = None
    items: int = 0  # working-set items tagged with it
    tokens: int = 0


class EpisodeList(BaseModel):
    episodes: list[EpisodeOut]
    active: list[str]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ok", "unavailable"]
