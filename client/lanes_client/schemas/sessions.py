"""Sessions: creating, listing, describing and cancelling them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
)

from lanes_client.schemas._common import MAX_PROMPT_CHARS, ContextTool, Strict, ToolsMode
from lanes_client.shapes import (
    SessionMode,
    SessionStatus,
)


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
    budget_notice: bool | None = Field(
        None, description="tell the model when its context was compacted: one short notice at the first compaction "
        "of each task (what was compacted, the budget, how to recall). Default: on for hosted sessions, off for "
        "external ones")
    tasks: Literal["per_user_message", "conversation"] | None = Field(
        None, description="external sessions: what begins a task. per_user_message (the default): each user "
        "message ends the running task and begins the next, and earlier tasks' messages roll into the summary; "
        "conversation: the whole conversation is one task, its user messages roll only under budget pressure "
        "(agents that send tool output as user messages; the gateway's sessions)")
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


def session_budget(config: dict[str, Any]) -> int:
    """A session's working-set budget in tokens from its configuration (``config`` of
    ``SessionCreated``/``SessionInfo``): ``budget_tokens``, else the model's usable window (the
    window less the output it reserves), which compacts only near it."""
    if config.get("budget_tokens"):
        return int(config["budget_tokens"])
    window, output = int(config.get("context_window") or 0), int(config.get("max_output_tokens") or 0)
    return window - min(output, window // 2)


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
    first_task: str | None = None  # the first task's text (its first 200 characters)
    turns: int = 0  # model turns of the main lane (its assistant items)
    last_activity: datetime | None = None  # when it last stored an item or an event


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


