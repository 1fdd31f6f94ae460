"""The deterministic checkpoint: what the fallback keeps of archived history.

Archived items leave the working set (and workflow state); the checkpoint keeps, bounded,
the range of archived history, completed episode conclusions with their observation
addresses, recent anchors and the most recent observation references. Its text is a pure
function of this data, so the workflow and the replay generate identical bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import accumulate, chain, islice

from pydantic import BaseModel, ConfigDict, Field

from .items import Item, Kind
from .names import covering_lines, line_names
from .observations import SCHEME, RecallStyle
from .text import chars_to_tokens, clip

# How the checkpoint says to read archived output back (observations.recall_hint for placeholders).
_RECALL_SENTENCES: dict[str, str] = {
    "tool": "recall exact tool output with recall_observation(address, offset, limit) on the listed addresses.",
    "endpoint": "read exact tool output for the listed addresses from the Context Lanes API: "
                "GET /v1/sessions/{session}/observations/{obs-id}?offset=&limit=",
}

MAX_OBSERVATIONS = 24
MAX_EPISODES = 10
MAX_ANCHORS = 4
MAX_EPISODE_OBSERVATIONS = 6
LINE_CHARS = 200
CALL_CHARS = 80  # of a call beside an observation address (the rest of the line: its digest)
NAME_CHARS = 80
NAMES_SHED = 8  # names are left out in steps of this many when the checkpoint is over its cap
# Lines of archived items kept to choose the shown ones from (most recent first), by default
# (EngineConfig.checkpoint_pool_lines): bounded because workflow state holds metadata only.
POOL_LINES = 96
# A shown line costs about this many tokens (LINE_CHARS of activities/item_names.py and
# its "- "); lines never take the first ADDRESS_ROOM_TOKENS of the cap, which the header, the
# anchors and a few recallable addresses need: under a small budget (8,000 tokens) more lines
# would push out the addresses a recall reads (measured: bench/results/README.md).
LINE_TOKENS = 30
ADDRESS_ROOM_TOKENS = 480
# What a checkpoint over its cap leaves out first: each list in turn down to its floor (the
# least valuable first: old observation references, then old names, lines, anchors, episodes)
SHED_ORDER = [("observations", 4), ("names", 2 * NAMES_SHED), ("lines", 4), ("anchors", 0), ("episodes", 1),
              ("observations", 0), ("names", 0), ("lines", 0), ("episodes", 0)]


class ObservationNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    obs_id: str
    tool: str
    digest: str
    seq: int
    chars: int
    call: str = ""  # the call whose output it is (EngineConfig.checkpoint_calls)


class EpisodeNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str
    goal: str
    conclusion: str
    obs_ids: list[str] = Field(default_factory=list)


class CheckpointData(BaseModel):
    """Bounded digest of everything archived so far (most recent first in every list)."""

    model_config = ConfigDict(extra="forbid")

    first_seq: int | None = None
    last_seq: int | None = None
    archived_items: int = 0
    episodes: list[EpisodeNote] = Field(default_factory=list)
    observations: list[ObservationNote] = Field(default_factory=list)
    anchors: list[str] = Field(default_factory=list)
    # paths and code symbols archived items mentioned (Item.names), most recent first
    names: list[str] = Field(default_factory=list)
    # key lines of archived items (Item.lines), most recent first, at most the pool's size
    lines: list[str] = Field(default_factory=list)
    dropped_observations: int = 0  # older references no longer listed (still recallable)
    dropped_episodes: int = 0

    def copy(self) -> CheckpointData:  # type: ignore[override]  # the lists copied, unlike BaseModel.copy
        """An independent copy: the lists are copied, their notes are never mutated."""
        return self.model_copy(update={"episodes": list(self.episodes), "observations": list(self.observations),
                                       "anchors": list(self.anchors), "names": list(self.names),
                                       "lines": list(self.lines)})

    def covers(self, seq: int) -> bool:
        return self.first_seq is not None and self.first_seq <= seq <= (self.last_seq or seq)

    def record_item(self, item: Item, max_names: int = 0, call: str = "", pool_lines: int = 0) -> None:
        """Account for one archived lane item (its address and prose digest, if any, and up to
        ``max_names`` of the names archived items mentioned, the most recent first; ``call``:
        the call whose output it is; ``pool_lines``: its key lines join the pool the shown
        lines are chosen from, which keeps that many)."""
        self.first_seq = item.seq if self.first_seq is None else min(self.first_seq, item.seq)
        self.last_seq = item.seq if self.last_seq is None else max(self.last_seq, item.seq)
        self.archived_items += 1
        if item.observation_id:
            note = ObservationNote(
                obs_id=item.observation_id, tool=item.tool_name or item.kind, digest=clip(item.digest, 120),
                seq=item.seq, chars=item.size_chars, call=clip(call, CALL_CHARS),
            )
            self.observations.append(note)
            self.observations.sort(key=lambda n: (-n.seq, n.obs_id))
            if len(self.observations) > MAX_OBSERVATIONS:
                self.dropped_observations += len(self.observations) - MAX_OBSERVATIONS
                del self.observations[MAX_OBSERVATIONS:]
        elif item.kind == Kind.ASSISTANT.value and item.digest:
            self.anchors.insert(0, f"seq {item.seq} assistant: {clip(item.digest, 160)}")
            self.anchors.sort(key=_anchor_seq, reverse=True)
            del self.anchors[MAX_ANCHORS:]
        if max_names and item.names:
            self._record_names(item.names, max_names)
        if pool_lines and item.lines:
            merged = dict.fromkeys(chain(item.lines, self.lines))  # a line archived again moves up
            self.lines = list(islice(merged, pool_lines))

    def _record_names(self, names: list[str], max_names: int) -> None:
        # the item's names in their order, then the earlier ones not among them (dict: C-level dedupe)
        merged = dict.fromkeys(chain((name[:NAME_CHARS] for name in names), self.names))
        self.names = list(islice(merged, max_names))

    def record_episode(self, note: EpisodeNote) -> None:
        self.episodes.insert(0, note)
        if len(self.episodes) > MAX_EPISODES:
            self.dropped_episodes += len(self.episodes) - MAX_EPISODES
            del self.episodes[MAX_EPISODES:]


def chosen_lines(pool: list[str], count: int, shown: frozenset[str] = frozenset()) -> list[str]:
    """Up to ``count`` lines of ``pool`` (most recent first), chosen greedily: each time the
    line whose names not yet covered weigh most, a name weighing as many pool lines as carry it
    (what the archived turns kept coming back to). Names in ``shown`` (what the request still
    shows) and names an earlier chosen line carries count nothing; a line that adds no name is
    never chosen. Returned in pool order. Deterministic: ties go to the more recent line."""
    if not count or not pool:
        return []
    names = [line_names(line) - shown for line in pool]
    weight: dict[str, int] = {}
    for carried in names:
        for name in carried:
            weight[name] = weight.get(name, 0) + 1
    return [pool[index] for index in covering_lines(names, weight=weight, count=count)]


def _anchor_seq(anchor: str) -> int:
    return int(anchor.split(" ", 2)[1])


def lines_to_show(data: CheckpointData, cap_tokens: int, lines: int, shown: frozenset[str] = frozenset()) -> list[str]:
    """The key lines a checkpoint under ``cap_tokens`` shows: :func:`chosen_lines` of the pool,
    at most ``lines``, fewer under a small cap (ADDRESS_ROOM_TOKENS)."""
    return chosen_lines(data.lines, min(lines, max(0, (cap_tokens - ADDRESS_ROOM_TOKENS) // LINE_TOKENS)), shown)


def checkpoint_text(data: CheckpointData, cap_tokens: int, recall: RecallStyle = "tool",
                    shown_lines: Sequence[str] = (), brief_references: bool = False) -> str:
    """The checkpoint message; older list entries are left out until it fits ``cap_tokens``
    (``shown_lines``: key lines of archived items, as :func:`lines_to_show` chose them;
    ``brief_references``: an output's reference shows its call and size, not its digest, when
    its call is known).

    Every line is rendered once; shedding works on line lengths (this runs once per
    archived unit while a compaction is planned, so it must stay cheap).
    """
    episodes = [_episode_lines(note) for note in data.episodes]
    anchors = [f"- {a}" for a in data.anchors]
    observations = [_observation_line(note, brief_references) for note in data.observations]
    key_lines = [f"- {line}" for line in shown_lines]
    keep = {"observations": len(observations), "anchors": len(anchors), "episodes": len(episodes),
            "names": len(data.names), "lines": len(key_lines)}
    hint = _RECALL_SENTENCES[recall]
    length = _Length(data, episodes, anchors, observations, hint, key_lines)

    def too_long() -> bool:
        return chars_to_tokens(length(keep)) > cap_tokens

    if too_long():
        for name, floor in SHED_ORDER:  # each list in turn, down to its floor, while the text is too long
            if _shed(keep, name, floor, NAMES_SHED if name == "names" else 1, too_long):
                break
    return "\n".join(_lines(data, episodes, anchors, observations, keep, hint, key_lines))


def _shed(keep: dict[str, int], name: str, floor: int, step: int, too_long: Callable[[], bool]) -> bool:
    """Leave out ``step`` entries of list ``name`` at a time, the text being too long, while it
    is and more than ``floor`` are kept (as a loop of single steps would); True: it fits now.
    The first step may lengthen the text (its "not listed" line appears); from then on each
    step shortens it, so the first step count that fits is found by bisection."""
    start = keep[name]
    if start <= floor:
        return False
    last = -(-(start - floor) // step)  # steps until at or below the floor

    def fits_after(steps: int) -> bool:
        keep[name] = max(0, start - step * steps)
        return not too_long()

    if fits_after(1):
        return True
    if last == 1:
        return False
    low, high = 2, last  # the first step count that fits, else the last step
    while low < high:
        middle = (low + high) // 2
        if fits_after(middle):
            high = middle
        else:
            low = middle + 1
    return fits_after(low)


def _episode_lines(note: EpisodeNote) -> list[str]:
    lines = [clip(f"- {note.id} ({note.kind}): {note.goal} => {note.conclusion}", 2 * LINE_CHARS)]
    addresses = " ".join(SCHEME + obs for obs in note.obs_ids[:MAX_EPISODE_OBSERVATIONS])
    if addresses:
        lines.append(f"  observations: {addresses}")
    return lines


def _observation_line(note: ObservationNote, brief: bool = False) -> str:
    return _observation_line_of(note.obs_id, note.tool, note.digest, note.seq, note.chars, note.call, brief)


@lru_cache(maxsize=4096)  # a compaction renders the same references once per archived unit
def _observation_line_of(obs_id: str, tool: str, digest: str, seq: int, chars: int, call: str = "",
                         brief: bool = False) -> str:
    if call and brief:  # the call says what the output holds: "Read src/app.py (1200 chars)"
        return clip(f"- {SCHEME}{obs_id} — {call} ({chars} chars)", LINE_CHARS)
    what = f" {digest}" if digest else ""
    if call:  # the call names the tool: "Read src/app.py → <digest>"
        return clip(f"- {SCHEME}{obs_id} — {call} →{what} (seq {seq}, {chars} chars)", LINE_CHARS)
    return clip(f"- {SCHEME}{obs_id} — {tool}{what} (seq {seq}, {chars} chars)", LINE_CHARS)


def _prefix_sums(sizes: Iterable[int]) -> list[int]:
    return list(accumulate(sizes, initial=0))


class _Length:
    """``len("\n".join(_lines(...)))`` for any ``keep``, by arithmetic on line lengths: the
    shedding loop asks once per entry left out, and a compaction asks once per archived unit."""

    def __init__(self, data: CheckpointData, episodes: list[list[str]], anchors: list[str], observations: list[str],
                 hint: str, key_lines: list[str]) -> None:
        self.data = data
        head = _lines(data, [], [], [], {"episodes": 0, "anchors": 0, "names": 0, "observations": 0, "lines": 0}, hint,
                      [])
        self.head = sum(len(line) + 1 for line in head)  # every line counts its newline; the last has none
        self.episodes = _prefix_sums(sum(map(len, block)) + len(block) for block in episodes)
        self.anchors = _prefix_sums(map(len, anchors))  # + 1 per line: added in __call__
        self.names = _prefix_sums(map(len, data.names))  # + a separator per name: added in __call__
        self.observations = _prefix_sums(map(len, observations))
        self.key_lines = _prefix_sums(map(len, key_lines))  # + 1 per line: added in __call__

    def __call__(self, keep: dict[str, int]) -> int:
        data, total = self.data, self.head
        if len(self.episodes) > 1:
            total += len(EPISODES_HEADER) + 1 + self.episodes[keep["episodes"]]
            hidden = len(self.episodes) - 1 - keep["episodes"] + data.dropped_episodes
            total += len(_episodes_hidden(hidden)) + 1 if hidden else 0
        if keep["anchors"]:
            total += len(ANCHORS_HEADER) + 1 + self.anchors[keep["anchors"]] + keep["anchors"]
        if keep["lines"]:
            total += len(LINES_HEADER) + 1 + self.key_lines[keep["lines"]] + keep["lines"]
        if keep["names"]:
            total += len(NAMES_HEADER) + self.names[keep["names"]] + len(NAMES_SEPARATOR) * (keep["names"] - 1) + 1
        if len(self.observations) > 1:
            total += len(OBSERVATIONS_HEADER) + 1 + self.observations[keep["observations"]] + keep["observations"]
            hidden = len(self.observations) - 1 - keep["observations"] + data.dropped_observations
            total += len(_observations_hidden(hidden)) + 1 if hidden else 0
        return total - 1


EPISODES_HEADER = "Completed episodes (conclusions written by the agent):"
ANCHORS_HEADER = "Recent anchors:"
LINES_HEADER = "Lines of archived output and turns (verbatim, whitespace collapsed; recall an address for the rest):"
NAMES_HEADER = "Files and symbols the archived items mentioned (most recent first): "
NAMES_SEPARATOR = ", "
OBSERVATIONS_HEADER = "Observation references (most recent first):"


def _episodes_hidden(count: int) -> str:
    return f"  ({count} older episode(s) not listed)"


def _observations_hidden(count: int) -> str:
    return f"  ({count} older observation(s) not listed; their exact output is still stored)"


def _lines(data: CheckpointData, episodes: list[list[str]], anchors: list[str], observations: list[str],
           keep: dict[str, int], hint: str, key_lines: list[str]) -> list[str]:
    lines = [
        "[Context checkpoint] Earlier history was archived to keep this context bounded; nothing was deleted.",
        f"Archived: items seq {data.first_seq}–{data.last_seq} ({data.archived_items} items) are out of this "
        f"context; {hint}",
    ]
    if episodes:
        lines.append(EPISODES_HEADER)
        for block in episodes[: keep["episodes"]]:
            lines.extend(block)
        hidden = len(episodes) - keep["episodes"] + data.dropped_episodes
        if hidden:
            lines.append(_episodes_hidden(hidden))
    if keep["anchors"]:
        lines.append(ANCHORS_HEADER)
        lines.extend(anchors[: keep["anchors"]])
    if keep["lines"]:
        lines.append(LINES_HEADER)
        lines.extend(key_lines[: keep["lines"]])
    if keep["names"]:
        lines.append(NAMES_HEADER + NAMES_SEPARATOR.join(data.names[: keep["names"]]))
    if observations:
        lines.append(OBSERVATIONS_HEADER)
        lines.extend(observations[: keep["observations"]])
        hidden = len(observations) - keep["observations"] + data.dropped_observations
        if hidden:
            lines.append(_observations_hidden(hidden))
    return lines
