"""The deterministic eviction passes, run on a ``Draft`` in order until the target is met.

0. cleanup: tool traffic omitted at a task end leaves the state (into the checkpoint);
1. completed tool exchanges -> reference projection: writes, then reads, then runs and
   errors, oldest first within a class;
2. completed episodes archived, actions before explorations; an exploration only once
   every episode depending on it is archived. Then, for agents that never mark episodes,
   the oldest exchange groups outside any unarchived episode are archived;
   Then (``bound_active_episodes``) an active episode is bounded: its oldest completed outputs
   outside the protected groups become references; it is never archived;
3. pinned user messages and notes roll, oldest first, into the one rolling summary,
   except the two most recent user messages. When pinned content alone still overflows the
   budget (``roll_kept_when_unfit``), those roll too, all but the current submission.
Protected throughout: the newest ``protected_groups`` exchange groups (which include the
current one) and every item of an active episode from archiving.

Once the target is met, a cache-aware sweep (``EngineConfig.cache_aware_sweep``) takes the
passes further, but only inside the part of the next request that the compaction re-bills
anyway (see ``prefix.py``): there, more depth costs no cache hit and postpones the next
compaction, which would re-bill the retained history again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .budget import cost_of
from .checkpoint import EpisodeNote
from .draft import Change, Draft
from .episodes import Episode, EpisodeKind, dependents, markers_text
from .items import Item, Kind, Lifecycle, Projection, ToolClass
from .ledger import ContextState, protected_groups
from .prefix import rebilled, regenerated_key

# Eviction priority: writes first (their effect is in the repository), runs and errors last.
CLASS_PRIORITY = {ToolClass.WRITE: 0, ToolClass.READ: 1, ToolClass.RUN: 2, ToolClass.ERROR: 2}
KEPT_RECENT_USER_MESSAGES = 2
_REFERENCEABLE = (Projection.FULL, Projection.COMPACT)
# what pass 1 and the sweep record (Draft.move_all: one immutable change serves every item);
# an output without a class is evicted as a run
_PASS1_CHANGES: dict[ToolClass | None, Change] = {
    tool_class: Change(Lifecycle.RETAINED, Projection.REFERENCE, f"pass1:{tool_class.value}→reference")
    for tool_class in ToolClass}
_PASS1_CHANGES[None] = _PASS1_CHANGES[ToolClass.RUN]
_PRIORITY: dict[ToolClass | None, int] = {tool_class: CLASS_PRIORITY[tool_class or ToolClass.RUN]
                                          for tool_class in (*ToolClass, None)}
_SWEPT = Change(Lifecycle.RETAINED, Projection.REFERENCE, "pass1:cache-sweep→reference")
_ACTIVE_REFERENCED = Change(Lifecycle.RETAINED, Projection.REFERENCE, "pass2-active:older-output→reference")

Protect = Callable[[Item], bool]


def _nothing(item: Item) -> bool:
    return False


def run_fallback_passes(draft: Draft) -> None:
    cleanup_omitted(draft)
    _run_passes(draft)
    if draft.config.cache_aware_sweep:
        sweep_rebilled(draft)


def _run_passes(draft: Draft) -> None:
    bound_active = draft.config.bound_active_episodes and bool(draft.active_episodes)
    passes = (
        ("pass1", reference_tool_outputs),
        ("pass2", archive_episodes),
        ("pass2-groups", archive_groups),
        *((("pass2-active", reference_active_outputs),) if bound_active else ()),
        ("pass3", roll_pinned_into_summary),
    )
    for name, run in passes:
        if draft.total() <= draft.target:
            return
        draft.passes.append(name)
        run(draft)
    if draft.total() > draft.budget and draft.config.protected_groups > 1:
        # The newest groups alone overflow the budget (e.g. a turn that wrote a whole file):
        # a request that fits beats a full-fidelity window, so protect only the newest group.
        draft.protected_groups = protected_groups(draft.state, 1)
        draft.passes.append("emergency:newest-group-only")
        reference_tool_outputs(draft)
        archive_groups(draft)
        if bound_active:
            reference_active_outputs(draft)
    if draft.total() > draft.budget and draft.config.roll_kept_when_unfit:
        roll_kept_user_messages(draft)


def _met(draft: Draft, everything: bool = False) -> bool:
    """The target is met (never, when archiving everything eligible)."""
    return not everything and draft.total() <= draft.target


def cleanup_omitted(draft: Draft) -> None:
    """Tool traffic omitted at a task end is already out of every request; archiving it
    bounds the state and puts its addresses in the checkpoint."""
    for item in draft.omitted:  # the lane's omitted items, in lane order (Draft)
        if item.lifecycle != Lifecycle.PINNED and not draft.archived(item):
            draft.archive(item, "archived:omitted-at-task-end")


class Candidates(NamedTuple):
    """``_referenceable``'s finds, in item order, as parallel lists: read while each item is at
    hand, since a compaction may look at thousands and a second read of each costs as much."""

    items: list[Item]
    ids: list[str]
    savings: list[int]  # what referencing each one saves (> 0)
    seqs: list[int]
    classes: list[ToolClass | None]


def _referenceable(draft: Draft) -> Candidates:
    """Pass-1 candidates: completed tool outputs outside the protected window, still shown in
    full or compact, whose reference is cheaper (a tiny output gains nothing).

    Passes only ever move items to a reference or out, so an item that is no candidate
    stays none for as long as the protected groups are the same: a second call looks only at
    the candidates of the first (less those pass 1 moved: ``reference_tool_outputs`` keeps the
    rest); the first looks only at the lane's tool outputs with an
    address (``Draft.tool_outputs``). (``Draft.protected`` and ``Draft.view`` written out:
    the first call runs over every tool output of the lane.)"""
    found = Candidates([], [], [], [], [])
    out, ids, savings, seqs, classes = found
    preview, changes = draft.preview, draft.changes
    groups, active = draft.protected_groups, draft.active_episodes
    pinned, reference = Lifecycle.PINNED, Projection.REFERENCE
    last = draft.referenceable
    for item in last[1] if last is not None and last[0] is groups else draft.tool_outputs:
        item_id = item.id
        change = changes.get(item_id)  # first: a repeated call meets mostly items referenced since
        projection = change.projection if change else item.projection
        if projection not in _REFERENCEABLE:
            continue
        if item.lifecycle == pinned or (item.group is not None and item.group in groups) or (
                item.episode is not None and item.episode in active):
            continue
        tokens = item.tokens  # cost_of written out for measured projections
        reference_cost, cost = tokens.get(reference), tokens.get(projection)
        if reference_cost is None:
            reference_cost = cost_of(item, reference, preview)
        if cost is None:
            cost = cost_of(item, projection, preview)
        if reference_cost < cost:
            out.append(item)
            ids.append(item_id)
            savings.append(cost - reference_cost)
            seqs.append(item.seq)
            classes.append(item.tool_class)
    draft.referenceable = (groups, out)  # for the next call (no caller changes the lists)
    return found


def reference_tool_outputs(draft: Draft) -> None:
    """Pass 1: completed tool outputs outside the protected window become references, by
    (class priority, seq), until the target is met."""
    found = _referenceable(draft)
    # the order by (class priority, seq): two stable sorts of the candidates' indices (C-level keys)
    order = sorted(range(len(found.ids)), key=found.seqs.__getitem__)
    order.sort(key=list(map(_PRIORITY.__getitem__, found.classes)).__getitem__)
    generated = draft.total() - draft.lane_tokens  # a move changes no generated text
    moved = draft.move_in_bulk(
        list(map(found.ids.__getitem__, order)),
        list(map(_PASS1_CHANGES.__getitem__, map(found.classes.__getitem__, order))),
        list(map(found.savings.__getitem__, order)), lane_limit=draft.target - generated)
    # the next scan (the sweep's) needs to look only at those left, in seq order: the others are references now
    if draft.referenceable is not None and draft.referenceable[0] is draft.protected_groups and moved:
        left = sorted(order[moved:], key=found.seqs.__getitem__)
        draft.referenceable = (draft.protected_groups, list(map(found.items.__getitem__, left)))


def reference_active_outputs(draft: Draft) -> None:
    """The bounded active episode: once passes 1-2 leave the working set over the target, the
    completed tool outputs of active episodes outside the protected groups become references,
    oldest first, until the target is met. The episode is never archived: its goal stays in
    the episode markers, its newest exchanges (the protected groups) in full, and each older
    output's exact text at the observation address its reference shows."""
    active, groups, preview = draft.active_episodes, draft.protected_groups, draft.preview
    reference = Projection.REFERENCE
    moves = []
    for item in draft.tool_outputs:  # in item order: oldest first
        if item.episode not in active or item.lifecycle == Lifecycle.PINNED or (
                item.group is not None and item.group in groups):
            continue
        lifecycle, projection = draft.view(item)
        if lifecycle != Lifecycle.ARCHIVED and projection in _REFERENCEABLE and (
                cost_of(item, reference, preview) < cost_of(item, projection, preview)):
            moves.append((item, _ACTIVE_REFERENCED))
    draft.move_all(moves, lane_limit=draft.target - (draft.total() - draft.lane_tokens))


