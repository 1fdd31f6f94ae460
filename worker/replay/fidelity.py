"""The fidelity counter: does the request a policy sends still show what the agent used next?

For every recorded model call *k*, the recorded answer *k* (its prose and tool-call
arguments: the *action*) names things -- paths, symbols, numbers, quoted strings (see
:func:`named_things`). A name counts at step *k* when it occurs verbatim in an earlier
item of the session (anything before call *k* but the system prompt) and not in the system
prompt (which every policy sends). Of those names, each is

* **visible** when it occurs verbatim in content the request carries before call *k*
  (message contents, tool-call arguments, reasoning: full text, preview head and tail,
  placeholders, the memory and the checkpoint's lines), not counting the checkpoint's index
  of names (``NAMES_HEADER``): a bare name tells the model that a file existed, not what was
  in it, so it is nothing the model can act on;
* a **miss** otherwise; a miss is **index-only** when the name is in that index (reported
  apart, and a miss all the same), and **recallable** when it occurs in the exact stored
  text of an item whose ``observation://`` address appears in that request, i.e. one exact
  ``recall_observation`` of an address the model can see would have found it.

Pure: texts in, counts out (the replay loop that feeds it is :func:`session_fidelity`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from activities.item_names import CAMEL, FILE_NAME, IDENTIFIER, arguments_text, strings_in
from recordings import Trajectory
from worker.replay.policies import make_policy, parse_policy
from worker.replay.recorded_lane import SESSION_ID, lane_batches
from workflows.context import NAMES_HEADER, SCHEME, ItemContent, Kind, ids

KINDS = ("path", "symbol", "number", "string")
# file names (FILE_NAME) and symbols (IDENTIFIER, CAMEL) as the worker's name extractor finds
# them (activities/item_names.py); its path pattern leaves out a path right after ":", this one not
_PATH = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?![\w.]*\d)")
# quotes not inside a word, so that the apostrophes of prose ("doesn't ... it's") do not pair up
_QUOTED = re.compile(r"(?<!\w)(?:\"([^\"\n\\]{8,200})\"|'([^'\n\\]{8,200})')(?!\w)")
_ADDRESS = re.compile(re.escape(SCHEME) + r"(obs-[\w-]+)")
_NAMES_INDEX = re.compile("^" + re.escape(NAMES_HEADER) + ".*$", re.MULTILINE)  # the checkpoint's index line
MIN_CHARS = 4
MIN_DIGITS = 3


def named_things(action: str) -> dict[str, str]:
    """The things ``action`` names, each with its kind (the first kind that claims it wins):

    * ``path``: a token with a ``/`` and a letter (``src/app.py``, ``/tmp/x``), or a file
      name with a common extension (``setup.cfg``);
    * ``symbol``: an identifier, possibly dotted, with an underscore inside, a lower-to-upper
      case change or a dot (``parse_args``, ``ValueError``, ``os.path.join``);
    * ``number``: an integer or dotted number of at least 3 digits (``1707``, ``3.11.7``);
    * ``string``: the inside of a quoted string of 8–200 characters (an error message, a
      search pattern).

    Trailing ``.``/``,``/``:`` are stripped; names shorter than 4 characters (numbers: 3
    digits) and observation addresses are left out.
    """
    found: dict[str, str] = {}

    def add(name: str, kind: str) -> None:
        name = name.rstrip(".,:;")
        if kind == "number":
            if sum(c.isdigit() for c in name) < MIN_DIGITS:
                return
        elif len(name) < MIN_CHARS:
            return
        if "observation:" in name or name.startswith("obs-"):
            return
        found.setdefault(name, kind)

    for match in _PATH.finditer(action):
        if any(c.isalpha() for c in match.group()) and "://" not in action[max(0, match.start() - 3):match.start()]:
            add(match.group(), "path")
    for match in FILE_NAME.finditer(action):
        add(match.group(), "path")
    for match in IDENTIFIER.finditer(action):
        name = match.group()
        if FILE_NAME.fullmatch(name):
            add(name, "path")
        elif "_" in name.strip("_") or "." in name or CAMEL.search(name):
            add(name, "symbol")
    for match in _NUMBER.finditer(action):
        add(match.group(), "number")
    for match in _QUOTED.finditer(action):
        add(match.group(1) or match.group(2), "string")
    return found


def content_text(content: ItemContent) -> str:
    """Everything model-visible of a stored item's exact content."""
    parts = [content.text, *(f"{c.name}\n{arguments_text(c.arguments)}" for c in content.tool_calls)]
    if content.reasoning_content:
        parts.append(content.reasoning_content)
    return "\n".join(parts)


def request_text(messages: list[dict]) -> str:
    """Everything the model reads in a chat request: contents, call arguments, reasoning."""
    parts: list[str] = []
    for message in messages:
        body = message.get("content")
        if isinstance(body, str):
            parts.append(body)
        elif isinstance(body, list):
            parts.extend(strings_in(body))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            parts.append(f"{function.get('name', '')}\n{arguments_text(function.get('arguments', ''))}")
        if message.get("reasoning_content"):
            parts.append(message["reasoning_content"])
    return "\n\x00".join(parts)


def split_index(request: str) -> tuple[str, str]:
    """(content, index): a request's text without the checkpoint's index of names, and that index."""
    index = "\n".join(match.group() for match in _NAMES_INDEX.finditer(request))
    return (_NAMES_INDEX.sub("", request), index) if index else (request, "")


def addresses(text: str) -> set[str]:
    """Observation ids whose address appears in ``text``."""
    return set(_ADDRESS.findall(text))


