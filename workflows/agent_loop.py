"""One model step of the hosted agent loop, shared by the main lane and subagent lanes.

A step: compact if needed, plan the request, call the model (down the provider-overflow
ladder when the request is too long), then answer each of its tool calls in order (and, in
a replay, add the user text recorded after the turn). Most
tools run in the tool activity; ``condense_context`` and the episode markers run here,
deterministically; ``spawn_subagent`` goes to the lane's :class:`Spawner`.

Workflow code only. Callers hold ``lane.lock`` around a step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from temporalio.exceptions import ActivityError, ApplicationError, FailureError

from workflows import activity_calls as calls
from workflows import patches
from workflows.context import EngineError, Item, Kind, engine
from workflows.contract.failures import CONTEXT_LENGTH_EXCEEDED
from workflows.contract.items import ToolCallRef
from workflows.contract.lane_events import EPISODE_BEGUN, EPISODE_ENDED, event
from workflows.contract.model import ModelCallResult
from workflows.contract.tool_runs import ToolRunInput, ToolRunResult
from workflows.contract.tools import BEGIN_EPISODE_TOOL, CONDENSE_TOOL, EPISODE_TOOLS, PIN_NOTE_TOOL, RECALL_TOOL, SPAWN_TOOL
from workflows.lane import Lane, LoopSettings
from workflows.pinned_notes import pin_from_tool
from workflows.usage import record_usage

# Gates store-only tool calls running as local activities (a marker instead of an activity
# and a workflow task of their own): runs recorded before keep their activities.
LOCAL_STORE_TOOLS_PATCH = "local-store-only-tools"
# Since: the items a step's compaction or assembly generates are written by the model call that
# follows (ModelCallInput.generated), not by an activity and a workflow task of their own.
MODEL_CALL_WRITES_PATCH = "model-call-writes-generated"


@dataclass(frozen=True)
class StepOutcome:
    done: bool  # the model answered without tool calls
    answer: Item  # the assistant item of this step


class Spawner(Protocol):
    """Who answers ``spawn_subagent`` calls: the session's subagent host, or a refusal."""

    async def start(self, lane: Lane, task_id: str, calls: list[ToolCallRef], sent: engine.RequestPlan) -> None:
        """Start the subagents of one answer (all before any is awaited, so they run concurrently)."""

    async def answer(self, lane: Lane, task_id: str, assistant: Item, call: ToolCallRef) -> Item | str:
        """The handoff item recorded for ``call``, or the text of a refusal."""


class NoSubagents:
    """Subagent lanes do not start subagents of their own (one level of delegation)."""

    async def start(self, lane: Lane, task_id: str, calls: list[ToolCallRef], sent: engine.RequestPlan) -> None:
        return None

    async def answer(self, lane: Lane, task_id: str, assistant: Item, call: ToolCallRef) -> Item | str:
        return "spawn_subagent refused: a subagent cannot start subagents of its own; do the work yourself."