def sweep_rebilled(draft: Draft) -> None:
    """Cache-aware sweep, after the passes: whatever the compaction re-bills anyway (every
    request entry from its first change on, ``prefix.rebilled``) is reduced as far as
    passes 1 and 2 may reduce it.

    - Pass 2, when the first change lies at or before the start of history (the passes
      rewrote the checkpoint, or changed the stable segment): then the whole history is
      re-billed, so every completed episode and old exchange group that pass 2 may archive
      goes into the checkpoint. Otherwise archiving would rewrite the checkpoint that opens
      the history and move the first change earlier, so pass 2 is left alone.
    - Pass 1: every remaining candidate after the first change becomes a reference.
    The passes' rules hold: the configured newest groups (even after an emergency narrowed
    them) and active episodes are protected, an exploration goes only after the actions
    depending on it, archived outputs stay recallable through the checkpoint. Nothing
    before the first change is touched, so the cached prefix stays as long as without it:
    an archive sweep that would drop an exploration from the episode markers (stable
    segment) ahead of the first change is undone, as is one that would make the request
    larger.
    """
    draft.protected_groups = draft.configured_protected
    rebill = rebilled(draft)
    if rebill.from_history_start:
        reason = "pass2:cache-sweep→archived"
        before, point, markers = draft.total(), draft.savepoint(), _markers_planned(draft)
        archive_episodes(draft, everything=True, reason=reason)
        archive_groups(draft, everything=True, reason=reason)
        if draft.config.sweep_never_grows and draft.total() > before:  # the checkpoint outgrew what left
            draft.rollback(point)
        elif draft.config.sweep_keeps_markers and _markers_planned(draft) != markers and rebill.from_key is not None \
                and regenerated_key(draft, Kind.EPISODES.value) < rebill.from_key:
            draft.rollback(point)  # an archived exploration would leave the markers, before the first change
        elif any(change.reason == reason for change in draft.changes.values()):
            draft.passes.append("pass2:cache-sweep")
    swept = rebill.covered(_referenceable(draft).items)
    if swept:
        draft.passes.append("pass1:cache-sweep")
    draft.move_all([(item, _SWEPT) for item in swept])


