"""LaneWorkflow: one subagent, a child workflow of its session.

Its requests start with the parent's prefix (ids and projections it was given, never
content), then its own branch: the brief, and its own model turns. It runs the same
agent loop as the main lane on its own budget (compacting only its branch), then turns
its final answer into a structured handoff stored in its lane, tells the parent by
signal, and returns the same reference. Its items, events and handoff stay in the
session's store under its lane name, inspectable like the main lane's.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows.agent_loop import AgentLoop, NoSubagents, describe
    from workflows.context import EngineConfig, Kind, counts_of, engine, ids
    from workflows.contract import rejections
    from workflows.contract.handoff import brief_message
    from workflows.contract.lane_state import LaneState
    from workflows.contract.lanes import FinishLaneInput, HandoffRef, LaneInput
    from workflows.contract.session_start import SessionStartInput
    from workflows.lane import Lane, LoopSettings, new_session_profile, patched_engine_options
    from workflows.usage import usage_policy

LANE_FINISHED_SIGNAL = "lane_finished"  # SessionWorkflow.lane_finished


@workflow.defn(name="LaneWorkflow")
class LaneWorkflow:
    @workflow.init
    def __init__(self, inp: LaneInput) -> None:
        self.lane: Lane | None = None
        self.turns = 0
        self.state = "starting"

    @workflow.query
    def context(self) -> engine.ContextReport:
        if self.lane is None:
            raise rejections.still_starting("lane")
        return engine.build_report(self.lane.state)

    @workflow.run
    async def run(self, inp: LaneInput) -> HandoffRef:
        cfg = inp.config
        started = await calls.start_session(SessionStartInput(
            session_id=inp.session_id, tenant="default", config={}, tools=cfg.tools, model=cfg.model))
        config = EngineConfig(
            context_window=cfg.context_window, max_output_tokens=cfg.max_output_tokens,
            tool_definition_tokens=started.tool_definition_tokens, budget_tokens=cfg.budget_tokens,
            llm_condensation=cfg.compaction.enabled, preview_chars=cfg.preview_chars,
            id_prefix=ids.generated_id_prefix(inp.lane),
            generated_role=cfg.generated_role,
            **patched_engine_options(),
            **new_session_profile(cfg.compaction.enabled),
        )
        lane = Lane(LaneState(session_id=inp.session_id, lane=inp.lane, model=cfg.model,
                              context=engine.new_state(config, inp.shared_prefix)),
                    usage_policy(live=cfg.replay is None, prices=cfg.prices))
        task_id = ids.child_task_id(inp.lane)
        async with lane.lock:
            self.lane = lane
            engine.begin_task(lane.state, task_id)
            await lane.add_text(brief_message(inp.brief), kind=Kind.USER, role="user", task_id=task_id)
        self.state = "running"
        loop = AgentLoop(LoopSettings.of(inp.session_id, cfg, cfg.tools), NoSubagents())
        final: str | None = None
        failure: str | None = None
        try:
            for turn in range(cfg.max_turns):
                self.turns = turn + 1
                async with lane.lock:
                    outcome = await loop.step(lane, task_id, turn)
                final = outcome.answer.id  # at the turn limit, its last answer still reaches the parent
                if outcome.done:
                    break
            else:
                failure = f"the subagent reached its limit of {cfg.max_turns} model turns"
        except ActivityError as error:
            failure = describe(error)
        except ApplicationError as error:  # raised in workflow code: the request does not fit
            if error.type != rejections.REQUEST_UNFIT:
                raise
            failure = str(error)
        async with lane.lock:
            ended = engine.end_task(lane.state, task_id, abandoned=True)
            if ended.abandoned_episodes:
                await lane.log_abandoned_episodes(ended.abandoned_episodes, "the subagent's task ended")
            seq = lane.next_seq()
            ref = await calls.finish_lane(FinishLaneInput(
                session_id=inp.session_id, lane=inp.lane, workflow_id=workflow.info().workflow_id,
                final_item_id=final, failure=failure, handoff_item_id=lane.item_id(seq), handoff_seq=seq,
                task_id=task_id, model=cfg.model, preview_chars=lane.preview_chars))
        self.state = ref.status
        if lane.data.usage.calls:
            ref.usage = counts_of(lane.data.usage)
        try:
            await workflow.get_external_workflow_handle(inp.parent_workflow_id).signal(LANE_FINISHED_SIGNAL, ref)
        except Exception as error:
            workflow.logger.warning("lane %s: could not signal parent %s: %s", inp.lane, inp.parent_workflow_id, error)
        return ref