@dataclass
class Fidelity:
    """Counts over steps (add them up across steps, files and folders)."""

    steps: int = 0
    named: int = 0  # names of the next action that occurred in earlier items
    visible: int = 0
    missed: int = 0
    index_only: int = 0  # misses the checkpoint's index of names lists (a name, not content)
    recallable: int = 0  # misses an exact recall of an address in the request finds
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [named, missed, recallable]

    def merge(self, other: Fidelity) -> None:
        self.steps += other.steps
        self.named += other.named
        self.visible += other.visible
        self.missed += other.missed
        self.index_only += other.index_only
        self.recallable += other.recallable
        for kind, counts in other.by_kind.items():
            mine = self.by_kind.setdefault(kind, [0, 0, 0])
            for i, value in enumerate(counts):
                mine[i] += value

    @property
    def miss_rate(self) -> float:
        return self.missed / self.named if self.named else 0.0

    @property
    def index_counted_rate(self) -> float:
        """The miss rate as it was measured before index-only names counted as misses."""
        return (self.missed - self.index_only) / self.named if self.named else 0.0

    @property
    def unrecovered_rate(self) -> float:
        """Misses an exact recall of the request's addresses would still not find, per name."""
        return (self.missed - self.recallable) / self.named if self.named else 0.0

    def as_dict(self) -> dict:
        return {"steps": self.steps, "named": self.named, "visible": self.visible, "missed": self.missed,
                "index_only": self.index_only, "recallable": self.recallable, "miss_rate": round(self.miss_rate, 5),
                "miss_rate_index_counted": round(self.index_counted_rate, 5),
                "unrecovered_rate": round(self.unrecovered_rate, 5),
                "by_kind": {k: dict(zip(("named", "missed", "recallable"), v, strict=True))
                            for k, v in sorted(self.by_kind.items())}}


class SessionHistory:
    """What a session has shown so far: the earlier text names are checked against, and
    the exact text behind each observation address (what a recall returns)."""

    def __init__(self, system: str = "") -> None:
        self.system = system
        self._earlier: list[str] = []
        self._joined = ""
        self.stored: dict[str, str] = {}  # observation id -> exact text

    def add(self, text: str, observation_id: str | None = None) -> None:
        self._earlier.append(text)
        if observation_id is not None:
            self.stored[observation_id] = text

    @property
    def earlier(self) -> str:
        if self._earlier:  # joined lazily, once per step, not once per name
            self._joined = "\n\x00".join([self._joined, *self._earlier]) if self._joined else "\n\x00".join(self._earlier)
            self._earlier = []
        return self._joined

    def candidates(self, action: str) -> dict[str, str]:
        """The names of ``action`` that count: seen in an earlier item, not in the system prompt."""
        earlier = self.earlier
        return {name: kind for name, kind in named_things(action).items()
                if name in earlier and name not in self.system}


def count_step(candidates: dict[str, str], request: str, stored: dict[str, str]) -> Fidelity:
    """One step: ``candidates`` (from :meth:`SessionHistory.candidates`) against the request text."""
    result = Fidelity(steps=1)
    recall_texts: list[str] | None = None
    content, index = split_index(request)
    for name, kind in candidates.items():
        counts = result.by_kind.setdefault(kind, [0, 0, 0])
        result.named += 1
        counts[0] += 1
        if name in content:
            result.visible += 1
            continue
        result.missed += 1
        counts[1] += 1
        if name in index:
            result.index_only += 1
        if recall_texts is None:
            recall_texts = [stored[obs] for obs in sorted(addresses(request)) if obs in stored]
        if any(name in text for text in recall_texts):
            result.recallable += 1
            counts[2] += 1
    return result


def action_text(traj: Trajectory, k: int) -> str:
    """Recorded answer ``k``: its prose and the text of its tool-call arguments."""
    turn = traj.turns[k]
    return "\n".join([turn.assistant_text, *(f"{c.name}\n{arguments_text(c.arguments)}" for c in turn.tool_calls)])


@dataclass(frozen=True)
class Run:
    """One policy replayed at one budget (``engine_options``: lanes only, see ``engine_config``)."""

    name: str
    policy: str
    budget: int
    engine_options: dict | None = None


def session_fidelity(traj: Trajectory, policies: list[str] | list[Run], budget: int = 16_000,
                     engine_options: dict | None = None, stride: int = 1) -> dict[str, Fidelity]:
    """The fidelity of every policy (or :class:`Run`) over one recorded session, all replayed in
    lockstep so that the names of each step are found once. ``stride`` > 1: only every
    stride-th step is counted; every step is still planned (a policy's state depends on them)."""
    runs = [p if isinstance(p, Run) else Run(p, p, budget, engine_options) for p in policies]
    batches = lane_batches(traj)
    runners = {run.name: make_policy(parse_policy(run.policy), run.budget, run.engine_options) for run in runs}
    totals = {run.name: Fidelity() for run in runs}
    history = SessionHistory(traj.system or "")
    for k, batch in enumerate(batches):
        for lane in batch:
            if lane.item.kind != Kind.SYSTEM:
                # as the hosted session: every item but the system prompt is stored under its address
                history.add(content_text(lane.content), ids.observation_id(SESSION_ID, ids.MAIN_LANE, lane.item.seq))
        counted = k % stride == 0
        candidates = history.candidates(action_text(traj, k)) if counted else {}
        for name, runner in runners.items():
            runner.add(batch)
            messages = runner.plan().messages
            if counted:
                totals[name].merge(count_step(candidates, request_text(messages), history.stored))
    return totals
