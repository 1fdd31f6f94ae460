"""The offline simulator: the request each context policy would send for every recorded model call.

No Temporal, no PostgreSQL: a recorded trajectory (see :mod:`recordings`) is turned into
the lane items the hosted workflow would store (:mod:`worker.replay.recorded_lane`), and for
every recorded model call *k* (the request sent before recorded answer *k*) each policy
(:mod:`worker.replay.policies`) builds its request.

Per step the replay records the request's tokens (messages via ``count_message_tokens``
plus the tool definitions), the tokens of its prefix byte-identical to the previous
request of the same file (the tool definitions, which come first and never change, and
the leading messages the two share: a provider prompt-cache hit when at least 1,024
tokens), the planning time and the items that are neither sent nor recallable.
Token counts are cached per serialised message, since consecutive requests repeat most
of their messages.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from activities.tokens import count_message_tokens
from recordings import Trajectory, TrajectoryError, load_trajectory, trajectory_files
from worker.replay.policies import (
    TOKEN_MODEL,
    TOOL_DEFINITION_TOKENS,
    PolicySpec,
    ReplayError,
    engine_config,
    make_policy,
    parse_policy,
)
from worker.replay.recorded_lane import SESSION_ID, ReplayItem, lane_batches, readdressed

DEFAULT_POLICIES = ("full", "masking-10", "lanes")
DEFAULT_BUDGET = 16_000
MIN_CACHED_PREFIX_TOKENS = 1024  # providers cache prefixes of at least this many tokens (DESIGN §7)
CACHED_INPUT_PRICE = 0.1  # cached input is billed at about 0.1x


def message_json(message: dict) -> str:
    """The serialisation two requests are compared by (and the token cache is keyed by)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


class TokenCounter:
    """``count_message_tokens`` cached per serialised message."""

    def __init__(self, model: str | None = TOKEN_MODEL) -> None:
        self.model = model
        self.cache: dict[str, int] = {}
        self.hits = 0
        self.misses = 0
        self.seconds = 0.0  # spent tokenising (misses)

    def count(self, key: str, message: dict) -> int:
        tokens = self.cache.get(key)
        if tokens is None:
            start = time.perf_counter()
            tokens = count_message_tokens(message, self.model)
            self.seconds += time.perf_counter() - start
            self.cache[key] = tokens
            self.misses += 1
        else:
            self.hits += 1
        return tokens


@dataclass
class StepRequest:
    step: int
    messages: list[dict]  # as sent: the session's own observation addresses
    jsons: list[str]  # what is compared and counted: planned under the constant SESSION_ID
    message_tokens: list[int]
    input_tokens: int  # messages + tool definitions
    cached_input_tokens: int
    shared_prefix_messages: int  # leading messages identical to the previous request
    compacted: bool
    plan_seconds: float
    lost: frozenset[str]
    measure_seconds: float  # tiktoken on the items this step added (lanes only)
    fits: bool = True  # False: planned over budget even at the ladder's last rung (lanes: not sent)


def iter_requests(
    traj: Trajectory, policy: str | PolicySpec, budget: int = DEFAULT_BUDGET,
    counter: TokenCounter | None = None, batches: list[list[ReplayItem]] | None = None,
    engine_options: dict | None = None, session_id: str = SESSION_ID,
) -> Iterator[StepRequest]:
    """The request of ``policy`` before every recorded model call of ``traj``, in order.

    The session is planned and counted under the constant :data:`SESSION_ID`, so its figures
    do not depend on ``session_id``; the messages handed out carry ``session_id``'s addresses.
    """
    spec = parse_policy(policy) if isinstance(policy, str) else policy
    counter = counter or TokenCounter()
    batches = lane_batches(traj) if batches is None else batches
    runner = make_policy(spec, budget, engine_options)
    previous: list[str] = []
    for step, batch in enumerate(batches):
        measured_before = runner.measure_seconds
        runner.add(batch)
        planned = runner.plan()
        jsons = [message_json(m) for m in planned.messages]
        tokens = [counter.count(j, m) for j, m in zip(jsons, planned.messages, strict=True)]
        shared = 0
        for now, before in zip(jsons, previous, strict=False):
            if now != before:
                break
            shared += 1
        # The tool definitions open every request (before the messages, as providers lay out
        # the prompt) and never change: they belong to the cached prefix of every request
        # after the first, like the leading messages it shares with the previous one.
        prefix = sum(tokens[:shared]) + (TOOL_DEFINITION_TOKENS if previous else 0)
        messages = [readdressed(m, session_id) for m in planned.messages]
        yield StepRequest(
            step=step, messages=messages, jsons=jsons, message_tokens=tokens,
            input_tokens=sum(tokens) + TOOL_DEFINITION_TOKENS,
            cached_input_tokens=prefix if prefix >= MIN_CACHED_PREFIX_TOKENS else 0,
            shared_prefix_messages=shared, compacted=planned.compacted, plan_seconds=planned.seconds,
            lost=planned.lost, measure_seconds=runner.measure_seconds - measured_before, fits=planned.fits,
        )
        previous = jsons


