"""The engine state (a pydantic model stored in workflow state) and adding items to it.

``items`` holds only the working set, keyed by id: lane items in seq order, then the items
the engine generated. Archived items leave it (their content and metadata stay in
PostgreSQL), so the state is bounded by the token budget, not by the session length.
``order`` is the request layout: it changes only inside a compaction (or at a task end);
in between, every new item is appended at its end, so each request extends the last one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from . import plan_cache
from .budget import cost_of, is_capability, working_set_cost
from .checkpoint import CheckpointData
from .classify import classify_tool
from .config import EngineConfig
from .coverage import Coverage, require_observation
from .episodes import Episode
from .errors import EngineError
from .items import KNOWN_KINDS, Item, Kind, Lifecycle, Projection, ToolClass, is_tool_output, item_with
from .observations import OBSERVATION_ID
from .summary import SummaryData

PINNED_KINDS = frozenset({Kind.SYSTEM.value, Kind.USER.value, Kind.NOTE.value, Kind.DECISION.value})
GENERATED_KINDS = frozenset({Kind.MEMORY.value, Kind.SUMMARY.value, Kind.CHECKPOINT.value, Kind.EPISODES.value,
                             Kind.NOTICE.value})
NOT_LANE_KINDS = GENERATED_KINDS | {Kind.CAPABILITY.value}
_GROUP_SEARCH = 256  # how far back a tool result looks for the assistant turn that called it


class GeneratedRef(BaseModel):
    """The live item of one generated kind and a hash of its text (to skip identical rewrites)."""

    model_config = ConfigDict(extra="forbid")

    item_id: str
    text_hash: str


class SharedEntry(BaseModel):
    """One message of the immutable prefix a child lane shares with its parent: an item of
    the parent's lane, the projection the parent sent it with, and its token cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str
    projection: Projection
    tokens: int = Field(ge=0)


class Counters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    compactions: int = 0  # applied plans of every mode
    fallback_compactions: int = 0
    explicit_condensations: int = 0
    llm_condensations: int = 0
    archived_items: int = 0
    archived_tokens: int = 0  # their cost when archived
    # of those, the ones whose exact text is parked at an observation address (recallable)
    archived_observations: int = 0
    rolled_into_summary: int = 0
    generated_items: int = 0  # numbers the ids of generated items


class ContextState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: EngineConfig
    items: dict[str, Item] = Field(default_factory=dict)
    order: list[str] = Field(default_factory=list)  # request layout (step capabilities excluded)
    stable_len: int = 0  # order[:stable_len] is the stable segment
    memory_len: int = 0  # then the memory segment; the rest is history
    laid_out_len: int = 0  # len(order) at the last layout; later entries were appended since
    episodes: dict[str, Episode] = Field(default_factory=dict)
    active_episodes: list[str] = Field(default_factory=list)  # innermost last
    generated: dict[str, GeneratedRef] = Field(default_factory=dict)  # kind -> live generated item
    checkpoint: CheckpointData = Field(default_factory=CheckpointData)
    summary: SummaryData = Field(default_factory=SummaryData)
    coverage: dict[str, Coverage] = Field(default_factory=dict)
    required_coverage: list[str] = Field(default_factory=list)  # observations the task must traverse
    current_task: str | None = None
    task_exhaustive: bool = False
    last_seq: int = -1
    newest_group: int | None = None  # seq of the newest assistant turn
    generation: int = 0  # bumped on every working-set change (stale-plan detection)
    layout_epoch: int = 0  # bumped whenever a request may stop extending the previous one
    counters: Counters = Field(default_factory=Counters)
    # The budget notice (EngineConfig.budget_notice): how many were announced, and the task of
    # the last one (one per pressure streak: the compactions of one task)
    notices: int = 0
    notice_task: str | None = None
    # A child lane's requests start with its parent's prefix (see fork.py): never compacted
    # here, charged against the budget like the tool definitions.
    shared_prefix: list[SharedEntry] = Field(default_factory=list)
    shared_tokens: int = 0

    def generated_id(self, kind: str) -> str | None:
        ref = self.generated.get(kind)
        return ref.item_id if ref else None

    @property
    def memory_id(self) -> str | None:
        return self.generated_id(Kind.MEMORY.value)

    @property
    def summary_id(self) -> str | None:
        return self.generated_id(Kind.SUMMARY.value)

    @property
    def checkpoint_id(self) -> str | None:
        return self.generated_id(Kind.CHECKPOINT.value)


def new_state(config: EngineConfig, shared_prefix: list[SharedEntry] | None = None) -> ContextState:
    """An empty lane; a child lane starts with the prefix it shares with its parent."""
    shared = list(shared_prefix or [])
    return ContextState(config=config, shared_prefix=shared, shared_tokens=sum(e.tokens for e in shared))


def kind_problem(kind: str) -> str | None:
    """Why ``add_item`` refuses items of ``kind`` (None: it accepts them)."""
    if kind == Kind.CAPABILITY.value:
        return "is capability context: admit it with admit_capability"
    if kind in GENERATED_KINDS:
        return f"has kind {kind!r}, which only the engine generates"
    return None