class AgentLoop:
    def __init__(self, settings: LoopSettings, spawner: Spawner) -> None:
        self.settings = settings
        self.spawner = spawner

    async def step(self, lane: Lane, task_id: str, turn: int) -> StepOutcome:
        try:
            return await self._step(lane, task_id, turn)
        except Exception:  # a failed step still logs what it deferred (cancellation is not an Exception)
            await lane.flush_events()
            raise

    async def _step(self, lane: Lane, task_id: str, turn: int) -> StepOutcome:
        lane.carry_generated = patches.patched(MODEL_CALL_WRITES_PATCH)  # the model call stores them
        try:
            await lane.compact_if_needed(self.settings.compaction)
            await lane.assemble()
        finally:
            lane.carry_generated = False
        answer, sent = await self.call_model(lane, task_id, turn)
        assistant = engine.add_item(lane.state, answer.stored.item)
        spawns = [c for c in answer.stored.tool_calls if c.name == SPAWN_TOOL]
        if spawns:
            await self.spawner.start(lane, task_id, spawns, sent)
        for call in answer.stored.tool_calls:
            if call.name == SPAWN_TOOL:
                handoff = await self.spawner.answer(lane, task_id, assistant, call)
                if isinstance(handoff, Item):
                    engine.add_item(lane.state, handoff)
                    continue
                result = await self.run_tool(lane, task_id, assistant, call, (handoff, 1))
            else:
                result = await self.run_tool(lane, task_id, assistant, call, await self._workflow_tool(lane, call))
            engine.add_item(lane.state, result.stored.item)
            if result.recall is not None:
                r = result.recall
                engine.record_recall(lane.state, r.observation_id, r.offset, r.limit, r.total_chars)
        # A replay feeds the user text recorded after this turn (a reply, a format error the
        # recorded agent got): the task goes on, as the recorded agent's did.
        for text in answer.follow_ups:
            await lane.add_text(text, kind=Kind.USER, role="user", task_id=task_id)
        await lane.flush_events()  # what no tool activity took (an answer without tool calls)
        engine.end_step(lane.state)
        return StepOutcome(done=not answer.stored.tool_calls and not answer.follow_ups, answer=assistant)

    async def call_model(self, lane: Lane, task_id: str, turn: int) -> tuple[ModelCallResult, engine.RequestPlan]:
        """The model's answer and the plan that was sent: the first rung of the overflow
        ladder that fits the budget (rules 2: nothing over budget is sent; when no rung fits,
        the typed ``RequestDoesNotFit`` rejection is raised without a provider call), and a
        lower rung when the provider still refuses (its count and ours disagree)."""
        s = self.settings
        response_seq = lane.next_seq()
        ladder = engine.OVERFLOW_LADDER
        rung = 0
        while True:
            rung, plan = await lane.plan_within_budget(rung, turn)
            try:
                answer = await calls.call_model(lane.model_call(s, plan, response_seq, task_id, turn), s.give_up)
                lane.later.carried_written()
                await record_usage(lane, "agent", s.model, answer.usage, defer=True, turn=turn, task_id=task_id)
                return answer, plan
            except ActivityError as error:
                cause = error.cause
                overflow = isinstance(cause, ApplicationError) and cause.type == CONTEXT_LENGTH_EXCEEDED
                if not overflow:
                    raise
                last = rung == len(ladder) - 1
                await calls.record_events(s.session_id, [event(
                    "context.overflow.failed" if last else "context.overflow.retry",
                    {"turn": turn, "rejected": ladder[rung].value, "next": None if last else ladder[rung + 1].value,
                     "request_tokens": plan.total_tokens, "error": str(cause)},
                    lane.next_event_seq(), lane.event_lane,
                )])
                if last:
                    raise
                rung += 1

    async def _workflow_tool(self, lane: Lane, call: ToolCallRef) -> tuple[str, int] | None:
        """The answer of a tool the workflow runs itself; None for the tool activity's tools."""
        if call.name == CONDENSE_TOOL:
            return await self._condense(lane, call.arguments)
        if call.name in EPISODE_TOOLS:
            return await self._episode(lane, call.name, call.arguments)
        if call.name == PIN_NOTE_TOOL:
            return await pin_from_tool(lane, call.arguments, lane.state.current_task or "")
        return None

    async def _condense(self, lane: Lane, arguments: str | None) -> tuple[str, int]:
        """Deterministic, no model call. The answer says what was archived and how to recall
        it, or why nothing changed."""
        result = await lane.condense(arguments or "{}")
        if result.status == "accepted":
            return (
                f"condense_context accepted: the live memory is now {result.memory_id}; {result.archived} "
                "older items left the context. Their exact tool output stays recallable with "
                "recall_observation on the observation:// addresses in the memory and the checkpoint.",
                0,
            )
        return f"condense_context {result.status}: {result.reason}. Nothing changed.", 1

    async def _episode(self, lane: Lane, name: str, arguments: str | None) -> tuple[str, int]:
        """begin_episode / end_episode: engine refusals are answers the model can act on."""
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
            episode_id = _text(args, "episode_id")
            if name == BEGIN_EPISODE_TOOL:
                depends_on = args.get("depends_on") or []
                if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
                    raise ValueError("depends_on must be a list of episode ids")
                episode = engine.begin_episode(lane.state, episode_id, _text(args, "kind"), _text(args, "goal"),
                                               depends_on)
                await lane.log_event(EPISODE_BEGUN, {"episode_id": episode.id, "kind": episode.kind.value,
                                                       "goal": episode.goal, "depends_on": episode.depends_on})
                return f"episode {episode.id} ({episode.kind.value}) begun", 0
            conclusion = args.get("conclusion")
            if conclusion is not None and not isinstance(conclusion, str):
                raise ValueError("conclusion must be text")
            episode = engine.end_episode(lane.state, episode_id, conclusion)
            await lane.log_event(EPISODE_ENDED, {"episode_id": episode.id})
            return f"episode {episode.id} ended", 0
        except (ValueError, EngineError) as error:
            return f"{name} refused: {error}", 1

    def _store_only(self, call: ToolCallRef, output: tuple[str, int] | None) -> bool:
        """Whether the call only reads and writes the store: an answer the workflow already
        has, a recall, or a replay's recorded output (a replay runs nothing in a workspace).
        Such a call is short and touches nothing outside, so it runs as a local activity
        (idempotent like the activity: a retry finds the stored result). Workspace tools
        stay activities with heartbeats: they may run for minutes."""
        replay = self.settings.replay
        return (output is not None or call.name == RECALL_TOOL
                or (replay is not None and not replay.tools_as_activities))

    async def run_tool(self, lane: Lane, task_id: str, assistant: Item, call: ToolCallRef,
                       output: tuple[str, int] | None = None) -> ToolRunResult:
        """Run ``call`` in the tool activity, or store the answer the workflow already has."""
        s = self.settings
        seq = lane.next_seq()
        events = lane.take_pending_events()
        local = self._store_only(call, output) and patches.patched(LOCAL_STORE_TOOLS_PATCH)
        run = calls.run_tool(
            ToolRunInput(
                session_id=s.session_id,
                lane=lane.data.lane,
                call_id=call.id,
                tool_name=call.name,
                assistant_item_id=assistant.id,
                result_item_id=lane.item_id(seq),
                result_seq=seq,
                observation_id=lane.observation_id(seq),
                task_id=task_id,
                group=assistant.seq,
                model=s.model,
                preview_chars=lane.preview_chars,
                preview_lines=lane.preview_lines,
                replay=s.replay,
                output=None if output is None else output[0],
                exit_code=0 if output is None else output[1],
                network=s.tool_network,
                recall_max_chars=lane.preview_chars if lane.rules_2 else None,
                events=events,
            ),
            s.give_up,
            local,
        )
        try:
            return await run
        except ActivityError:  # the events are written with the result only: the failed step flushes them
            lane.pending_events[:0] = events
            raise


def _text(args: dict, key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be non-empty text")
    return value


def describe(error: ActivityError) -> str:
    """The innermost application error of a failed activity, for a task's error message."""
    cause: BaseException | None = error.cause
    while isinstance(cause, FailureError) and cause.cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    return str(cause or error)