@dataclass
class PolicyTotals:
    steps: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    peak_input_tokens: int = 0
    over_budget_steps: int = 0  # requests sent over the budget
    unfit_steps: int = 0  # requests the workflow refuses to send (RequestDoesNotFit: the task fails)
    compactions: int = 0
    lost_items: int = 0  # distinct items lost at some step, summed over files
    plan_ms: list[float] = field(default_factory=list)
    compaction_plan_ms: list[float] = field(default_factory=list)  # the steps that compacted

    @property
    def cost_units(self) -> float:
        return self.input_tokens - self.cached_input_tokens + CACHED_INPUT_PRICE * self.cached_input_tokens

    def add(self, req: StepRequest, budget: int) -> None:
        self.steps += 1
        self.input_tokens += req.input_tokens
        self.cached_input_tokens += req.cached_input_tokens
        self.peak_input_tokens = max(self.peak_input_tokens, req.input_tokens)
        self.over_budget_steps += req.fits and req.input_tokens > budget
        self.unfit_steps += not req.fits
        self.compactions += req.compacted
        self.plan_ms.append(req.plan_seconds * 1000.0)
        if req.compacted:
            self.compaction_plan_ms.append(req.plan_seconds * 1000.0)

    def merge(self, other: PolicyTotals) -> None:
        self.steps += other.steps
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.peak_input_tokens = max(self.peak_input_tokens, other.peak_input_tokens)
        self.over_budget_steps += other.over_budget_steps
        self.unfit_steps += other.unfit_steps
        self.compactions += other.compactions
        self.lost_items += other.lost_items
        self.plan_ms.extend(other.plan_ms)
        self.compaction_plan_ms.extend(other.compaction_plan_ms)

    def as_dict(self) -> dict:
        return {
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cost_units": round(self.cost_units, 1),
            "peak_input_tokens": self.peak_input_tokens,
            "over_budget_steps": self.over_budget_steps,
            "unfit_steps": self.unfit_steps,
            "compactions": self.compactions,
            "plan_ms_p50": round(percentile(self.plan_ms, 50), 4),
            "plan_ms_p99": round(percentile(self.plan_ms, 99), 4),
            "plan_ms_max": round(max(self.plan_ms, default=0.0), 4),
            "compaction_plan_ms_p50": round(percentile(self.compaction_plan_ms, 50), 4),
            "compaction_plan_ms_p99": round(percentile(self.compaction_plan_ms, 99), 4),
            "lost_items": self.lost_items,
            "steps": self.steps,
        }


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


@dataclass
class FileResult:
    path: str
    trajectory_id: str
    source_format: str
    steps: int
    policies: dict[str, PolicyTotals]
    tokenised_messages: int = 0  # distinct messages counted (token cache misses)
    cache_hits: int = 0
    tokenise_seconds: float = 0.0  # counting request messages (misses) + measuring lanes items
    seconds: float = 0.0  # the whole replay of the file, every policy


def replay_trajectory(traj: Trajectory, policies: list[str], budget: int = DEFAULT_BUDGET,
                      path: str = "", engine_options: dict | None = None,
                      session_id: str = SESSION_ID) -> FileResult:
    """Every policy over one trajectory (one token cache shared by the policies); the figures
    are the same under any ``session_id``."""
    started = time.perf_counter()
    specs = [parse_policy(p) for p in policies]
    counter = TokenCounter()
    measuring = 0.0
    batches = lane_batches(traj)
    result = FileResult(path=path, trajectory_id=traj.id, source_format=traj.source_format,
                        steps=len(batches), policies={})
    for spec in specs:
        totals = PolicyTotals()
        lost: set[str] = set()
        for req in iter_requests(traj, spec, budget, counter, batches, engine_options, session_id):
            totals.add(req, budget)
            lost |= req.lost
            measuring += req.measure_seconds
        totals.lost_items = len(lost)
        result.policies[spec.name] = totals
    result.tokenised_messages, result.cache_hits = counter.misses, counter.hits
    result.tokenise_seconds = counter.seconds + measuring
    result.seconds = time.perf_counter() - started
    return result


