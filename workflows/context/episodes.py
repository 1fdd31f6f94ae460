"""Episodes: the agent marks explorations (ending in a conclusion) and actions (naming the
explorations they depend on). The dependency keeps an investigation around until every
action that used it has been archived.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from .errors import EpisodeError
from .text import clip

if TYPE_CHECKING:
    from .ledger import ContextState

MAX_GOAL_CHARS = 500
MAX_CONCLUSION_CHARS = 1000  # "concise": a longer conclusion is refused, not truncated
_MARKER_GOAL_CHARS = 200


class EpisodeKind(StrEnum):
    EXPLORATION = "exploration"
    ACTION = "action"


class EpisodeStatus(StrEnum):
    ACTIVE = "active"
    COMPLETED = "completed"
    ABANDONED = "abandoned"  # still open when its task ended; archivable like a completed one
    ARCHIVED = "archived"


class Episode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: EpisodeKind
    goal: str
    depends_on: list[str] = Field(default_factory=list)
    status: EpisodeStatus = EpisodeStatus.ACTIVE
    conclusion: str | None = None
    task: str | None = None
    begun_after_seq: int = -1  # the newest item seq when it began

    @property
    def finished(self) -> bool:
        """Completed or abandoned: archivable once nothing depends on it any more."""
        return self.status in (EpisodeStatus.COMPLETED, EpisodeStatus.ABANDONED)


def begin_episode(
    state: ContextState, episode_id: str, kind: str, goal: str, depends_on: list[str] | tuple[str, ...] = ()
) -> Episode:
    """Open an episode; items added from now on belong to it (the innermost open one; rules 2
    allow one at a time)."""
    episode_kind, goal = check_begin(state, episode_id, kind, goal, depends_on)
    episode = Episode(
        id=episode_id, kind=episode_kind, goal=goal, depends_on=list(depends_on), task=state.current_task,
        begun_after_seq=state.last_seq,
    )
    state.episodes[episode_id] = episode
    state.active_episodes.append(episode_id)
    state.generation += 1
    return episode


def check_begin(
    state: ContextState, episode_id: str, kind: str, goal: str, depends_on: list[str] | tuple[str, ...] = ()
) -> tuple[EpisodeKind, str]:
    """Raise EpisodeError when ``begin_episode`` would refuse (the state is not touched);
    returns the kind and the goal it would record."""
    episode_kind = _kind(kind)
    if not episode_id.strip():
        raise EpisodeError("episode id is empty")
    if episode_id in state.episodes:
        raise EpisodeError(f"episode {episode_id!r} already exists", conflict=True)
    strict = state.config.rules_version >= 2
    if strict and state.active_episodes:
        raise EpisodeError(f"episode {state.active_episodes[-1]!r} is still active; end it before beginning "
                           f"{episode_id!r} (episodes do not nest)", conflict=True)
    if strict and episode_kind == EpisodeKind.EXPLORATION and depends_on:
        raise EpisodeError(f"exploration {episode_id!r} cannot depend on other episodes; only an action names "
                           "the explorations it depends on")
    goal = goal.strip()
    if not goal:
        raise EpisodeError(f"episode {episode_id!r} needs a goal")
    if len(goal) > MAX_GOAL_CHARS:
        raise EpisodeError(f"goal of episode {episode_id!r} has {len(goal)} characters; at most {MAX_GOAL_CHARS}")
    _check_dependencies(state, episode_id, episode_kind, list(depends_on))
    return episode_kind, goal


def _kind(kind: str) -> EpisodeKind:
    try:
        return EpisodeKind(kind)
    except ValueError:
        raise EpisodeError(f"episode kind must be 'exploration' or 'action', got {kind!r}") from None


def _check_dependencies(state: ContextState, episode_id: str, kind: EpisodeKind, deps: list[str]) -> None:
    """Dependencies must be earlier, finished explorations.

    Because a dependency must already be finished when the dependent begins, the graph
    is acyclic by construction: an edge always points to an older, closed episode.
    """
    if kind == EpisodeKind.ACTION and not deps:
        raise EpisodeError(f"action episode {episode_id!r} must name the completed explorations it depends on")
    if len(set(deps)) != len(deps):
        raise EpisodeError(f"episode {episode_id!r} lists a dependency twice: {deps}")
    for dep in deps:
        if dep == episode_id:
            raise EpisodeError(f"episode {episode_id!r} cannot depend on itself (dependencies must be acyclic)")
        other = state.episodes.get(dep)
        if other is None:
            raise EpisodeError(f"episode {episode_id!r} depends on unknown episode {dep!r}")
        if other.kind != EpisodeKind.EXPLORATION:
            raise EpisodeError(f"episode {episode_id!r} depends on {dep!r}, an action; only explorations qualify")
        if other.status == EpisodeStatus.ACTIVE:
            raise EpisodeError(f"episode {episode_id!r} depends on {dep!r}, which is still active; end it first", conflict=True)
        if other.status == EpisodeStatus.ABANDONED:
            raise EpisodeError(f"episode {episode_id!r} depends on {dep!r}, which was abandoned without a conclusion")


def end_episode(state: ContextState, episode_id: str, conclusion: str | None = None) -> Episode:
    """Close an active episode; an exploration must state a concise conclusion."""
    episode, text = check_end(state, episode_id, conclusion)
    episode.status = EpisodeStatus.COMPLETED
    episode.conclusion = text or None
    state.active_episodes.remove(episode_id)
    state.generation += 1
    return episode


def check_end(state: ContextState, episode_id: str, conclusion: str | None = None) -> tuple[Episode, str]:
    """Raise EpisodeError when ``end_episode`` would refuse (the state is not touched);
    returns the episode and the conclusion it would record."""
    episode = state.episodes.get(episode_id)
    if episode is None:
        raise EpisodeError(f"unknown episode {episode_id!r}")
    if episode.status != EpisodeStatus.ACTIVE:
        raise EpisodeError(f"episode {episode_id!r} is not active (it is {episode.status.value})", conflict=True)
    text = (conclusion or "").strip()
    if episode.kind == EpisodeKind.EXPLORATION and not text:
        raise EpisodeError(f"exploration {episode_id!r} must end with a concise conclusion")
    if episode.kind == EpisodeKind.ACTION and text and state.config.rules_version >= 2:
        raise EpisodeError(f"action {episode_id!r} ends without a conclusion: conclusions belong to explorations")
    if len(text) > MAX_CONCLUSION_CHARS:
        raise EpisodeError(
            f"conclusion of {episode_id!r} has {len(text)} characters; keep it concise (at most {MAX_CONCLUSION_CHARS})"
        )
    return episode, text


def abandon_task_episodes(state: ContextState, task_id: str | None) -> list[str]:
    """Close the task's still-open episodes as abandoned (its end leaves nobody to close them)."""
    abandoned = [e for e in state.active_episodes if state.episodes[e].task == task_id]
    for episode_id in abandoned:
        state.episodes[episode_id].status = EpisodeStatus.ABANDONED
        state.active_episodes.remove(episode_id)
    return abandoned