def _markers_planned(draft: Draft) -> str | None:
    """The markers text the plan will carry (``Draft.to_plan`` drops archived explorations
    from their concluded list); None when archiving cannot change them."""
    if not draft.config.concluded_in_markers:
        return None
    return markers_text(draft.state, set(draft.archived_episodes))


def archive_episodes(draft: Draft, everything: bool = False, protect: Protect = _nothing,
                     reason: str = "pass2:episode-archived") -> None:
    """Pass 2: archive finished episodes, actions first, each exploration after its dependents.

    Stops at the target, unless ``everything`` eligible is to go (explicit condensation).
    """
    members: dict[str, list[Item]] = {}
    for item in draft.lane:
        if item.episode is not None and item.lifecycle != Lifecycle.PINNED and not draft.archived(item):
            members.setdefault(item.episode, []).append(item)
    finished = sorted(
        (e for e in draft.state.episodes.values() if e.finished),
        key=lambda e: (e.kind != EpisodeKind.ACTION, e.begun_after_seq, e.id),
    )
    needed_by = dependents(draft.state)
    progress = True
    while progress:  # repeat: archiving one episode can free an exploration it depended on
        progress = False
        for episode in finished:
            if _met(draft, everything):
                return
            if episode.id in draft.archived_episodes:
                continue
            if not all(draft.episode_archived(d) for d in needed_by.get(episode.id, [])):
                continue  # an episode depending on it is still in the working set
            items = members.get(episode.id, [])
            if any(draft.protected(i) or protect(i) for i in items):
                continue
            _archive_episode(draft, episode, items, reason)
            progress = True


