"""A working copy of the state's projections, on which compaction passes are planned.

Nothing here mutates the state: the draft records transitions and keeps a running token
total (lane items plus the generated texts as they would be regenerated), so a pass can
stop as soon as the target is met. ``to_plan`` turns the draft into a ``CompactionPlan``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, groupby
from operator import itemgetter
from typing import NamedTuple

from .budget import budget, cost, cost_of, working_set_tokens
from .checkpoint import CheckpointData, checkpoint_text, lines_to_show
from .compaction_plan import CompactionPlan, GeneratedText, Mode, TransitionRun
from .episodes import EpisodeStatus, markers_text
from .items import Item, Kind, Lifecycle, Projection
from .lane_facts import LaneFacts
from .ledger import GENERATED_KINDS, ContextState, lane_items
from .notice import NOTICE, announces, notice_text
from .notice import counts as notice_counts
from .request_plan import kept_lane_facts
from .summary import summary_text
from .text import estimate_tokens, text_hash

# plain constants: read once per item in passes
_ARCHIVED, _PINNED, _OMITTED = Lifecycle.ARCHIVED, Lifecycle.PINNED, Projection.OMITTED
_ITEM_ID, _CHANGE = itemgetter(0), itemgetter(1)  # of a (item id, change) pair of ``Draft.changes``


class Change(NamedTuple):
    """A transition the draft decided (a plan's ``Transition`` without the item id, which keys
    it): a tuple, and one may serve many items, since a compaction decides thousands."""

    lifecycle: Lifecycle
    projection: Projection
    reason: str


@dataclass(frozen=True)
class Savepoint:
    """What ``Draft.rollback`` restores: everything a pass may change."""

    changes: dict[str, Change]
    lane_tokens: int
    checkpoint: CheckpointData
    checkpoint_changed: bool
    archived_episodes: list[str]
    passes: list[str]


class Draft:
    def __init__(self, state: ContextState, mode: Mode):
        self.state = state
        self.mode = mode
        self.config = state.config
        self.preview = state.config.effective_preview_chars  # a computed property: read once
        self.budget = budget(state)
        self.target = self.config.compaction_target(self.budget)
        self.tokens_before = working_set_tokens(state)
        self.changes: dict[str, Change] = {}
        # a change moved an item into or out of the pinned lifecycle, which may move it to
        # another segment at the re-layout (layout.layout_key); never reset, a rollback included
        self.moves_pinned = False
        # The lane's cost, its omitted items (passes.cleanup_omitted), its tool outputs with an
        # address (pass 1 looks at nothing else) and the groups still shown (ledger.protected_groups):
        # kept with the plan cache (lane_facts.py), else found by one pass over the working set
        facts = kept_lane_facts(state)
        if facts is None:
            facts = LaneFacts()
            facts.add(state.items.values(), self.preview)
        self.omitted, self.tool_outputs = list(facts.omitted), list(facts.tool_outputs)
        self.lane_tokens = facts.tokens
        shown = facts.shown_groups
        self._lane: list[Item] | None = None
        self._calls: dict[str, str] | None = None  # _call_of's index
        self._kept_names: frozenset[str] | None = None
        self._planning_lines: list[str] | None = None  # checkpoint_text's lines while passes plan
        # passes._referenceable's last candidates and the protected groups they are for
        self.referenceable: tuple[set[int], list[Item]] | None = None
        # the configured window (ledger.protected_groups: a pure function of the state, which a
        # draft never changes): the cache-aware sweep restores it after an emergency narrowed it
        self.configured_protected = set(sorted(shown, reverse=True)[:self.config.protected_groups])
        self.protected_groups = self.configured_protected
        self.active_episodes = set(state.active_episodes)
        self.checkpoint = state.checkpoint.copy()
        self.summary = state.summary.copy()
        self.checkpoint_changed = False
        self.summary_changed = False
        self.archived_episodes: list[str] = []
        self.passes: list[str] = []
        self.new_texts: dict[str, str] = {}  # generated kind -> replacement text ("" removes it)
        self._generated_tokens: int | None = None
        self.set_text(Kind.EPISODES.value, markers_text(state))

    def set_text(self, kind: str, text: str) -> None:
        """Regenerate the item of ``kind`` with ``text`` ("" retires it) unless it already says that."""
        live = self.state.generated.get(kind)
        if (live.text_hash if live else None) != (text_hash(text) if text else None):
            self.new_texts[kind] = text
            self.invalidate()

    # --- reading the draft ---------------------------------------------------------------
    @property
    def lane(self) -> list[Item]:
        """The lane (ledger.lane_items: item order), for the passes after pass 1 (read when needed)."""
        if self._lane is None:
            self._lane = lane_items(self.state)
        return self._lane

    def view(self, item: Item) -> tuple[Lifecycle, Projection]:
        change = self.changes.get(item.id)
        return (change.lifecycle, change.projection) if change else (item.lifecycle, item.projection)

    def archived(self, item: Item) -> bool:
        return self.view(item)[0] == _ARCHIVED

    def protected(self, item: Item) -> bool:
        """Never evicted: pinned items (until pass 3), the newest groups, active episodes."""
        return (
            item.lifecycle == _PINNED
            or (item.group is not None and item.group in self.protected_groups)
            or (item.episode is not None and item.episode in self.active_episodes)
        )

    def episode_archived(self, episode_id: str | None) -> bool:
        episode = self.state.episodes.get(episode_id) if episode_id else None
        return episode is not None and (episode.status == EpisodeStatus.ARCHIVED or episode_id in self.archived_episodes)

    def total(self) -> int:
        if self._generated_tokens is None:  # regenerated texts are re-estimated only after a change
            self._generated_tokens = sum(self._generated_cost(kind) for kind in sorted(GENERATED_KINDS))
        return self.lane_tokens + self._generated_tokens

    def _generated_cost(self, kind: str) -> int:
        if kind == Kind.CHECKPOINT.value and self.checkpoint_changed:
            return estimate_tokens(self.checkpoint_text())
        if kind == Kind.SUMMARY.value and self.summary_changed:
            return estimate_tokens(summary_text(self.summary))
        if kind in self.new_texts:
            text = self.new_texts[kind]
            return estimate_tokens(text) if text else 0
        item_id = self.state.generated_id(kind)
        return cost(self.state, self.state.items[item_id]) if item_id else 0

    def checkpoint_cap(self) -> int:
        return min(self.config.checkpoint_tokens, max(150, self.config.base_budget // 10))

    def checkpoint_text(self, final: bool = False) -> str:
        """The checkpoint as the plan would write it. While passes plan (not ``final``), its key
        lines are those chosen at the first estimate: a choice per archived unit would cost a
        compaction several times its planning, and the lines' length barely moves."""
        config, cap = self.config, self.checkpoint_cap()
        lines: list[str] = []
        if config.checkpoint_lines:
            if final or self._planning_lines is None:
                lines = lines_to_show(self.checkpoint, cap, config.checkpoint_lines, self.kept_names())
                if self._planning_lines is None:
                    self._planning_lines = lines
            else:
                lines = self._planning_lines
        return checkpoint_text(self.checkpoint, cap, config.recall, lines, config.checkpoint_brief_references)

    def kept_names(self) -> frozenset[str]:
        """The names (Item.names) of the items no pass archives: the protected groups and the
        pinned items, which the request goes on showing. Found once per draft: the checkpoint's
        lines need not repeat them."""
        if self._kept_names is None:
            self._kept_names = frozenset(name for item in self.lane if item.names and self.protected(item)
                                         for name in item.names)
        return self._kept_names

    # --- changing the draft --------------------------------------------------------------
    def invalidate(self) -> None:
        """A generated text changed: re-estimate it at the next ``total``."""
        self._generated_tokens = None

    def move(self, item: Item, lifecycle: Lifecycle, projection: Projection, reason: str) -> None:
        self.move_all([(item, Change(lifecycle, projection, reason))])

    def move_all(self, moves: Iterable[tuple[Item, Change]], lane_limit: int | None = None) -> int:
        """Record each ``(item, change)`` in order, stopping before the first one when the lane
        costs ``lane_limit`` or less; returns how many were recorded. One loop, since a compaction
        moves thousands of items; a change is immutable, so one may serve many items."""
        changes, preview, lane_tokens, pinned = self.changes, self.preview, self.lane_tokens, _PINNED
        recorded = 0
        for item, change in moves:
            if lane_limit is not None and lane_tokens <= lane_limit:
                break
            recorded += 1
            item_id = item.id
            before = changes.pop(item_id, None)  # re-inserted: transitions list in the order decided
            old_lifecycle, old_projection = (before.lifecycle, before.projection) if before else (
                item.lifecycle, item.projection)
            tokens = item.tokens  # cost_of written out for measured projections (OMITTED costs 0)
            if old_lifecycle != _ARCHIVED and old_projection != _OMITTED:
                old = tokens.get(old_projection)
                lane_tokens -= old if old is not None else cost_of(item, old_projection, preview)
            lifecycle, projection = change.lifecycle, change.projection
            if lifecycle is pinned or old_lifecycle is pinned:
                self.moves_pinned = True
            if lifecycle != _ARCHIVED and projection != _OMITTED:
                new = tokens.get(projection)
                lane_tokens += new if new is not None else cost_of(item, projection, preview)
            changes[item_id] = change
        self.lane_tokens = lane_tokens
        return recorded

    def move_in_bulk(self, item_ids: list[str], changes: list[Change], savings: list[int],
                     lane_limit: int | None = None) -> int:
        """``move_all`` of the items ``item_ids`` with ``changes``, for items that each move to a
        cheaper shown projection, saving the lane ``savings`` (> 0): how many to move is found
        on the running sum of the savings, not item by item. Items the draft changed already
        take ``move_all`` (their change is re-inserted, and saves what it saves from there)."""
        if not self.changes.keys().isdisjoint(item_ids):
            items = self.state.items
            return self.move_all(zip(map(items.__getitem__, item_ids), changes, strict=True), lane_limit)
        count = len(item_ids)
        if lane_limit is not None:  # item k moves while the lane still costs more than the limit
            before = [0, *accumulate(savings)]  # saved before item k
            count = min(count, bisect_left(before, self.lane_tokens - lane_limit))
        if count:
            self.changes.update(zip(item_ids[:count], changes[:count], strict=True))
            self.lane_tokens -= sum(savings[:count])
        return count

    def archive(self, item: Item, reason: str) -> None:
        """Archive a lane item into the checkpoint (its address and digest are kept there)."""
        self.move(item, Lifecycle.ARCHIVED, Projection.OMITTED, reason)
        self.checkpoint.record_item(item, self.config.checkpoint_names, self._call_of(item),
                                    pool_lines=self.config.checkpoint_pool_lines if self.config.checkpoint_lines else 0)
        self.checkpoint_changed = True
        self.invalidate()

    def _call_of(self, item: Item) -> str:
        """The call a tool output answers, as its assistant turn's ``Item.calls`` says
        (``EngineConfig.checkpoint_calls``; "" when off, unknown or no tool output)."""
        if not self.config.checkpoint_calls or item.observation_id is None or len(item.tool_call_ids) != 1:
            return ""
        if self._calls is None:  # call id -> its line, from the lane's assistant turns (built once)
            self._calls = {call_id: line for turn in self.lane if turn.calls
                           for call_id, line in zip(turn.tool_call_ids, turn.calls, strict=False)}
        return self._calls.get(item.tool_call_ids[0], "")

    def roll_into_summary(self, item: Item) -> None:
        self.move(item, Lifecycle.ARCHIVED, Projection.OMITTED, "pass3:rolled-into-summary")
        self.summary.roll(item, self.config.summary_tokens)
        self.summary_changed = True
        self.invalidate()

    def savepoint(self) -> Savepoint:
        return Savepoint(dict(self.changes), self.lane_tokens, self.checkpoint.copy(), self.checkpoint_changed,
                         list(self.archived_episodes), list(self.passes))

    def rollback(self, point: Savepoint) -> None:
        """Undo every change made since ``point`` (the summary is left alone: no sweep rolls it)."""
        self.changes, self.lane_tokens = dict(point.changes), point.lane_tokens
        self.checkpoint, self.checkpoint_changed = point.checkpoint.copy(), point.checkpoint_changed
        self.archived_episodes, self.passes = list(point.archived_episodes), list(point.passes)
        self.referenceable = None  # an item may be shown again
        self.invalidate()

    # --- the plan ------------------------------------------------------------------------
    def to_plan(self) -> CompactionPlan:
        generated: list[GeneratedText] = []
        if self.mode in ("fallback", "llm") and announces(self.state):
            referenced, archived = notice_counts(self.changes)
            if referenced or archived or self.mode == "llm":  # a compaction that did something
                # the figures as the request will be (the notice's own few tokens aside)
                self.set_text(NOTICE, notice_text(referenced, archived, self.total(), self.budget, self.config.recall))
        if self.archived_episodes and self.config.concluded_in_markers:
            # an exploration archived now lists its conclusion in the checkpoint, not the markers
            self.set_text(Kind.EPISODES.value, markers_text(self.state, set(self.archived_episodes)))
        texts = dict(self.new_texts)
        if self.checkpoint_changed:
            texts[Kind.CHECKPOINT.value] = self.checkpoint_text(final=True)
        if self.summary_changed:
            texts[Kind.SUMMARY.value] = summary_text(self.summary)
        # consecutive changes alike make one run (pass 1 records one change object for many items)
        runs = [TransitionRun(change.lifecycle, change.projection, change.reason, list(map(_ITEM_ID, moves)))
                for change, moves in groupby(self.changes.items(), key=_CHANGE)]
        for kind in sorted(texts):
            text = texts[kind]
            live = self.state.generated_id(kind)
            if text:
                generated.append(GeneratedText(key=kind, role=self.config.generated_role, text=text,
                                               text_hash=text_hash(text),
                                               estimated_tokens=estimate_tokens(text)))
            elif live:  # nothing left to say (e.g. no active episode): retire the live item
                runs.append(TransitionRun(Lifecycle.ARCHIVED, Projection.OMITTED, f"{kind}:retired", [live]))
        after = self.total()
        return CompactionPlan(
            mode=self.mode, generation=self.state.generation, runs=runs,
            generated=generated,
            archived_episodes=list(self.archived_episodes),
            checkpoint=self.checkpoint if self.checkpoint_changed else None,
            summary=self.summary if self.summary_changed else None,
            tokens_before=self.tokens_before, tokens_after_estimate=after,
            target=self.target, budget=self.budget, passes_run=list(self.passes),
            reaches_target=after <= self.target, fits_budget=after <= self.budget,
        )
