"""Offline replay: the request each context policy would send for every recorded model call.

No Temporal, no PostgreSQL: a recorded trajectory (see :mod:`activities.trajectories`) is
turned into the lane items the hosted workflow would store, and for every recorded model
call *k* (the request sent before recorded answer *k*) a policy builds its request:

* ``full``       -- no management: every message verbatim (the naive prompt);
* ``masking-M``  -- the M newest tool observations verbatim, older ones replaced by
  ``[Old tool output omitted. N characters.]``, recomputed every step ("The Complexity
  Trap" observation masking);
* ``lanes``      -- the context engine (:mod:`workflows.context.engine`), deterministic,
  LLM condensation off, driven exactly as the workflow drives it: items measured with
  :func:`activities.items.finish_item`, ``needs_compaction`` / ``plan_fallback`` /
  ``apply_plan`` before each call, then ``plan_request`` and ``render_messages``.

All three policies render through :func:`workflows.context.render.render_messages`, so a
message that two policies send unchanged is byte-identical in both.

Per step the replay records the request's tokens (messages via ``count_message_tokens``
plus the bash tool definition), the tokens of its leading messages byte-identical to the
previous request of the same file (a provider prompt-cache hit when at least 1,024
tokens), the planning time and the items that are neither sent nor recallable.
Token counts are cached per serialised message, since consecutive requests repeat most
of their messages.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from activities.items import finish_item, measure
from activities.tokens import count_message_tokens, count_tool_definitions
from activities.tool_specs import REPLAY_TOOLS, tool_specs
from activities.trajectories import Trajectory, TrajectoryError, load_trajectory, trajectory_files
from workflows.context import engine
from workflows.context.classify import classify_tool
from workflows.context.config import EngineConfig
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind, Projection
from workflows.context.ledger import GENERATED_KINDS
from workflows.context.planner import PlanEntry
from workflows.context.render import render_messages

__all__ = [
    "CACHED_INPUT_PRICE", "DEFAULT_BUDGET", "DEFAULT_POLICIES", "MIN_CACHED_PREFIX_TOKENS", "TOOL_DEFINITION_TOKENS",
    "FileResult", "LaneInput", "PolicySpec", "PolicyTotals", "ReplayError", "ReplayReport", "StepRequest",
    "TokenCounter", "default_jobs", "engine_config", "iter_requests", "lane_batches", "masked_text", "message_json",
    "parse_policy", "percentile", "replay_file", "replay_paths", "replay_trajectory",
]

DEFAULT_POLICIES = ("full", "masking-10", "lanes")
DEFAULT_BUDGET = 16_000
MIN_CACHED_PREFIX_TOKENS = 1024  # providers cache prefixes of at least this many tokens (DESIGN §7)
CACHED_INPUT_PRICE = 0.1  # cached input is billed at about 0.1x
# the tools a hosted replay offers the model (bash + recall_observation), charged alike to every policy
REPLAY_TOOL_SPECS = tool_specs(REPLAY_TOOLS)
TOOL_DEFINITION_TOKENS = count_tool_definitions(REPLAY_TOOL_SPECS)

# Ids and thresholds as the hosted workflow chooses them (workflows/lane.py, workflows/session.py).
SESSION_ID = "replay"
TASK_ID = "task-0000"
OVERSIZED_INPUT_CHARS = 32_000  # = the workflow's OVERSIZED_INPUT_CHARS (checked by a test)
CONTEXT_WINDOW = 128_000  # irrelevant for the replay: budget_override replaces the usable window
MAX_OUTPUT_TOKENS = 4_096
TOKEN_MODEL: str | None = None  # activities.tokens: cl100k_base for every model


class ReplayError(ValueError):
    """A replay could not run; the message names the path (picklable across processes)."""


@dataclass(frozen=True)
class PolicySpec:
    name: str  # as given: "full", "lanes", "masking-10"
    kind: str  # "full" | "masking" | "lanes"
    keep: int = 0  # masking: observations kept verbatim


def parse_policy(name: str) -> PolicySpec:
    """``full``, ``lanes`` or ``masking-M`` (M >= 0); a ValueError names what is accepted."""
    if name in ("full", "lanes"):
        return PolicySpec(name, name)
    if name.startswith("masking-"):
        raw = name[len("masking-"):]
        if raw.isdigit():
            return PolicySpec(name, "masking", int(raw))
    raise ValueError(f"unknown policy {name!r}: use full, lanes or masking-M (M a whole number, e.g. masking-10)")


@dataclass(frozen=True)
class LaneInput:
    """One lane item as the workflow would store it (tokens not measured yet)."""

    item: Item
    content: ItemContent
    arguments: str | None = None  # the call's raw arguments, for tool results


def lane_batches(traj: Trajectory, session_id: str = SESSION_ID) -> list[list[LaneInput]]:
    """The lane items that become visible before each recorded model call.

    Batch 0 (system prompt and task) precedes call 0; batch k+1 is what recorded answer k
    added (the assistant turn, its tool results in file order, later user text), so the
    request before call k carries batches 0..k. Ids, seqs, groups, observation ids and
    tool classes are assigned as the workflow and its activities assign them. A trajectory
    without a recorded answer has no model call to replay: no batch at all.
    """
    if not traj.turns:
        return []
    counter = iter(range(1 << 62))

    def text_item(text: str, kind: Kind, role: str, task: str | None) -> LaneInput:
        seq = next(counter)
        obs = f"obs-{session_id}-{seq:06d}" if len(text) > OVERSIZED_INPUT_CHARS else None
        item = Item(id=f"itm-{seq:06d}", seq=seq, kind=kind, role=role, task=task, observation_id=obs)
        return LaneInput(item, ItemContent(text=text))

    first: list[LaneInput] = []
    if traj.system:
        first.append(text_item(traj.system, Kind.SYSTEM, "system", None))
    first.append(text_item(traj.task, Kind.USER, "user", TASK_ID))
    batches = [first]
    for turn in traj.turns[:-1]:  # the last answer is followed by no recorded call
        seq = next(counter)
        calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in turn.tool_calls]
        assistant = Item(id=f"itm-{seq:06d}", seq=seq, kind=Kind.ASSISTANT, role="assistant", group=seq,
                         task=TASK_ID, tool_call_ids=[c.id for c in calls])
        # Text-protocol agents (mini-swe-agent 1) put the action in the prose and get the
        # output back as a user message: their calls are never sent as tool_calls, so the
        # stored content has none (and the measured cost is what is sent).
        sent_calls = [] if traj.tool_protocol == "text" else calls
        batch = [LaneInput(assistant, ItemContent(text=turn.assistant_text, tool_calls=sent_calls))]
        arguments = {c.id: c.arguments for c in calls}
        for result in turn.results:
            rseq = next(counter)
            exit_code = result.exit_code if result.exit_code is not None else 0  # as the replay tool runner
            args = arguments.get(result.tool_call_id)
            item = Item(
                id=f"itm-{rseq:06d}", seq=rseq, kind=Kind.TOOL_RESULT, role=result.render_role, group=seq,
                task=TASK_ID, tool_name=result.tool_name, tool_call_ids=[result.tool_call_id],
                tool_class=classify_tool(result.tool_name, args, exit_code), exit_code=exit_code,
                observation_id=f"obs-{session_id}-{rseq:06d}",
            )
            content = ItemContent(text=result.output, tool_call_id=result.tool_call_id, tool_name=result.tool_name)
            batch.append(LaneInput(item, content, args))
        batch.extend(text_item(text, Kind.USER, "user", TASK_ID) for text in turn.user_after)
        batches.append(batch)
    return batches


def masked_text(output: str) -> str:
    return f"[Old tool output omitted. {len(output)} characters.]"


@dataclass
class Planned:
    messages: list[dict]
    seconds: float  # planning + rendering only
    compacted: bool = False
    lost: frozenset[str] = frozenset()


class _Policy:
    """Feeds lane items in (untimed) and plans the next request (timed)."""

    def __init__(self, preview_chars: int) -> None:
        self.preview_chars = preview_chars
        self.contents: dict[str, ItemContent] = {}
        self.measure_seconds = 0.0  # tiktoken on new and generated items (not planning time)

    def add(self, batch: list[LaneInput]) -> None:
        raise NotImplementedError

    def plan(self) -> Planned:
        raise NotImplementedError


class _Full(_Policy):
    """Every item in its FULL projection, in lane order."""

    def __init__(self, preview_chars: int) -> None:
        super().__init__(preview_chars)
        self.items: dict[str, Item] = {}
        self.entries: list[PlanEntry] = []

    def add(self, batch: list[LaneInput]) -> None:
        for lane in batch:
            self.items[lane.item.id] = lane.item
            self.contents[lane.item.id] = lane.content
            self.entries.append(PlanEntry(item_id=lane.item.id, projection=Projection.FULL, tokens=0))

    def plan(self) -> Planned:
        start = time.perf_counter()
        messages = render_messages(self.entries, self.items, self.contents, self.preview_chars)
        return Planned(messages, time.perf_counter() - start)


class _Masking(_Full):
    def __init__(self, preview_chars: int, keep: int) -> None:
        super().__init__(preview_chars)
        self.keep = keep
        self.observations: list[str] = []  # tool result ids, oldest first
        self.masked: dict[str, ItemContent] = {}

    def add(self, batch: list[LaneInput]) -> None:
        super().add(batch)
        self.observations.extend(lane.item.id for lane in batch if lane.item.kind == Kind.TOOL_RESULT)

    def plan(self) -> Planned:
        start = time.perf_counter()
        old = self.observations[: max(0, len(self.observations) - self.keep)]
        view = dict(self.contents)
        for item_id in old:
            masked = self.masked.get(item_id)
            if masked is None:
                original = self.contents[item_id]
                masked = original.model_copy(update={"text": masked_text(original.text)})
                self.masked[item_id] = masked
            view[item_id] = masked
        messages = render_messages(self.entries, self.items, view, self.preview_chars)
        # masking keeps no observation store: a masked output is gone for good
        return Planned(messages, time.perf_counter() - start, lost=frozenset(old))


class _Lanes(_Policy):
    """The engine, driven as the hosted workflow drives it (``workflows/lane.py``)."""

    def __init__(self, budget: int, engine_options: dict | None = None) -> None:
        config = engine_config(budget, engine_options)
        super().__init__(config.effective_preview_chars)
        self.state = engine.new_state(config)
        # lane items without an observation address that were not yet seen archived into the
        # checkpoint or the rolling summary (the only items that could get lost)
        self.unproven: dict[str, int] = {}

    def add(self, batch: list[LaneInput]) -> None:
        for lane in batch:
            if self.state.current_task is None and lane.item.kind != Kind.SYSTEM:
                engine.begin_task(self.state, TASK_ID)
            start = time.perf_counter()
            item = finish_item(lane.item, lane.content, self.preview_chars, TOKEN_MODEL)
            self.measure_seconds += time.perf_counter() - start
            engine.add_item(self.state, item, lane.arguments)
            self.contents[item.id] = lane.content
            if item.observation_id is None:
                self.unproven[item.id] = item.seq
        if batch and batch[0].item.kind == Kind.ASSISTANT:
            engine.end_step(self.state)  # the workflow ends a step after the tool results

    def plan(self) -> Planned:
        state = self.state
        seconds = 0.0
        compacted = False
        started = time.perf_counter()
        if engine.needs_compaction(state):
            plan = engine.plan_fallback(state)
            start = time.perf_counter()
            seconds += start - started
            measured = {g.key: self._measure_generated(g.key, g.role, g.text) for g in plan.generated}
            self.measure_seconds += time.perf_counter() - start
            started = time.perf_counter()
            result = engine.apply_plan(state, plan, measured)
            if result.stale:  # nothing changes the state in between: a stale plan is an engine bug
                raise ReplayError(f"engine refused its own fallback plan: {result.reason}")
            for created in result.created:
                self.contents[created.item_id] = ItemContent(text=created.text)
            for archived in result.archived:
                if archived.kind in GENERATED_KINDS:
                    self.contents.pop(archived.id, None)
            compacted = result.applied and not plan.is_empty
        request = engine.plan_request(state)
        messages = render_messages(request.entries, state.items, self.contents, self.preview_chars)
        seconds += time.perf_counter() - started
        return Planned(messages, seconds, compacted, frozenset(self._lost(request.entries)))

    def _measure_generated(self, kind: str, role: str, text: str) -> dict[Projection, int]:
        """Generated text is measured with tiktoken; its FULL cost equals what the workflow's
        measure_texts activity returns (message overhead + tokens of the text)."""
        item = Item(id=f"{kind}-draft", seq=max(0, self.state.last_seq), kind=kind, role=role)
        return measure(item, ItemContent(text=text), self.preview_chars, TOKEN_MODEL)

    def _lost(self, entries: list[PlanEntry]) -> list[str]:
        """Items neither sent (in any projection) nor recallable.

        Recallable: a tool result or oversized input with an observation address, or an item
        inside the seq range that the engine's checkpoint or rolling summary records as
        archived. Both ranges only grow, so an item once proven covered stays covered.
        """
        sent = {e.item_id for e in entries if e.projection != Projection.OMITTED}
        checkpoint, summary = self.state.checkpoint, self.state.summary
        lost = []
        for item_id, seq in list(self.unproven.items()):
            if item_id in sent:
                continue
            if checkpoint.covers(seq) or summary.covers(seq):
                del self.unproven[item_id]
            else:
                lost.append(item_id)
        return lost


def engine_config(budget: int, engine_options: dict | None = None) -> EngineConfig:
    """The engine configuration of the ``lanes`` policy: deterministic (LLM condensation off),
    ``budget`` as the usable input, the bash tool definition charged; ``engine_options``
    override other :class:`EngineConfig` fields (experiments, e.g. ``{"target_ratio": 0.4}``)."""
    fields = {
        "context_window": max(CONTEXT_WINDOW, budget), "max_output_tokens": MAX_OUTPUT_TOKENS,
        "tool_definition_tokens": TOOL_DEFINITION_TOKENS, "llm_condensation": False, "budget_override": budget,
    }
    fields.update(engine_options or {})
    return EngineConfig(**fields)


def _make_policy(spec: PolicySpec, budget: int, engine_options: dict | None = None) -> _Policy:
    if spec.kind == "lanes":
        return _Lanes(budget, engine_options)
    # the reference policies render FULL projections only; the preview size does not matter
    preview = engine_config(budget).effective_preview_chars
    if spec.kind == "full":
        return _Full(preview)
    return _Masking(preview, spec.keep)


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
    messages: list[dict]
    jsons: list[str]
    message_tokens: list[int]
    input_tokens: int  # messages + tool definitions
    cached_input_tokens: int
    shared_prefix_messages: int  # leading messages identical to the previous request
    compacted: bool
    plan_seconds: float
    lost: frozenset[str]
    measure_seconds: float  # tiktoken on the items this step added (lanes only)


def iter_requests(
    traj: Trajectory, policy: str | PolicySpec, budget: int = DEFAULT_BUDGET,
    counter: TokenCounter | None = None, batches: list[list[LaneInput]] | None = None,
    engine_options: dict | None = None,
) -> Iterator[StepRequest]:
    """The request of ``policy`` before every recorded model call of ``traj``, in order."""
    spec = parse_policy(policy) if isinstance(policy, str) else policy
    counter = counter or TokenCounter()
    batches = lane_batches(traj) if batches is None else batches
    runner = _make_policy(spec, budget, engine_options)
    previous: list[str] = []
    for step, batch in enumerate(batches):
        measured_before = runner.measure_seconds
        runner.add(batch)
        planned = runner.plan()
        jsons = [message_json(m) for m in planned.messages]
        tokens = [counter.count(j, m) for j, m in zip(jsons, planned.messages)]
        shared = 0
        for now, before in zip(jsons, previous):
            if now != before:
                break
            shared += 1
        prefix = sum(tokens[:shared])
        yield StepRequest(
            step=step, messages=planned.messages, jsons=jsons, message_tokens=tokens,
            input_tokens=sum(tokens) + TOOL_DEFINITION_TOKENS,
            cached_input_tokens=prefix if prefix >= MIN_CACHED_PREFIX_TOKENS else 0,
            shared_prefix_messages=shared, compacted=planned.compacted, plan_seconds=planned.seconds,
            lost=planned.lost, measure_seconds=runner.measure_seconds - measured_before,
        )
        previous = jsons


@dataclass
class PolicyTotals:
    steps: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    peak_input_tokens: int = 0
    over_budget_steps: int = 0
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
        self.over_budget_steps += req.input_tokens > budget
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
                      path: str = "", engine_options: dict | None = None) -> FileResult:
    """Every policy over one trajectory (one token cache shared by the policies)."""
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
        for req in iter_requests(traj, spec, budget, counter, batches, engine_options):
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
        # biggest files first, so that no long file starts last
        order = sorted(files, key=lambda f: -os.path.getsize(f))
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


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
