"""The context policies the offline simulator compares, each building the request a session
would send before a recorded model call:

* ``full``       -- no management: every message verbatim (the naive prompt);
* ``masking-M``  -- the M newest tool observations verbatim, older ones replaced by
  ``[Old tool output omitted. N characters.]``, recomputed every step ("The Complexity
  Trap" observation masking);
* ``lanes``      -- the context engine (:mod:`workflows.context.engine`), deterministic,
  LLM condensation off, driven exactly as the workflow drives it: items measured with
  :func:`activities.items.finish_item`, ``needs_compaction`` / ``plan_fallback`` /
  ``apply_plan`` before each call, then ``plan_request`` and ``render_messages``.

All three render through :func:`workflows.context.render.render_messages`, so a message that
two policies send unchanged is byte-identical in both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from activities.items import bounded_item, measure
from activities.tokens import count_tool_definitions
from worker.replay.recorded_lane import SESSION_ID, TASK_ID, ReplayItem
from workflows.context import (
    GENERATED_KINDS,
    LINES_PROFILE,
    PREVIEW_LINES_PROFILE,
    EngineConfig,
    Item,
    ItemContent,
    Kind,
    Projection,
    cost_profile,
    engine,
    ids,
    render_messages,
)
from workflows.contract.session import DEFAULT_MAX_OUTPUT_TOKENS, SessionConfig
from workflows.contract.tools import REPLAY_TOOLS, tool_specs

# the tools a hosted replay offers the model (bash + recall_observation), charged alike to every policy
REPLAY_TOOL_SPECS = tool_specs(REPLAY_TOOLS)
TOOL_DEFINITION_TOKENS = count_tool_definitions(REPLAY_TOOL_SPECS)
CONTEXT_WINDOW = 128_000  # irrelevant for the replay: budget_tokens replaces the usable window
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


def masked_text(output: str) -> str:
    return f"[Old tool output omitted. {len(output)} characters.]"


@dataclass
class Planned:
    messages: list[dict]
    seconds: float  # planning + rendering only
    compacted: bool = False
    lost: frozenset[str] = frozenset()
    fits: bool = True  # False: the workflow would not send it (RequestDoesNotFit), the task would fail


class Policy:
    """Feeds lane items in (untimed) and plans the next request (timed)."""

    def __init__(self, preview_chars: int) -> None:
        self.preview_chars = preview_chars
        self.contents: dict[str, ItemContent] = {}
        self.measure_seconds = 0.0  # tiktoken on new and generated items (not planning time)

    def add(self, batch: list[ReplayItem]) -> None:
        raise NotImplementedError

    def plan(self) -> Planned:
        raise NotImplementedError


class FullPolicy(Policy):
    """Every item in its FULL projection, in lane order."""

    def __init__(self, preview_chars: int) -> None:
        super().__init__(preview_chars)
        self.items: dict[str, Item] = {}
        self.entries: list[tuple[str, Projection]] = []

    def add(self, batch: list[ReplayItem]) -> None:
        for lane in batch:
            self.items[lane.item.id] = lane.item
            self.contents[lane.item.id] = lane.content
            self.entries.append((lane.item.id, Projection.FULL))

    def plan(self) -> Planned:
        start = time.perf_counter()
        messages = render_messages(self.entries, self.items, self.contents, self.preview_chars)
        return Planned(messages, time.perf_counter() - start)


class MaskingPolicy(FullPolicy):
    def __init__(self, preview_chars: int, keep: int) -> None:
        super().__init__(preview_chars)
        self.keep = keep
        self.observations: list[str] = []  # tool result ids, oldest first
        self.masked: dict[str, ItemContent] = {}

    def add(self, batch: list[ReplayItem]) -> None:
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


class LanesPolicy(Policy):
    """The engine, driven as the hosted workflow drives it (``workflows/lane.py``)."""

    def __init__(self, budget: int, engine_options: dict | None = None) -> None:
        config = engine_config(budget, engine_options)
        super().__init__(config.effective_preview_chars)
        self.state = engine.new_state(config)
        # as the workflow's activities: oversized items are archived so that they enter bounded
        self.bound_above_tokens = config.max_item_tokens if config.rules_version >= 2 else None
        # lane items without an observation address that were not yet seen archived into the
        # checkpoint or the rolling summary (the only items that could get lost)
        self.unproven: dict[str, int] = {}

    def add(self, batch: list[ReplayItem]) -> None:
        for lane in batch:
            if self.state.current_task is None and lane.item.kind != Kind.SYSTEM:
                engine.begin_task(self.state, TASK_ID)
            start = time.perf_counter()
            item = bounded_item(lane.item, lane.content, self.preview_chars, TOKEN_MODEL, self.bound_above_tokens,
                                None if lane.item.kind == Kind.SYSTEM else ids.observation_id(
                                    SESSION_ID, ids.MAIN_LANE, lane.item.seq),
                                preview_lines=self.state.config.preview_lines)
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
            seconds, compacted = self._apply(engine.plan_fallback(state), seconds, started)
            started = time.perf_counter()
        assembly = engine.plan_assembly(state)
        if assembly is not None:
            seconds, _ = self._apply(assembly, seconds, started)
            started = time.perf_counter()
        rules_2 = state.config.rules_version >= 2
        # as Lane.plan_within_budget: down the ladder before sending; rules 1 sent the full rung
        request = engine.plan_fitting(state)[-1] if rules_2 else engine.plan_request(state)
        messages = render_messages(request.pairs, state.items, self.contents, self.preview_chars)
        seconds += time.perf_counter() - started
        return Planned(messages, seconds, compacted, frozenset(self._lost(request.entries)),
                       fits=request.fits or not rules_2)

    def _apply(self, plan: engine.CompactionPlan, seconds: float, started: float) -> tuple[float, bool]:
        """Apply ``plan`` (generated text measured with tiktoken, not timed as planning)."""
        start = time.perf_counter()
        seconds += start - started
        measured = {g.key: self._measure_generated(g.key, g.role, g.text) for g in plan.generated}
        self.measure_seconds += time.perf_counter() - start
        result = engine.apply_plan(self.state, plan, measured)
        if result.stale:  # nothing changes the state in between: a stale plan is an engine bug
            raise ReplayError(f"engine refused its own {plan.mode} plan: {result.reason}")
        for created in result.created:
            self.contents[created.item_id] = ItemContent(text=created.text)
        for archived in result.archived:
            if archived.kind in GENERATED_KINDS:
                self.contents.pop(archived.id, None)
        return seconds, result.applied and not plan.is_empty

    def _measure_generated(self, kind: str, role: str, text: str) -> dict[Projection, int]:
        """Generated text is measured with tiktoken; its FULL cost equals what the workflow's
        measure_texts activity returns (message overhead + tokens of the text)."""
        item = Item(id=f"{kind}-draft", seq=max(0, self.state.last_seq), kind=kind, role=role)
        return measure(item, ItemContent(text=text), self.preview_chars, TOKEN_MODEL)

    def _lost(self, entries: list[engine.PlanEntry]) -> list[str]:
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


# The engine as sessions ran it before the cost profile (issue 16): the fields' defaults.
BEFORE_COST_PROFILE = {name: EngineConfig.model_fields[name].default for name in cost_profile(llm_condensation=False)}
# As sessions started before the checkpoint's key lines (issue 29, patch checkpoint-lines).
BEFORE_KEY_LINES = {name: EngineConfig.model_fields[name].default for name in (*LINES_PROFILE, *PREVIEW_LINES_PROFILE)}
# As sessions started before previews showed lines of their middle (issue 29, patch preview-lines).
BEFORE_PREVIEW_LINES = {name: EngineConfig.model_fields[name].default for name in PREVIEW_LINES_PROFILE}


def engine_config(budget: int, engine_options: dict | None = None) -> EngineConfig:
    """The engine configuration of the ``lanes`` policy: deterministic (LLM condensation off),
    ``budget`` as the usable input, the bash tool definition charged, the cost profile of a
    new session; ``engine_options`` override other :class:`EngineConfig` fields (experiments,
    e.g. ``{"target_ratio": 0.4}``, or :data:`BEFORE_COST_PROFILE`)."""
    fields = {
        "context_window": max(CONTEXT_WINDOW, budget), "max_output_tokens": DEFAULT_MAX_OUTPUT_TOKENS,
        "tool_definition_tokens": TOOL_DEFINITION_TOKENS, "llm_condensation": False, "budget_tokens": budget,
        "generated_role": SessionConfig.model_fields["generated_role"].default,  # as a new session writes them
        **cost_profile(llm_condensation=False),  # as a new session runs
    }
    fields.update(engine_options or {})
    return EngineConfig(**fields)


def make_policy(spec: PolicySpec, budget: int, engine_options: dict | None = None) -> Policy:
    if spec.kind == "lanes":
        return LanesPolicy(budget, engine_options)
    # the reference policies render FULL projections only; the preview size does not matter
    preview = engine_config(budget).effective_preview_chars
    if spec.kind == "full":
        return FullPolicy(preview)
    return MaskingPolicy(preview, spec.keep)