def replay_file(path: str, policies: list[str], budget: int = DEFAULT_BUDGET,
                engine_options: dict | None = None) -> FileResult:
    """Load and replay one file; any failure is a :class:`ReplayError` naming the file."""
    try:
        return replay_trajectory(load_trajectory(path), policies, budget, path, engine_options)
    except TrajectoryError as error:  # its message already starts with the path
        raise ReplayError(str(error)) from None
    except ReplayError as error:
        raise ReplayError(f"{path}: {error}") from None
    except Exception as error:  # a loader or engine failure: name the file it happened on
        raise ReplayError(f"{path}: replay failed: {type(error).__name__}: {error}") from error


@dataclass
class ReplayReport:
    budget: int
    policies: list[str]
    files: list[FileResult]
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return sum(f.steps for f in self.files)

    def totals(self, files: list[FileResult] | None = None) -> dict[str, PolicyTotals]:
        out = {p: PolicyTotals() for p in self.policies}
        for f in self.files if files is None else files:
            for name, totals in f.policies.items():
                out[name].merge(totals)
        return out

    def as_dict(self) -> dict:
        """The ``--json`` object: ``{"files", "steps", "budget", "policies": {name: {...}}}``."""
        return {
            "files": len(self.files),
            "steps": self.steps,
            "budget": self.budget,
            "policies": {name: t.as_dict() for name, t in self.totals().items()},
        }


def replay_paths(
    paths: list[str], policies: list[str] | tuple[str, ...] = DEFAULT_POLICIES, budget: int = DEFAULT_BUDGET,
    jobs: int = 1, on_file: Callable[[FileResult], None] | None = None,
    on_start: Callable[[int], None] | None = None, engine_options: dict | None = None,
) -> ReplayReport:
    """Replay every trajectory under ``paths`` (files or folders) with every policy.

    ``jobs`` > 1 replays files in that many processes; results are in file order either way.
    ``on_start(total_files)`` and ``on_file(result)`` report progress. ``engine_options``
    override fields of the lanes policy's :func:`engine_config`.
    """
    policies = list(policies)
    for name in policies:
        parse_policy(name)  # a bad name fails before any work
    try:
        engine_config(budget, engine_options)
    except ValueError as error:  # pydantic names the field and the problem
        raise ValueError(f"invalid engine options {engine_options}: {error}") from None
    if budget <= TOOL_DEFINITION_TOKENS:
        raise ValueError(f"budget {budget} leaves no room beside the {TOOL_DEFINITION_TOKENS}-token tool definition")
    try:
        files = [str(f) for f, _ in trajectory_files(paths)]
    except TrajectoryError as error:
        raise ReplayError(str(error)) from None
    if not files:
        raise ReplayError(f"no trajectory files under {', '.join(map(str, paths))}")
    if on_start:
        on_start(len(files))
    started = time.perf_counter()
    results: dict[str, FileResult] = {}
    if jobs <= 1 or len(files) == 1:
        for f in files:
            results[f] = replay_file(f, policies, budget, engine_options)
            if on_file:
                on_file(results[f])
    else:
        order = largest_first(files)
        # spawn, not fork: the caller may run threads (a progress bar) that a fork would copy mid-lock
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(replay_file, f, policies, budget, engine_options): f for f in order}
            try:
                for future in as_completed(futures):
                    result = future.result()
                    results[futures[future]] = result
                    if on_file:
                        on_file(result)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return ReplayReport(budget=budget, policies=policies, files=[results[f] for f in files],
                        seconds=time.perf_counter() - started)


def largest_first(files: Iterable[str]) -> list[str]:
    """The files biggest first: handed to a process pool in this order, no long file starts last."""
    return sorted(files, key=lambda f: -os.path.getsize(f))


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
