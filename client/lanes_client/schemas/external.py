"""External-agent mode: items, steps, episodes, condensation and the prepared request."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    model_validator,
)

from lanes_client.responses_items import ResponsesItemIn
from lanes_client.schemas._common import ID_PATTERN, MAX_ITEM_CHARS, MAX_NOTE_CHARS, Strict
from lanes_client.shapes import (
    CondenseStatus,
    MemoryDoc,
    RequestFormat,
    ToolCall,
)


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
        if self.kind == "note" and self.text is not None and len(self.text) > MAX_NOTE_CHARS:
            raise ValueError(f"a note takes at most {MAX_NOTE_CHARS:,} characters (it is pinned: it stays in every "
                             f"request); this one has {len(self.text):,}")
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
    # What one recall may read so that its answer enters the next request whole (a longer one
    # enters as head and tail, like any long tool output): integrations cap their reads to it.
    recall_chars: int | None = None


class StepOut(BaseModel):
    session_id: str
    item_ids: list[str]
    stored_observations: list[str] = Field(default_factory=list)
    repeated: bool = False  # the step id was seen: nothing was appended again
    already_stored: list[str] = Field(default_factory=list)  # client item ids stored by an earlier call
    request: PreparedRequestOut


