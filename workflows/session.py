"""SessionWorkflow: one hosted agent session (the main lane).

The workflow is the control plane: it holds item metadata and the engine state,
decides every id, and asks activities to do all I/O. A user message (update
``submit``) becomes a task; a task is the agent loop: plan the request, call the
model, run its tool calls, until the model answers without tool calls.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.context import engine
    from workflows.context.config import EngineConfig
    from workflows.context.items import Item, Kind, Projection
    from workflows.lane_events import compaction_events
    from workflows.messages import (
        EventsInput,
        GeneratedItem,
        GeneratedItemsInput,
        MeasureTextsInput,
        ModelCallInput,
        ModelCallResult,
        PlanDelta,
        SessionInput,
        SessionStartInput,
        SessionStartResult,
        SessionStatus,
        StoreUserMessageInput,
        SubmitRequest,
        SubmitResult,
        TaskStatus,
        ToolRunInput,
        ToolRunResult,
        submit_text_problem,
    )

LANE = "main"
REPLAY_TOOLS = ["bash", "recall_observation"]
WORKSPACE_TOOLS = ["read_file", "write_file", "list_files", "bash", "recall_observation"]
# Oversized user input reaches the model as a bounded source reference, not verbatim.
OVERSIZED_INPUT_CHARS = 32_000
CONTEXT_LENGTH_EXCEEDED = "ContextLengthExceeded"
# The provider-overflow ladder: after these two retries the error is terminal.
OVERFLOW_LADDER = (Projection.REFERENCE, Projection.MINIMAL_REFERENCE)

# Long activities heartbeat every 2 s: a killed worker's call is retried elsewhere
# after this, not after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
SHORT_IO_TIMEOUT = timedelta(seconds=20)  # store writes and token counts
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["ModelRequestRejected", CONTEXT_LENGTH_EXCEEDED, "WorkerMisconfigured"],
)
IO_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=["WorkerMisconfigured"],
)


class PendingTask:
    def __init__(self, task_id: str, text: str) -> None:
        self.task_id = task_id
        self.text = text


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        self.config = inp.config
        self.next_seq = 0
        self.next_task = 0
        self.turns = 0
        self.closed = False
        self.pending: list[PendingTask] = []  # submitted text waits here only until its task starts
        self.tasks: dict[str, TaskStatus] = {}
        self.state: engine.ContextState | None = None
        self.engine_config: EngineConfig | None = None
        self.plan_version = 0
        self.last_plan: list[tuple[str, Projection]] = []

    # --- client interface ---------------------------------------------------------

    @workflow.update
    async def submit(self, request: SubmitRequest) -> SubmitResult:
        task_id = f"task-{self.next_task:04d}"
        self.next_task += 1
        self.pending.append(PendingTask(task_id, request.text))
        self.tasks[task_id] = TaskStatus(task_id=task_id, state="queued")
        return SubmitResult(task_id=task_id)

    @submit.validator
    def validate_submit(self, request: SubmitRequest) -> None:
        problem = submit_text_problem(request.text)
        if problem is not None:
            raise ValueError(f"submit rejected: {problem}")
        if self.closed:
            raise ValueError("submit rejected: the session is closed")

    @workflow.signal
    def close(self) -> None:
        """Finish the session once the queued tasks are done."""
        self.closed = True

    @workflow.query
    def context(self) -> engine.ContextReport:
        if self.state is None:
            raise ApplicationError("the session is still starting")
        return engine.build_report(self.state)

    @workflow.query
    def status(self) -> SessionStatus:
        return SessionStatus(
            session_id=self.config.session_id,
            tasks=list(self.tasks.values()),
            turns=self.turns,
            items=0 if self.state is None else len(self.state.items),
            next_seq=self.next_seq,
            closed=self.closed,
        )

    # --- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionStatus:
        await self._start()
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closed)
            if not self.pending:
                break
            await self._run_task(self.pending.pop(0))
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    async def _start(self) -> None:
        cfg = self.config
        started: SessionStartResult = await workflow.execute_activity(
            "start_session",
            SessionStartInput(
                session_id=cfg.session_id,
                tenant=cfg.tenant,
                config={"model": cfg.model, "context_window": cfg.context_window, "replay": cfg.replay is not None},
                tools=self._tools(),
                model=cfg.model,
            ),
            result_type=SessionStartResult,
            start_to_close_timeout=SHORT_IO_TIMEOUT,
            retry_policy=IO_RETRY,
        )
        self.engine_config = EngineConfig(
            context_window=cfg.context_window,
            max_output_tokens=cfg.max_output_tokens,
            tool_definition_tokens=started.tool_definition_tokens,
            budget_override=cfg.budget_tokens,
        )
        self.state = engine.new_state(self.engine_config)
        system = await self._store_text(cfg.system_prompt, kind=Kind.SYSTEM, role="system", task_id=None)
        engine.add_item(self.state, system)

    def _tools(self) -> list[str]:
        return REPLAY_TOOLS if self.config.replay is not None else WORKSPACE_TOOLS

    def _seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    @property
    def _preview_chars(self) -> int:
        assert self.engine_config is not None
        return self.engine_config.effective_preview_chars

    async def _store_text(self, text: str, *, kind: str, role: str, task_id: str | None) -> Item:
        seq = self._seq()
        oversized = len(text) > OVERSIZED_INPUT_CHARS
        return await workflow.execute_activity(
            "store_user_message",
            StoreUserMessageInput(
                session_id=self.config.session_id,
                lane=LANE,
                item_id=f"itm-{seq:06d}",
                seq=seq,
                task_id=task_id or "",
                text=text,
                kind=kind,
                role=role,
                model=self.config.model,
                preview_chars=self._preview_chars,
                observation_id=f"obs-{self.config.session_id}-{seq:06d}" if oversized else None,
            ),
            result_type=Item,
            start_to_close_timeout=SHORT_IO_TIMEOUT,
            retry_policy=IO_RETRY,
        )

    # --- one task: the agent loop ------------------------------------------------------

    async def _run_task(self, task: PendingTask) -> None:
        assert self.state is not None
        status = self.tasks[task.task_id]
        status.state = "running"
        engine.begin_task(self.state, task.task_id)
        user = await self._store_text(task.text, kind=Kind.USER, role="user", task_id=task.task_id)
        engine.add_item(self.state, user)
        try:
            for turn in range(self.config.max_turns_per_task):
                status.turns = turn + 1
                self.turns += 1
                await self._compact_if_needed()
                answer = await self._call_model(task.task_id, turn)
                engine.add_item(self.state, answer.stored.item)
                if not answer.stored.tool_calls:
                    status.state = "completed"
                    break
                for call in answer.stored.tool_calls:
                    result = await self._run_tool(task.task_id, answer.stored.item, call.id, call.name)
                    engine.add_item(self.state, result.stored.item)
                    if result.recall is not None:
                        r = result.recall
                        engine.record_recall(self.state, r.observation_id, r.offset, r.limit, r.total_chars)
                engine.end_step(self.state)
            else:
                status.state = "failed"
                status.error = f"the task reached its limit of {self.config.max_turns_per_task} model turns"
        except ActivityError as error:
            status.state = "failed"
            status.error = _describe(error)
        engine.end_task(self.state, task.task_id)
        task.text = ""

    async def _compact_if_needed(self) -> None:
        """The deterministic fallback, when the working set needs it.

        Two-phase: the engine plans, an activity measures the text it generated
        (tiktoken stays out of workflow code), the plan is applied, then the created
        items and the events are stored.
        """
        assert self.state is not None
        if not engine.needs_compaction(self.state):
            return
        plan = engine.plan_fallback(self.state)
        measured: dict[str, dict[Projection, int]] = {}
        if plan.generated:
            counts = await workflow.execute_activity(
                "measure_texts",
                MeasureTextsInput(model=self.config.model, texts={g.key: g.text for g in plan.generated}),
                result_type=dict[str, int],
                start_to_close_timeout=SHORT_IO_TIMEOUT,
                retry_policy=IO_RETRY,
            )
            measured = {key: {Projection.FULL: tokens} for key, tokens in counts.items()}
        result = engine.apply_plan(self.state, plan, measured)
        if result.created:
            await workflow.execute_activity(
                "store_generated_items",
                GeneratedItemsInput(
                    session_id=self.config.session_id,
                    lane=LANE,
                    items=[
                        GeneratedItem(item=self.state.items[c.item_id], text=c.text, number=_generated_number(c.item_id))
                        for c in result.created
                    ],
                ),
                start_to_close_timeout=SHORT_IO_TIMEOUT,
                retry_policy=IO_RETRY,
            )
        await workflow.execute_activity(
            "record_events",
            EventsInput(session_id=self.config.session_id, events=compaction_events(plan, result, self._seq, LANE)),
            start_to_close_timeout=SHORT_IO_TIMEOUT,
            retry_policy=IO_RETRY,
        )

    def _plan_delta(self, entries: list[tuple[str, Projection]]) -> PlanDelta:
        """The plan as a change against the previous one (usually: items appended)."""
        self.plan_version += 1
        base = self.last_plan
        if base and entries[: len(base)] == base:
            delta = PlanDelta(version=self.plan_version, base_version=self.plan_version - 1, entries=entries[len(base):])
        else:
            delta = PlanDelta(version=self.plan_version, base_version=None, entries=entries)
        self.last_plan = entries
        return delta

    async def _call_model(self, task_id: str, turn: int) -> ModelCallResult:
        assert self.state is not None
        response_seq = self._seq()
        ladder: list[Projection] = [Projection.FULL, *OVERFLOW_LADDER]
        for step, projection in enumerate(ladder):
            plan = engine.plan_request(self.state, ladder=projection)
            entries = [(e.item_id, e.projection) for e in plan.entries]
            try:
                return await workflow.execute_activity(
                    "call_model",
                    ModelCallInput(
                        session_id=self.config.session_id,
                        lane=LANE,
                        plan=self._plan_delta(entries),
                        response_item_id=f"itm-{response_seq:06d}",
                        response_seq=response_seq,
                        task_id=task_id,
                        model=self.config.model,
                        max_output_tokens=self.config.max_output_tokens,
                        preview_chars=self._preview_chars,
                        tools=self._tools(),
                        replay=self.config.replay,
                        replay_turn=turn,
                    ),
                    result_type=ModelCallResult,
                    start_to_close_timeout=timedelta(seconds=300),
                    heartbeat_timeout=HEARTBEAT_TIMEOUT,
                    retry_policy=MODEL_RETRY,
                )
            except ActivityError as error:
                cause = error.cause
                overflow = isinstance(cause, ApplicationError) and cause.type == CONTEXT_LENGTH_EXCEEDED
                if not overflow or step == len(ladder) - 1:
                    raise
                workflow.logger.warning("provider overflow; retrying with %s projection", ladder[step + 1])
        raise AssertionError("unreachable")

    async def _run_tool(self, task_id: str, assistant: Item, call_id: str, name: str) -> ToolRunResult:
        seq = self._seq()
        return await workflow.execute_activity(
            "run_tool",
            ToolRunInput(
                session_id=self.config.session_id,
                lane=LANE,
                call_id=call_id,
                tool_name=name,
                assistant_item_id=assistant.id,
                result_item_id=f"itm-{seq:06d}",
                result_seq=seq,
                observation_id=f"obs-{self.config.session_id}-{seq:06d}",
                task_id=task_id,
                group=assistant.seq,
                model=self.config.model,
                preview_chars=self._preview_chars,
                replay=self.config.replay,
            ),
            result_type=ToolRunResult,
            start_to_close_timeout=timedelta(seconds=300),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=IO_RETRY,
        )


def _generated_number(item_id: str) -> int:
    """Generated ids are "<kind>-<n>" with n unique in the lane."""
    return int(item_id.rsplit("-", 1)[1])


def _describe(error: ActivityError) -> str:
    cause = error.cause
    while cause is not None and cause.cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause
    return str(cause or error)
