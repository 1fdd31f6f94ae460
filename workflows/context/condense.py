"""Condensation: replace the one live memory and archive what it makes redundant.

Explicit (``condense_context``): deterministic, no model call, refused while an episode is
active. Automatic (``llm``): the workflow asks ``condensation_source`` what to send to the
condenser, and the validated result comes back here with the generation it was made at; if
the lane changed meanwhile, the result is stale and the caller runs the fallback instead.

Only eligible old assistant/tool groups and completed episode content are archived. User
messages, system rules, pinned notes, current-task items, predecessor terminal messages
and the newest four groups are protected; archived observations stay recallable, their
addresses kept in the checkpoint. A rejected or no-op call changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from .budget import cost
from .compaction_plan import CompactionPlan, Mode, Rejection
from .draft import Draft
from .items import Item, Kind, Lifecycle
from .ledger import ContextState, protected_groups
from .memory import MemoryDoc, memory_text, normalized, validate_memory
from .passes import archive_episodes, archive_groups
from .text import estimate_tokens, text_hash

MAX_ANCHORS = 12  # newest pinned/user anchors handed to the LLM condenser (DESIGN §7)


class CondensationSource(BaseModel):
    """What an automatic condensation would read, and whether it fits the condenser."""

    model_config = ConfigDict(extra="forbid")

    generation: int
    item_ids: list[str]  # the items it would archive, in seq order
    anchor_ids: list[str]  # newest pinned/user anchors, newest first
    source_tokens: int
    fits: bool  # source + anchors + live memory + the reserve fit the condenser window
    reason: str = ""


def known_observation_ids(state: ContextState) -> set[str]:
    """Observations the engine still knows of: the working set, the checkpoint, recalls."""
    known = {i.observation_id for i in state.items.values() if i.observation_id}
    known.update(note.obs_id for note in state.checkpoint.observations)
    known.update(obs for note in state.checkpoint.episodes for obs in note.obs_ids)
    known.update(state.coverage)
    return known


def _select(state: ContextState, mode: Mode) -> Draft:
    """A draft with every eligible group and completed episode archived."""
    draft = Draft(state, mode)
    terminal_groups = {i.group for i in state.items.values() if i.terminal and i.group is not None}
    rules_2 = state.config.rules_version >= 2

    def terminal(item: Item) -> bool:
        return item.terminal or (item.group is not None and item.group in terminal_groups)

    def current_task_or_terminal(item: Item) -> bool:
        return terminal(item) or (state.current_task is not None and item.task == state.current_task)

    # The explicit tool protects the current task (the spec's protected set), its episodes
    # included, and counts the newest four groups before it (rules 2); automatic
    # condensation must reach into the task, or a session with one long task never condenses.
    explicit = mode == "explicit"
    if explicit and rules_2:
        draft.protected_groups = protected_groups(state, state.config.protected_groups, before_current_task=True)
    archive_episodes(draft, everything=True, protect=current_task_or_terminal if explicit and rules_2 else terminal)
    archive_groups(draft, everything=True, protect=current_task_or_terminal if explicit else terminal)
    return draft


def plan_condense(
    state: ContextState,
    doc: MemoryDoc,
    observation_ids: Iterable[str] | None = None,
    mode: Mode = "explicit",
    expected_generation: int | None = None,
    measured_memory_tokens: int | None = None,
) -> CompactionPlan | Rejection:
    """Plan replacing the live memory with ``doc``; a ``Rejection`` leaves the state as it was.

    ``observation_ids`` defaults to ``known_observation_ids(state)``; pass the session's
    full list when the workflow has it. ``measured_memory_tokens`` replaces the estimate
    in the 2,000-token check when the caller already counted the text.
    """
    if mode == "fallback":
        raise ValueError("plan_condense plans explicit or llm condensations; use plan_fallback")
    if expected_generation is not None and expected_generation != state.generation:
        return Rejection(status="stale", reason=(
            f"the lane changed while the condensation ran (generation {expected_generation} -> "
            f"{state.generation}); discard it and use the deterministic fallback"))
    if mode == "explicit" and state.active_episodes:
        return Rejection(status="rejected", reason=(
            f"condense_context is rejected while an episode is active ({', '.join(state.active_episodes)}); "
            "end it first"))
    rules_2 = state.config.rules_version >= 2
    doc = normalized(doc) if rules_2 else doc
    text = memory_text(doc)
    tokens = measured_memory_tokens if measured_memory_tokens is not None else estimate_tokens(text)
    known = set(observation_ids) if observation_ids is not None else known_observation_ids(state)
    errors = validate_memory(doc, known, tokens, state.config.memory_max_tokens, bounded=rules_2)
    if errors:
        return Rejection(status="rejected", reason="; ".join(errors))
    draft = _select(state, mode)
    live = state.generated.get(Kind.MEMORY.value)
    if not draft.changes and (rules_2 or (live is not None and live.text_hash == text_hash(text))):
        # the spec: a no-op leaves storage unchanged (rules 1 still wrote a changed memory)
        return Rejection(status="no-op", reason="nothing eligible to condense: the context keeps what it has")
    draft.set_text(Kind.MEMORY.value, text)
    draft.passes.append(f"condense:{mode}")
    return draft.to_plan()


def condensation_source(state: ContextState, condenser_window: int) -> CondensationSource:
    """The source an automatic condensation would summarise, and whether it fits.

    The condenser may run only when the source prefix plus a 4,096-token reserve (plus the
    anchors and the live memory it must merge) fit its window.
    """
    draft = _select(state, "llm")
    ids = [item_id for item_id, change in draft.changes.items() if change.lifecycle == Lifecycle.ARCHIVED]
    ids.sort(key=lambda i: state.items[i].seq)
    source = sum(cost(state, state.items[i]) for i in ids)
    pinned = [i for i in state.items.values()
              if i.lifecycle == Lifecycle.PINNED and i.kind in (Kind.USER.value, Kind.NOTE.value, Kind.DECISION.value)]
    anchors = sorted(pinned, key=lambda i: -i.seq)[:MAX_ANCHORS]
    memory_id = state.memory_id
    extra = sum(cost(state, i) for i in anchors) + (cost(state, state.items[memory_id]) if memory_id else 0)
    needed = source + extra + state.config.condensation_reserve
    fits = bool(ids) and needed <= condenser_window
    reason = "" if fits else (
        "nothing eligible to condense" if not ids else
        f"source {source} + anchors/memory {extra} + reserve {state.config.condensation_reserve} = {needed} "
        f"tokens exceed the condenser window {condenser_window}")
    return CondensationSource(generation=state.generation, item_ids=ids, anchor_ids=[a.id for a in anchors],
                              source_tokens=source, fits=fits, reason=reason)
