"""The context report behind ``GET /sessions/{id}/context``: every working-set item with
its state, projection, token costs and the reason for its last transition, plus totals."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .budget import budget, capability_tokens, cost, pressure, working_set_tokens
from .episodes import Episode
from .items import Projection
from .ledger import ContextState, Counters


class ItemReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    seq: int
    kind: str
    role: str
    lifecycle: str
    projection: str
    tokens: int  # cost under the current projection
    tokens_by_projection: dict[str, int]  # measured, or estimated when the caller did not measure
    measured: list[str]  # projections whose cost was measured
    reason: str
    episode: str | None
    task: str | None
    group: int | None
    tool_class: str | None
    observation_id: str | None
    size_chars: int  # characters of the exact content (what recall can return)


class ContextReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[ItemReport]
    tokens_by_lifecycle: dict[str, int]
    count_by_lifecycle: dict[str, int]
    tokens_by_kind: dict[str, int]
    count_by_kind: dict[str, int]
    usable_input: int
    tool_definition_tokens: int
    capability_tokens: int
    shared_prefix_entries: int  # a child lane: the parent's messages its requests start with
    shared_prefix_tokens: int
    budget: int
    working_set_tokens: int
    pressure: float
    compactions: int
    counters: Counters
    live_memory_id: str | None
    summary_id: str | None
    checkpoint_id: str | None
    archived_range: tuple[int, int] | None  # seq range covered by the checkpoint
    active_episodes: list[str]
    episodes: list[Episode]  # every episode with its kind, goal, dependencies, status and conclusion
    current_task: str | None
    generation: int
    layout_epoch: int


def build_report(state: ContextState) -> ContextReport:
    items = []
    by_lifecycle: dict[str, list[int]] = {}
    by_kind: dict[str, list[int]] = {}
    for item in state.items.values():
        tokens = cost(state, item)
        items.append(ItemReport(
            id=item.id, seq=item.seq, kind=item.kind, role=item.role, lifecycle=item.lifecycle.value,
            projection=item.projection.value, tokens=tokens,
            tokens_by_projection={p.value: cost(state, item, p) for p in Projection},
            measured=sorted(p.value for p in item.tokens), reason=item.reason, episode=item.episode,
            task=item.task, group=item.group, tool_class=item.tool_class.value if item.tool_class else None,
            observation_id=item.observation_id, size_chars=item.size_chars,
        ))
        by_lifecycle.setdefault(item.lifecycle.value, []).append(tokens)
        by_kind.setdefault(item.kind, []).append(tokens)
    checkpoint = state.checkpoint
    archived_range = (checkpoint.first_seq, checkpoint.last_seq) if checkpoint.first_seq is not None else None
    return ContextReport(
        items=items,
        tokens_by_lifecycle={k: sum(v) for k, v in sorted(by_lifecycle.items())},
        count_by_lifecycle={k: len(v) for k, v in sorted(by_lifecycle.items())},
        tokens_by_kind={k: sum(v) for k, v in sorted(by_kind.items())},
        count_by_kind={k: len(v) for k, v in sorted(by_kind.items())},
        usable_input=state.config.usable_input,
        tool_definition_tokens=state.config.tool_definition_tokens,
        capability_tokens=capability_tokens(state),
        shared_prefix_entries=len(state.shared_prefix),
        shared_prefix_tokens=state.shared_tokens,
        budget=budget(state),
        working_set_tokens=working_set_tokens(state),
        pressure=round(pressure(state), 4),
        compactions=state.counters.compactions,
        counters=state.counters.model_copy(),
        live_memory_id=state.memory_id,
        summary_id=state.summary_id,
        checkpoint_id=state.checkpoint_id,
        archived_range=archived_range,
        active_episodes=list(state.active_episodes),
        episodes=[e.model_copy() for e in state.episodes.values()],
        current_task=state.current_task,
        generation=state.generation,
        layout_epoch=state.layout_epoch,
    )