def _archive_episode(draft: Draft, episode: Episode, items: list[Item], reason: str) -> None:
    for item in items:
        draft.archive(item, reason)
    obs_ids = [i.observation_id for i in items if i.observation_id]
    draft.checkpoint.record_episode(EpisodeNote(
        id=episode.id, kind=episode.kind.value, goal=episode.goal,
        conclusion=episode.conclusion or "(no conclusion)", obs_ids=obs_ids[-6:],
    ))
    draft.archived_episodes.append(episode.id)
    draft.checkpoint_changed = True
    draft.invalidate()


def archive_groups(draft: Draft, everything: bool = False, protect: Protect = _nothing,
                   reason: str = "pass2:group-archived") -> None:
    """Archive the oldest exchange groups that belong to no unarchived episode.

    Sessions whose agent never marks episodes are handled here: their old assistant turns
    and tool results go into the checkpoint (addresses kept), oldest group first.
    """
    units: dict[int, list[Item]] = {}
    blocked: set[int] = set()
    for item in draft.lane:
        if draft.archived(item) or item.lifecycle == Lifecycle.PINNED:
            continue
        key = item.group if item.group is not None else item.seq
        in_episode = item.episode in draft.state.episodes and not draft.episode_archived(item.episode)
        if in_episode or draft.protected(item) or protect(item):
            blocked.add(key)  # a group is archived whole or not at all
        units.setdefault(key, []).append(item)
    for key in sorted(units):
        if _met(draft, everything):
            return
        if key in blocked:
            continue
        for item in units[key]:
            draft.archive(item, reason)


def kept_user_messages(draft: Draft) -> set[str]:
    """The user messages pass 3 and task assembly keep verbatim: the current submission (the
    newest) and the two most recent before it (rules 1 counted the current one among the two);
    with ``keep_task_statement``, also the current task's first."""
    users = [i for i in draft.lane if i.kind == Kind.USER.value and i.lifecycle == Lifecycle.PINNED]
    kept = KEPT_RECENT_USER_MESSAGES + (1 if draft.config.rules_version >= 2 else 0)
    ids = {i.id for i in users[-kept:]}
    task = draft.state.current_task
    if draft.config.keep_task_statement and task is not None:
        statement = next((i.id for i in users if i.task == task), None)
        if statement is not None:
            ids.add(statement)
    return ids


def old_submissions(state: ContextState) -> list[Item]:
    """What task assembly rolls into the rolling summary: the user messages of earlier tasks
    older than the two most recent (the current task's stay: its replies to the agent are
    part of the work in progress)."""
    current = state.current_task
    active = set(state.active_episodes)
    earlier = [i for i in state.items.values() if i.kind == Kind.USER.value and i.lifecycle == Lifecycle.PINNED
               and (current is None or i.task != current)]
    return [i for i in earlier[:-KEPT_RECENT_USER_MESSAGES] if i.episode not in active]


def roll_old_submissions(draft: Draft, items: list[Item]) -> None:
    """Task assembly: ``items`` (``old_submissions``) roll into the rolling summary, whatever the pressure."""
    for item in items:
        if not draft.archived(item):
            draft.roll_into_summary(item)


def roll_kept_user_messages(draft: Draft) -> None:
    """The last step before a request is refused as unfit: pinned content alone overflows the
    budget, so the user messages pass 3 keeps verbatim roll into the summary too, oldest first,
    until the working set fits; the current submission (the newest) and those of an active
    episode stay."""
    users = [i for i in draft.lane if i.kind == Kind.USER.value and i.lifecycle == Lifecycle.PINNED
             and not draft.archived(i)]
    rolled = False
    for item in users[:-1]:
        if draft.total() <= draft.budget:
            break
        if item.episode not in draft.active_episodes:
            draft.roll_into_summary(item)
            rolled = True
    if rolled:
        draft.passes.append("pass3:kept-users-rolled")


def roll_pinned_into_summary(draft: Draft) -> None:
    """Pass 3: pinned user messages and notes roll oldest-first into the rolling summary."""
    kept = kept_user_messages(draft)
    for item in draft.lane:
        if _met(draft):
            return
        if item.kind not in (Kind.USER.value, Kind.NOTE.value) or item.lifecycle != Lifecycle.PINNED:
            continue
        if item.id in kept or draft.archived(item) or item.episode in draft.active_episodes:
            continue
        draft.roll_into_summary(item)