def add_item(state: ContextState, item: Item, arguments: str | None = None) -> Item:
    """Append one lane item: assign its lifecycle, group, task, episode and entry projection.

    ``arguments`` are the raw arguments of the call a tool result answers; with the tool
    name and exit code they classify the exchange when ``item.tool_class`` is not given.
    Returns the stored copy (the caller's object is not modified).
    """
    if item.id in state.items:
        raise EngineError(f"item {item.id!r} was already added")
    if item.seq <= state.last_seq:
        raise EngineError(f"item {item.id!r} has seq {item.seq}; seqs must increase (last was {state.last_seq})")
    if (problem := kind_problem(item.kind)) is not None:
        raise EngineError(f"item {item.id!r} {problem}")
    if item.observation_id is not None and not OBSERVATION_ID.fullmatch(item.observation_id):
        raise EngineError(f"item {item.id!r}: observation id {item.observation_id!r} must look like 'obs-<id>'")
    item = copy_item(item)
    item.task = item.task or state.current_task
    _assign_lifecycle(state, item, arguments)
    if item.episode is None and state.active_episodes:
        item.episode = state.active_episodes[-1]
    _assign_entry_projection(state, item)
    if plan_cache.current(state) is not None:  # the planner's derived sums grow with the item
        preview = state.config.effective_preview_chars
        plan_cache.note_append(state, item.id, working_set_cost(item, preview),
                               cost_of(item, item.projection, preview) if is_capability(item) else 0)
    state.items[item.id] = item
    state.order.append(item.id)
    state.last_seq = item.seq
    state.generation += 1
    return item


def copy_item(item: Item) -> Item:
    """A copy sharing nothing mutable with ``item`` (cheaper than a generic deep copy)."""
    return item_with(item, tokens=dict(item.tokens), tool_call_ids=list(item.tool_call_ids), names=list(item.names),
                     lines=list(item.lines))


def _assign_lifecycle(state: ContextState, item: Item, arguments: str | None) -> None:
    if item.kind not in KNOWN_KINDS:
        item.lifecycle, item.reason = Lifecycle.PINNED, "pinned:unknown-kind"
    elif item.kind in PINNED_KINDS:
        item.lifecycle, item.reason = Lifecycle.PINNED, f"pinned:{item.kind}"
    elif item.lifecycle == Lifecycle.PINNED:
        item.reason = "pinned:by-caller"
    else:
        item.lifecycle, item.reason = Lifecycle.ACTIVE, "added"
    if item.kind == Kind.ASSISTANT.value:
        item.group = item.seq
        state.newest_group = item.seq
    elif is_tool_output(item):
        _join_group(state, item)
        if item.tool_class is None:
            item.tool_class = classify_tool(item.tool_name, arguments, item.exit_code)
        elif item.exit_code not in (None, 0):
            item.tool_class = ToolClass.ERROR


def _join_group(state: ContextState, item: Item) -> None:
    """A tool result belongs to the assistant turn that called it (or, for text-protocol
    agents that answer in user messages, to the newest assistant turn); it shares the
    episode of that turn so a group is never split between episodes."""
    assistant = None
    if item.group is None and item.tool_call_ids:
        call_id = item.tool_call_ids[0]
        for item_id in reversed(state.order[-_GROUP_SEARCH:]):
            other = state.items[item_id]
            if other.kind == Kind.ASSISTANT.value and call_id in other.tool_call_ids:
                assistant = other
                break
    if item.group is None:
        item.group = assistant.group if assistant else state.newest_group
    if assistant is None and item.group is not None:
        assistant = next((state.items[i] for i in reversed(state.order[-_GROUP_SEARCH:])
                          if state.items[i].seq == item.group), None)
    if item.episode is None and assistant is not None:
        item.episode = assistant.episode


def _assign_entry_projection(state: ContextState, item: Item) -> None:
    """Large content enters bounded and keeps that projection until a compaction (caching).

    Tool output longer than the preview enters as head and tail. Under rules 2, any item
    but the system prompt whose full cost exceeds the item share of the budget
    (``max_item_tokens``) enters bounded too: tool output and assistant messages as head and
    tail (tool-call arguments bounded), user input and other texts as a source reference,
    so that no single item can make a request overflow its budget. The exact text stays
    recallable at the item's observation address (the activity that stored an oversized
    item archived it there).
    """
    config = state.config
    rules_2 = config.rules_version >= 2
    oversized = rules_2 and item.kind != Kind.SYSTEM.value and item.cost(Projection.FULL) > config.max_item_tokens
    if is_tool_output(item):
        if item.observation_id and (item.size_chars > config.effective_preview_chars or oversized):
            item.projection, item.reason = Projection.COMPACT, f"{item.reason};entry:large-output-compact"
    elif item.kind == Kind.ASSISTANT.value:
        if oversized:
            item.projection, item.reason = Projection.COMPACT, f"{item.reason};entry:oversized-answer-compact"
    elif item.observation_id and (
            oversized if rules_2 else item.kind == Kind.USER.value and item.size_chars > config.effective_preview_chars):
        item.projection, item.reason = Projection.REFERENCE, f"{item.reason};entry:oversized-input-reference"
        if state.task_exhaustive:
            require_observation(state, item.observation_id, item.size_chars)


def lane_items(state: ContextState) -> list[Item]:
    """Working-set items that came from the lane (not generated, not capability context)."""
    not_lane = NOT_LANE_KINDS
    return [i for i in state.items.values() if i.kind not in not_lane]


def protected_groups(state: ContextState, count: int, before_current_task: bool = False) -> set[int]:
    """Seqs of the ``count`` newest exchange groups the request still shows (with
    ``before_current_task``: the newest ``count`` of earlier tasks, and every group of the
    current one).

    Groups whose items were all omitted at a task end do not count: they are no longer
    part of the conversation the model sees, so they must not use up the window."""
    shown: set[int] = set()
    current: set[int] = set()
    task_now, omitted = state.current_task, Projection.OMITTED
    for item in state.items.values():  # one pass: this runs at every compaction over the whole working set
        group = item.group
        if group is None or item.projection == omitted:
            continue
        shown.add(group)
        if before_current_task and item.task is not None and item.task == task_now:
            current.add(group)
    earlier = sorted(shown - current, reverse=True)
    return current | set(earlier[:count])

