"""SessionWorkflow: one agent session (the main lane).

The workflow is the control plane: it holds item metadata and the engine state,
decides every id, and asks activities to do all I/O. Two ways to drive it:

- hosted: a user message (update ``submit``) becomes a task, and a task is the agent
  loop: plan the request, call the model, run its tool calls, until the model
  answers without tool calls;
- external: an agent whose loop runs elsewhere appends items, asks for the next
  request (``prepare_request``), marks episodes and condenses.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows import activity_calls as calls
    from workflows import capability_admission, exhaustive, patches, pinned_notes
    from workflows import task_events as task_log
    from workflows.agent_loop import AgentLoop
    from workflows.context import Item, Kind, UsageTotals, engine, ids
    from workflows.contract import rejections
    from workflows.contract.checkpoint import (
        KEPT_TASK_STATUSES,
        LoadCheckpointInput,
        PendingTaskRecord,
        RunningTask,
        SaveCheckpointInput,
        SessionCheckpoint,
    )
    from workflows.contract.external_calls import RecentCalls, check_items, items_digest
    from workflows.contract.lane_events import EPISODE_BEGUN, EPISODE_ENDED
    from workflows.contract.lanes import HandoffRef
    from workflows.contract.session import (
        AppendItemsRequest,
        AppendItemsResult,
        CapabilityRequest,
        CapabilityResult,
        ChildLane,
        CondenseRequest,
        CondenseResult,
        EpisodeBegin,
        EpisodeEnd,
        ExternalItem,
        PinRequest,
        PinResult,
        PreparedRequest,
        SessionInput,
        SessionMode,
        SessionStatus,
        SpawnRequest,
        SpawnResult,
        StepRequest,
        StepResult,
        SubmitRequest,
        SubmitResult,
        TaskStatus,
        capability_problem,
        note_problem,
        session_tools,
        submit_text_problem,
    )
    from workflows.external_tasks import STEP_WRITES_LATER_PATCH, ContinuedCheck, ExternalTasks
    from workflows.lane import EPISODE_EVENTS_PATCH, Lane, LoopSettings, patched_engine_options
    from workflows.recovery import recover
    from workflows.session_start import start_lane
    from workflows.subagents import RepairCounts, SpawnRefused, SubagentHost
    from workflows.usage import UsagePolicy, usage_policy

# Runs continue as new in every mode (external agents' calls count), not only after model turns.
CONTINUE_ALL_MODES_PATCH = "continue-as-new-all-modes"
# A step's items are stored by an activity, not a local activity: a local activity writes within
# the workflow task that runs the update, and when that task is lost its rows stay while the
# next task hands the same seqs to other content.
STEP_ITEMS_ACTIVITY_PATCH = "step-items-activity"
# A step checks the request its caller sent before it (StepRequest.continued), and logs a miss
CONTINUED_STEP_PATCH = "continued-step"
# Notes an external agent appends pass pin_note's budget check (one measuring activity first).
EXTERNAL_NOTE_CHECK_PATCH = "external-note-budget-check"
# A run's history past either figure continues as new (Temporal's own limits are 51,200
# events and 50 MB; it warns from 10,240 events).
RUN_HISTORY_EVENTS = 8_000
RUN_HISTORY_BYTES = 8 * 1024 * 1024


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        self.config = inp.config
        if "mode" not in inp.config.model_fields_set:  # started before modes existed: it takes either kind of call
            self.config.mode = None
        self.restoring = inp.checkpoint_id is not None  # a run continued as new: its state comes from a checkpoint
        self.next_task = 0
        self.turns = 0
        self.closed = False
        self.pending: list[PendingTaskRecord] = []  # submitted text waits here only until its task starts
        self.tasks: dict[str, TaskStatus] = {}
        self.lane: Lane | None = None
        self.runs = 0  # runs before this one (continue-as-new)
        self.turns_this_run = 0
        self.updates_this_run = 0
        self.continue_all_modes = False  # decided once per run, in run()
        # Set while the run hands over to the next: validators refuse new calls (typed, retried
        # by clients), so the hand-over is not postponed by every call that keeps arriving.
        self.handing_over = False
        self.recent_calls = RecentCalls()
        self.end_refusals = exhaustive.RefusalTracker()  # exhaustive tasks ended early
        self.external = ExternalTasks(self.tasks)  # the external agent's task (external mode)
        self.resume: RunningTask | None = None  # a task a previous run was in the middle of
        self.subagents = SubagentHost(self.config, workflow.info().workflow_id, self._tools())
        self.loop = AgentLoop(LoopSettings.of(self.config.session_id, self.config, self._tools()), self.subagents)
        self.engine_options: dict[str, bool | int] = {}  # decided once per run, in run()

    # --- hosted mode -------------------------------------------------------------------

    @workflow.update
    async def submit(self, request: SubmitRequest) -> SubmitResult:
        self.updates_this_run += 1
        if (done := self.recent_calls.repeated(request.key, request.digest or "")) is not None:
            return SubmitResult(task_id=done.item_ids[0], repeated=True, call_id=request.call_id)
        task_id = self._new_task_id()
        self.recent_calls.record(request.key, request.digest or "", [task_id])
        self.pending.append(PendingTaskRecord(task_id=task_id, text=request.text, exhaustive=request.exhaustive))
        self.tasks[task_id] = TaskStatus(task_id=task_id, state="queued")
        if task_log.events_on():  # logged before the task can start (the lane exists once the session started)
            await task_log.log(self.lane or await self._ready_lane(), task_log.QUEUED, self.tasks[task_id])
        return SubmitResult(task_id=task_id, call_id=request.call_id)

    @submit.validator
    def validate_submit(self, request: SubmitRequest) -> None:
        self._check_mode("hosted", "submit")
        if self.recent_calls.repeated(request.key, request.digest or "") is not None:
            return  # answered from its record (also once the session closed)
        if (problem := submit_text_problem(request.text)) is not None:
            raise rejections.invalid_input(f"submit rejected: {problem}")
        self._check_open("submit")

    @workflow.signal
    def close(self) -> None:
        """Finish the session once the queued tasks are done."""
        self.closed = True

    @workflow.signal
    async def lane_finished(self, ref: HandoffRef) -> None:
        """A subagent lane handed off. A model step waiting for it records it as its tool
        result; otherwise it becomes an item of the lane now."""
        # a new run learns its children from the checkpoint: wait for it before deciding
        lane = await self._ready_lane()
        if not self.subagents.arrive(ref) or self.subagents.is_awaited(ref.lane):
            return
        async with lane.lock:
            counts = RepairCounts()
            await self.subagents.record_unawaited(lane, ref.lane, counts)

    @workflow.update
    async def spawn_subagent(self, request: SpawnRequest) -> SpawnResult:
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            try:
                return await self.subagents.spawn(lane, request)
            except SpawnRefused as refused:
                raise refused.rejection() from None

    @spawn_subagent.validator
    def validate_spawn_subagent(self, request: SpawnRequest) -> None:
        self._check_open("spawn_subagent")
        try:
            self.subagents.check_request(request)
            self.subagents.check_capacity()
        except SpawnRefused as refused:
            raise refused.rejection() from None

    @workflow.query
    def subagents_status(self) -> list[ChildLane]:
        self._lane()  # a run restoring its checkpoint does not know its children yet
        return list(self.subagents.children.values())

    @workflow.query
    def context(self) -> engine.ContextReport:
        return engine.build_report(self._lane().state)

    @workflow.query
    def status(self) -> SessionStatus:
        if self.lane is None and self.restoring:  # tasks, turns and usage are in the checkpoint still
            raise rejections.still_starting("session")
        return SessionStatus(
            session_id=self.config.session_id,
            tasks=list(self.tasks.values()),
            turns=self.turns,
            items=0 if self.lane is None else len(self.lane.state.items),
            next_seq=0 if self.lane is None else self.lane.data.next_seq,
            closed=self.closed,
            usage=UsageTotals() if self.lane is None else self.lane.data.usage,
        )

    # --- external-agent mode -----------------------------------------------------------

    @workflow.update
    async def append_items(self, request: AppendItemsRequest) -> AppendItemsResult:
        lane = await self._ready_lane()
        self.updates_this_run += 1
        async with lane.lock:
            digest = (request.digest or items_digest(request.items)) if request.key else ""
            if (done := self.recent_calls.repeated(request.key, digest)) is not None:
                return AppendItemsResult(item_ids=done.item_ids, repeated=True, call_id=request.call_id)
            if request.usage is not None:  # the gateway's answer: its event goes with the items' activity
                await self.external.record_reported_usage(lane, request.usage, defer=True)
            item_ids = [i.id for i in await self._append(lane, request.items)]
            self.recent_calls.record(request.key, digest, item_ids)
        return AppendItemsResult(item_ids=item_ids, call_id=request.call_id)

    @append_items.validator
    def validate_append_items(self, request: AppendItemsRequest) -> None:
        self._check_external_call("append_items", request.items, request.key, request.digest)

    @workflow.update
    async def prepare_request(self) -> PreparedRequest:
        lane = await self._ready_lane()
        self.updates_this_run += 1
        async with lane.lock:
            return await self.external.prepare(lane, self.config, self._tools())

    @prepare_request.validator
    def validate_prepare_request(self) -> None:
        self._check_mode("external", "prepare_request")
        self._check_not_handing_over("prepare_request")

    @workflow.update
    async def step(self, request: StepRequest) -> StepResult:
        """One round trip per agent step: append the step's items, then prepare the request."""
        lane = await self._ready_lane()
        self.updates_this_run += 1
        later = request.write_behind and patches.patched(STEP_WRITES_LATER_PATCH)
        async with lane.lock:
            digest = (request.digest or items_digest(request.items)) if request.step_id else ""
            done = self.recent_calls.repeated(request.step_id, digest)
            check: ContinuedCheck | None = None
            if done is None:
                if request.continued is not None and patches.patched(CONTINUED_STEP_PATCH):
                    check = ContinuedCheck(request.continued, lane.state.generation)
                    self.external.prepared_tokens = request.continued.tokens  # the usage below is its
                if request.usage is not None:  # before the items: its event goes with their activity
                    await self.external.record_reported_usage(lane, request.usage, defer=bool(request.items))
                # runs recorded before the patch stored a step's items with a local activity, whose
                # rows outlive a lost workflow task (and its seqs went to other content)
                local = not patches.patched(STEP_ITEMS_ACTIVITY_PATCH)
                item_ids = ([i.id for i in await self._append(lane, request.items, local=local, later=later,
                                                              check=check)]
                            if request.items else [])
                self.recent_calls.record(request.step_id, digest, item_ids)
                if check is not None:
                    await check.log_miss(lane)
            stored = item_ids if done is None else done.item_ids
            try:
                prepared = await self.external.prepare(lane, self.config, self._tools(), later)
            except ApplicationError as error:  # the items are stored: a refusal of the request says so
                if error.type != rejections.REQUEST_UNFIT or not stored:
                    raise
                raise rejections.unfit_after_store(error, stored) from None
        return StepResult(item_ids=stored, request=prepared, repeated=done is not None, call_id=request.call_id,
                          continued_held=None if check is None else check.held)

    @step.validator
    def validate_step(self, request: StepRequest) -> None:
        self._check_external_call("step", request.items, request.step_id, request.digest)

    def _check_external_call(self, action: str, items: list[ExternalItem], key: str | None,
                             digest: str | None) -> None:
        self._check_mode("external", action)
        self._check_open(action)
        if key is not None and self.recent_calls.repeated(key, digest or items_digest(items)) is not None:
            # a repeat is answered from its record and appends nothing: its items were checked when
            # first appended, and checked again now they would pair with themselves (a tool result
            # "already answered")
            return
        check_items(None if self.lane is None else self.lane.state, items)

    async def _append(self, lane: Lane, items: list[ExternalItem], local: bool = False,
                      later: bool = False, check: ContinuedCheck | None = None) -> list[Item]:
        """Store the items and add them to the lane (callers hold the lock). Each user message
        begins a task, ending the previous one (or only the first does, when the conversation is
        the task: ``SessionConfig.tasks``). ``local``: stored by a local activity (steps
        only: runs recorded before them never took this path); ``later``: see Lane.store_external."""
        with rejections.engine_refusals():  # the validator refuses first; this keeps a miss from wedging the session
            users = sum(1 for item in items if item.kind == Kind.USER.value)
            if not lane.rules_2:
                for _ in range(users):  # end the task before, repair, begin the next
                    self.external.end_owning(lane)
                    await self._recover(lane)
                    self.external.begin(lane, self._new_task_id())
                added = await lane.add_external(items)
                self.turns += self.external.progress(items, added)
                return added
            if any(i.kind == Kind.NOTE.value for i in items) and patches.patched(EXTERNAL_NOTE_CHECK_PATCH):
                await pinned_notes.check_appended(lane, items)  # before anything is stored
            # Repairs first (they may add items: the lane's seqs stay in order), then the items
            # are stored, and only then does the task change: input the activity refuses (a
            # content_ref that is not stored) fails with the context as it was.
            if self.config.tasks == "conversation":  # one task, begun by the first user message
                users = min(users, 0 if self.external.owning(lane) is not None else 1)
            if users:
                await self._recover(lane, ongoing=self.external.task)
            task_ids = [self._new_task_id() for _ in range(users)]  # reserved before any await
            await self.external.defer_switch_events(lane, task_ids)
            stored = await lane.store_external(items, task_ids[-1] if task_ids else lane.state.current_task, local,
                                               later)
            for task_id in task_ids:
                self.external.switch(lane, task_id)
            added = []
            for item in stored:
                added.append(engine.add_item(lane.state, item))
                if check is not None:
                    check.after(len(added), lane.state)
            self.turns += self.external.progress(items, added)
            return added

    @workflow.update
    async def add_capability(self, request: CapabilityRequest) -> CapabilityResult:
        """Admit a tool schema or skill body (step- or task-scoped) for the current or next
        task; refused (or, a manual skill, skipped) with need, margin and ceiling when it
        does not fit."""
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            return await capability_admission.admit(lane, request)

    @add_capability.validator
    def validate_add_capability(self, request: CapabilityRequest) -> None:
        self._check_open("add_capability")
        if (problem := capability_problem(request)) is not None:
            raise rejections.invalid_input(f"add_capability rejected: {problem}")

    @workflow.update
    async def pin_note(self, request: PinRequest) -> PinResult:
        """Pin a note for the rest of the session, if pinned content stays within its budget share."""
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            return await pinned_notes.pin(lane, str(request.text), lane.state.current_task)

    @pin_note.validator
    def validate_pin_note(self, request: PinRequest) -> None:
        self._check_open("pin_note")
        if (problem := note_problem(request.text)) is not None:
            raise rejections.invalid_input(f"pin_note rejected: {problem}")

    @workflow.update
    async def begin_episode(self, request: EpisodeBegin) -> None:
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            episode = rejections.engine_call(engine.begin_episode, lane.state, request.episode_id, request.kind, request.goal,
                                   request.depends_on)
            if patches.patched(EPISODE_EVENTS_PATCH):
                await lane.log_event(EPISODE_BEGUN, {"episode_id": episode.id, "kind": episode.kind.value,
                                                       "goal": episode.goal, "depends_on": episode.depends_on})

    @begin_episode.validator
    def validate_begin_episode(self, request: EpisodeBegin) -> None:
        self._check_not_handing_over("begin_episode")
        if self.lane is None:
            return  # still starting: the handler waits for the lane and checks then
        with rejections.engine_refusals():
            engine.check_begin(self.lane.state, request.episode_id, request.kind, request.goal, request.depends_on)

    @workflow.update
    async def end_episode(self, request: EpisodeEnd) -> None:
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            rejections.engine_call(engine.end_episode, lane.state, request.episode_id, request.conclusion)
            if patches.patched(EPISODE_EVENTS_PATCH):
                await lane.log_event(EPISODE_ENDED, {"episode_id": request.episode_id})

    @end_episode.validator
    def validate_end_episode(self, request: EpisodeEnd) -> None:
        self._check_not_handing_over("end_episode")
        if self.lane is None:
            return  # still starting: the handler waits for the lane and checks then
        with rejections.engine_refusals():
            engine.check_end(self.lane.state, request.episode_id, request.conclusion)

    @workflow.update
    async def condense_context(self, request: CondenseRequest) -> CondenseResult:
        self.updates_this_run += 1
        lane = await self._ready_lane()
        async with lane.lock:
            return await lane.condense(request.memory)

    @condense_context.validator
    def validate_condense_context(self, request: CondenseRequest) -> None:
        self._check_not_handing_over("condense_context")

    # --- main loop ---------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionStatus:
        self.engine_options = patched_engine_options()
        self.continue_all_modes = patches.patched(CONTINUE_ALL_MODES_PATCH)
        if inp.checkpoint_id is None:
            await self._start()
        else:
            await self._restore(inp.checkpoint_id)
        if self.resume is not None:
            resume, self.resume = self.resume, None
            await self._run_task(resume.task_id, None, start_turn=resume.next_turn)
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closed or self._should_continue())
            if self.pending:
                task = self.pending.pop(0)
                await self._run_task(task.task_id, task.text, task.exhaustive)
            elif self.closed:
                await self.external.close(self.lane)
                break
            if self._should_continue():
                await self._continue_as_new(None)
        if self.subagents.running():  # never finish with children nobody would hear from
            await self.subagents.drain(self._lane())
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self.lane is not None:
            await self.lane.later.settle()  # a last step's generated items are stored before the run ends
        return self.status()

    # --- continue-as-new ---------------------------------------------------------------

    def _should_continue(self) -> bool:
        if self.lane is None:
            return False
        info = workflow.info()
        if not self.continue_all_modes:  # runs recorded before: only model turns counted
            return self.turns_this_run > 0 and (self.turns_this_run >= self.config.turns_per_run
                                                or info.is_continue_as_new_suggested())
        if self.turns_this_run == 0 and self.updates_this_run == 0:
            return False  # a new run that has done nothing yet
        return (self.turns_this_run >= self.config.turns_per_run
                or self.updates_this_run >= self.config.updates_per_run
                or info.get_current_history_length() >= RUN_HISTORY_EVENTS
                or info.get_current_history_size() >= RUN_HISTORY_BYTES
                or info.is_continue_as_new_suggested())

    def _checkpoint(self, running: RunningTask | None) -> SessionCheckpoint:
        finished = [t for t in self.tasks.values() if t.finished]
        dropped = {t.task_id for t in finished[:-KEPT_TASK_STATUSES]} if len(finished) > KEPT_TASK_STATUSES else set()
        return SessionCheckpoint(
            lane=self._lane().data,
            next_task=self.next_task,
            turns=self.turns,
            runs=self.runs + 1,
            tasks=[t for t in self.tasks.values() if t.task_id not in dropped],
            pending=[p.model_copy() for p in self.pending],
            running=running,
            external_task=self.external.task,
            closed=self.closed,
            children=self.subagents.kept_children(),
            next_child=self.subagents.next_child,
            recent_calls=self.recent_calls,
            prepared_tokens=self.external.prepared_tokens,
        )

    async def _continue_as_new(self, running: RunningTask | None) -> None:
        """Checkpoint to PostgreSQL and continue with only its id.

        Handlers may change state while the checkpoint is being written (a submit
        arriving), so it is written again until nothing changed in between.
        """
        if self.continue_all_modes:
            self.handing_over = True
        while True:
            await workflow.wait_condition(workflow.all_handlers_finished)
            await self._lane().later.settle()  # the next run reads what this one's steps generated
            checkpoint = self._checkpoint(running)
            checkpoint_id = ids.checkpoint_id(self.config.session_id, checkpoint.runs, workflow.uuid4().hex[:8])
            await calls.save_checkpoint(
                SaveCheckpointInput(session_id=self.config.session_id, checkpoint_id=checkpoint_id, checkpoint=checkpoint)
            )
            if workflow.all_handlers_finished() and self._checkpoint(running) == checkpoint:
                break
        workflow.continue_as_new(SessionInput(config=self.config, checkpoint_id=checkpoint_id))

    async def _restore(self, checkpoint_id: str) -> None:
        checkpoint = await calls.load_checkpoint(
            LoadCheckpointInput(session_id=self.config.session_id, checkpoint_id=checkpoint_id)
        )
        self.lane = Lane(checkpoint.lane, self._usage_policy())
        context = self.lane.state
        context.config = context.config.model_copy(update=self.engine_options)
        self.next_task = checkpoint.next_task
        self.turns = checkpoint.turns
        self.runs = checkpoint.runs
        self.tasks = {t.task_id: t for t in checkpoint.tasks}
        self.external = ExternalTasks(self.tasks, checkpoint.external_task, checkpoint.prepared_tokens)
        self.pending = checkpoint.pending + self.pending
        self.resume = checkpoint.running
        self.closed = self.closed or checkpoint.closed
        self.subagents.children = {c.lane: c for c in checkpoint.children}
        self.subagents.next_child = checkpoint.next_child
        self.recent_calls = checkpoint.recent_calls

    async def _start(self) -> None:
        await start_lane(self.config, self._tools(), self.engine_options, self._usage_policy, self._publish)

    def _publish(self, lane: Lane) -> None:
        self.lane = lane

    def _lane(self) -> Lane:
        if self.lane is None:
            raise rejections.still_starting("session")
        return self.lane

    async def _ready_lane(self) -> Lane:
        await workflow.wait_condition(lambda: self.lane is not None)
        return self._lane()

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise rejections.session_closed(what)
        self._check_not_handing_over(what)

    def _check_not_handing_over(self, what: str) -> None:
        if self.handing_over:
            raise rejections.handing_over(what)

    def _check_mode(self, wanted: SessionMode, action: str) -> None:
        if self.config.mode is not None and self.config.mode != wanted:
            raise rejections.wrong_mode(self.config.mode, action)

    def _new_task_id(self) -> str:
        task_id = ids.task_id(self.next_task)
        self.next_task += 1
        return task_id

    async def _recover(self, lane: Lane, ongoing: str | None = None) -> None:
        await recover(lane, self.tasks, self.external, self.subagents, ongoing)

    def _tools(self) -> list[str]:
        return session_tools(self.config)

    def _usage_policy(self) -> UsagePolicy:
        return usage_policy(live=self.config.replay is None, prices=self.config.prices)

    # --- one hosted task: the agent loop -----------------------------------------------

    async def _run_task(self, task_id: str, text: str | None, exhaustive_task: bool = False, start_turn: int = 0) -> None:
        """The agent loop of one task; ``text`` is None when resuming after continue-as-new."""
        lane = self._lane()
        status = self.tasks[task_id]
        status.state = "running"
        events = task_log.events_on()
        if text is not None:
            async with lane.lock:
                await self._recover(lane)
                engine.begin_task(lane.state, task_id, exhaustive_task)
                await lane.add_text(text, kind=Kind.USER, role="user", task_id=task_id)
                if events:
                    await task_log.log(lane, task_log.STARTED, status)
        try:
            for turn in range(start_turn, self.config.max_turns_per_task):
                status.turns = turn + 1
                self.turns += 1
                self.turns_this_run += 1
                async with lane.lock:
                    outcome = await self.loop.step(lane, task_id, turn)
                    done = outcome.done and not await exhaustive.refuse_incomplete_end(lane, task_id, turn, self.end_refusals)
                if done:
                    status.state, status.answer_item_id = "completed", outcome.answer.id
                    break
                if self._should_continue():
                    await self._continue_as_new(RunningTask(task_id=task_id, next_turn=turn + 1))
            else:
                status.state = "failed"
                status.error = f"the task reached its limit of {self.config.max_turns_per_task} model turns"
        except ActivityError as error:
            status.state = "failed"
            status.error, status.error_type = task_log.failure_cause(error)
        except ApplicationError as error:  # raised in workflow code: the request does not fit, or an
            if error.type not in (rejections.REQUEST_UNFIT, exhaustive.INCOMPLETE_COVERAGE):  # end refused too often
                raise
            status.state, status.error, status.error_type = "failed", str(error), error.type
        async with lane.lock:
            ended = engine.end_task(lane.state, task_id, abandoned=status.state != "completed")
            if ended.abandoned_episodes and patches.patched(EPISODE_EVENTS_PATCH):
                await lane.log_abandoned_episodes(ended.abandoned_episodes, "the task ended")
            if events:
                await task_log.log(lane, task_log.COMPLETED if status.state == "completed" else task_log.FAILED, status)