def dependents(state: ContextState) -> dict[str, list[str]]:
    """For each episode, the episodes that depend on it (in begin order)."""
    result: dict[str, list[str]] = {}
    for episode in state.episodes.values():
        for dep in episode.depends_on:
            result.setdefault(dep, []).append(episode.id)
    return result


MAX_CONCLUDED_LISTED = 6  # concluded explorations the markers list (newest first)
_MARKER_CONCLUSION_CHARS = 400


def markers_text(state: ContextState, archiving: frozenset[str] | set[str] = frozenset()) -> str:
    """Stable-segment markers (bounded); "" when there is nothing to mark: the active
    episodes, and (``EngineConfig.concluded_in_markers``) the explorations that ended with a
    conclusion but are not archived yet (``archiving``: episodes being archived now), so a
    conclusion stays in the request from the moment its exploration ends: the exploration's
    own traffic may leave the request at a task end, and an archived exploration's
    conclusion is in the checkpoint instead."""
    lines: list[str] = []
    if state.active_episodes:
        lines.append("[Active episodes] Work in progress; never evicted while active:")
        for episode_id in state.active_episodes[:12]:  # at most 12 episodes listed
            episode = state.episodes[episode_id]
            deps = f"; depends on {', '.join(episode.depends_on)}" if episode.depends_on else ""
            lines.append(f"- {episode.id} ({episode.kind.value}{deps}): {clip(episode.goal, _MARKER_GOAL_CHARS)}")
    if state.config.concluded_in_markers:
        concluded = [e for e in state.episodes.values()
                     if e.kind == EpisodeKind.EXPLORATION and e.status == EpisodeStatus.COMPLETED and e.conclusion
                     and e.id not in archiving]
        if concluded:
            lines.append("[Concluded explorations] Conclusions written by the agent:")
            for episode in reversed(concluded[-MAX_CONCLUDED_LISTED:]):
                lines.append(clip(f"- {episode.id}: {clip(episode.goal, _MARKER_GOAL_CHARS)} => {episode.conclusion}",
                                  _MARKER_CONCLUSION_CHARS))
            if len(concluded) > MAX_CONCLUDED_LISTED:
                lines.append(f"  ({len(concluded) - MAX_CONCLUDED_LISTED} older concluded exploration(s) not listed)")
    return "\n".join(lines)
