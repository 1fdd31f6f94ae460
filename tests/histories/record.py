"""Record SessionWorkflow histories for the replay-compatibility test.

Run it when a release's workflow code is final:

    .venv/bin/python -m tests.histories.record [SCENARIO ...]

It starts a throwaway stack, runs a few sessions that together use every command the
workflow issues (hosted replay with compactions, continue-as-new, the overflow
ladder, external-agent updates, explicit condensation) and writes each run's history
to ``tests/histories/<name>.json.gz``. Committed histories must keep replaying against
later code: a change that alters commands needs ``workflow.patched``.
"""

from __future__ import annotations

import asyncio
import gzip
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

import asyncpg

from recordings import dump_trajectory, load_trajectory, synthetic_trajectory
from tests.integration.subagent_script import child_trajectory, parent_trajectory, session_config, write_recordings
from tests.integration.support import replay_config_for
from tests.recordings import LONG_TRAJECTORY
from worker import sessions
from worker.local.stack import Stack
from worker.replay.model_server import ReplayModelServer
from worker.settings import Settings
from worker.worker import build_worker, connect
from workflows.contract.session import (
    AppendItemsRequest,
    CondenseRequest,
    EpisodeBegin,
    EpisodeEnd,
    ExternalItem,
    ReportedUsage,
    SessionConfig,
    StepRequest,
)
from workflows.session import SessionWorkflow

HERE = Path(__file__).resolve().parent


async def save(client, session_id: str, name: str) -> None:
    runs = [run async for run in client.list_workflows(f'WorkflowId = "{session_id}"')]
    for index, run in enumerate(sorted(runs, key=lambda r: r.start_time)):
        history = await client.get_workflow_handle(session_id, run_id=run.run_id).fetch_history()
        target = HERE / f"{name}-run{index}.json.gz"
        target.write_bytes(gzip.compress(history.to_json().encode()))
        print(f"wrote {target.name} ({len(history.events)} events)")


async def hosted(client, queue: str, name: str, path: Path, **overrides) -> None:
    trajectory = load_trajectory(path)
    with ReplayModelServer([trajectory]) as server:
        if name == "overflow":
            server.set_faults("context_length", count=-1, max_prompt_tokens=1_500)
        session_id = f"hist-{name}-{uuid.uuid4().hex[:6]}"
        handle = await sessions.start_session(client, replay_config_for(session_id, trajectory, path, server,
                                                                        **overrides), queue)
        task_id = await sessions.submit(handle, trajectory.task)
        await sessions.wait_task(handle, task_id)
        await handle.signal(SessionWorkflow.close)
        await handle.result()
    await save(client, session_id, name)


async def external(client, queue: str, name: str = "external") -> None:
    session_id = f"hist-{name}-{uuid.uuid4().hex[:6]}"
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=2_000)
    handle = await sessions.start_session(client, config, queue)
    items = [ExternalItem(kind="user", text="Inspect and fix the parser.")]
    if name != "external":  # engine rules 2: an item over its share of the budget is archived first
        items.append(ExternalItem(kind="note", text="Keep the public API. " * 700))
    for n in range(6):
        items += [ExternalItem(kind="assistant", text=f"step {n}", tool_calls=[
                      {"id": f"c{n}", "name": "bash", "arguments": f'{{"command": "cat f{n}.py"}}'}]),
                  ExternalItem(kind="tool_result", tool_call_id=f"c{n}", text=f"line {n}\n" * 60)]
    await handle.execute_update(SessionWorkflow.begin_episode,
                                EpisodeBegin(episode_id="inspect", kind="exploration", goal="read the parser"))
    await handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(items=items))
    await handle.execute_update(SessionWorkflow.end_episode,
                                EpisodeEnd(episode_id="inspect", conclusion="the bug is in f3.py"))
    await handle.execute_update(SessionWorkflow.prepare_request)
    await handle.execute_update(SessionWorkflow.condense_context,
                                CondenseRequest(memory={"completed_work": ["read f0-f5"]}))
    if name != "external":  # a new task: the first one's episode becomes eligible
        await handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(
            items=[ExternalItem(kind="user", text="Now add a test.")]))
        await handle.execute_update(SessionWorkflow.condense_context,
                                    CondenseRequest(memory={"completed_work": ["fixed the parser"]}))
    await handle.signal(SessionWorkflow.close)
    await handle.result()
    await save(client, session_id, name)


async def external_steps(client, queue: str, name: str = "external-steps", orphans_in: str | None = None,
                         write_behind: bool = False) -> None:
    """One-call steps across continue-as-new (every 10 calls), a retried step, a keyed append.
    ``orphans_in`` (a DSN): rows of other content are put at the seqs the first tool step
    takes, as a lost workflow task of older code left them, so the step stores past them.
    ``write_behind``: the steps ask for StepRequest.write_behind (the gateway's)."""
    session_id = f"hist-{name}-{uuid.uuid4().hex[:6]}"
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=2_000, updates_per_run=10)
    handle = await sessions.start_session(client, config, queue)
    await handle.execute_update(SessionWorkflow.step, StepRequest(items=[ExternalItem(kind="user", text="Go.")]))
    if orphans_in is not None:
        next_seq = (await sessions.status(handle)).next_seq
        conn = await asyncpg.connect(orphans_in)
        try:
            for seq in (next_seq, next_seq + 1):
                await conn.execute("INSERT INTO items (session_id, item_id, lane, seq, kind, role, content) VALUES"
                                   " ($1, $2, 'main', $3, 'user', 'user', '{\"content\": {\"text\": \"lost\"}}')",
                                   session_id, f"itm-{seq:06d}", seq)
        finally:
            await conn.close()
    steps = [StepRequest(step_id=f"s{n}", items=[
        ExternalItem(kind="assistant", text=f"step {n}", tool_calls=[
            {"id": f"c{n}", "name": "bash", "arguments": f'{{"command": "cat f{n}.py"}}'}]),
        ExternalItem(kind="tool_result", tool_call_id=f"c{n}", text=f"line {n}\n" * 60)], write_behind=write_behind)
        for n in range(25)]
    for n, step in enumerate(steps):
        await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.step, step))
        if n == 12:  # step 3 again, after a hand-over: answered from the record, nothing stored twice
            await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.step, steps[3]))
    await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.append_items, AppendItemsRequest(
        items=[ExternalItem(kind="note", text="keep it short")], key="k1")))
    await handle.signal(SessionWorkflow.close)
    await handle.result()
    await save(client, session_id, name)


async def external_tasks(client, queue: str) -> None:
    """Task events of external tasks (a batch with two user messages, the close), provider
    usage reported with steps, a system prompt stored before the lane is published."""
    session_id = f"hist-external-tasks-{uuid.uuid4().hex[:6]}"
    config = SessionConfig(session_id=session_id, mode="external", budget_tokens=2_000, updates_per_run=10,
                           system_prompt="You are terse.")
    handle = await sessions.start_session(client, config, queue)
    await handle.execute_update(SessionWorkflow.step, StepRequest(items=[ExternalItem(kind="user", text="Go.")]))
    for n in range(12):
        items = [ExternalItem(kind="assistant", text=f"step {n}", tool_calls=[
                     {"id": f"c{n}", "name": "bash", "arguments": f'{{"command": "cat f{n}.py"}}'}]),
                 ExternalItem(kind="tool_result", tool_call_id=f"c{n}", text=f"line {n}\n" * 60)]
        if n == 6:
            items += [ExternalItem(kind="assistant", text="done"), ExternalItem(kind="user", text="More."),
                      ExternalItem(kind="user", text="Never mind: tests.")]
        usage = ReportedUsage(prompt=900 + n, cached=400, completion=30)
        await sessions.through_handover(partial(handle.execute_update, SessionWorkflow.step,
                                                StepRequest(step_id=f"s{n}", items=items, usage=usage)))
    await handle.signal(SessionWorkflow.close)
    await handle.result()
    await save(client, session_id, "external-tasks")


async def subagents(client, queue: str, folder: Path, name: str = "subagents") -> None:
    """A parent whose model spawns two subagents (episodes, a command, a handoff each)."""
    parent, children = write_recordings(folder, parent_trajectory(["Inspect module 0.", "Inspect module 1."]),
                                        [child_trajectory(0), child_trajectory(1)])
    with ReplayModelServer([parent[0], *(c[0] for c in children)]) as server:
        session_id = f"hist-{name}-{uuid.uuid4().hex[:6]}"
        handle = await sessions.start_session(client, session_config(session_id, parent, children, server), queue)
        task_id = await sessions.submit(handle, parent[0].task)
        await sessions.wait_task(handle, task_id)
        await handle.signal(SessionWorkflow.close)
        await handle.result()
    await save(client, session_id, name)
    for lane in ("sub-0001", "sub-0002"):
        await save(client, f"{session_id}/{lane}", f"{name}-{lane}")


async def main(names: list[str]) -> None:
    """Record the named scenarios (all when none are named); histories of code already
    released should stay as they were recorded, so re-record only what is new."""
    with tempfile.TemporaryDirectory(prefix="lanes-hist-") as tmp, Stack(Path(tmp)) as stack:
        settings = Settings(temporal_address=stack.temporal_address, database_url=stack.dsn,
                            task_queue="lanes-histories", data_dir=Path(tmp) / "data")
        client = await connect(settings)
        long_path = dump_trajectory(synthetic_trajectory(90, seed=3), Path(tmp) / "long.json")
        queue = settings.task_queue
        scenarios = {
            "hosted": lambda: hosted(client, queue, "hosted", LONG_TRAJECTORY, budget_tokens=6_000),
            "continue-as-new": lambda: hosted(client, queue, "continue-as-new", long_path, budget_tokens=8_000,
                                              turns_per_run=40),
            "overflow": lambda: hosted(client, queue, "overflow", LONG_TRAJECTORY),
            "external": lambda: external(client, queue),
            "subagents": lambda: subagents(client, queue, Path(tmp) / "subagents"),
            # since the budget guarantee (engine rules 2): planned ladder, assembly, bounded items
            "rules2-hosted": lambda: hosted(client, queue, "rules2-hosted", LONG_TRAJECTORY, budget_tokens=4_000),
            "rules2-external": lambda: external(client, queue, "rules2-external"),
            "external-steps": lambda: external_steps(client, queue),
            "rules2-unfit": lambda: hosted(client, queue, "rules2-unfit", LONG_TRAJECTORY, budget_tokens=2_000,
                                           system_prompt="Follow every house rule. " * 1_500),
            # since issue 15: task events and answers, concluded explorations in the episode markers
            "answers-hosted": lambda: hosted(client, queue, "answers-hosted", LONG_TRAJECTORY, budget_tokens=4_000),
            "answers-external": lambda: external(client, queue, "answers-external"),
            # issue 15, later: external task events and reported usage, the lane published after its prompt
            "external-tasks": lambda: external_tasks(client, queue),
            # since issue 16, part 3: store-only tool calls (recorded outputs) as local activities
            "local-tools-hosted": lambda: hosted(client, queue, "local-tools-hosted", LONG_TRAJECTORY,
                                                 budget_tokens=4_000),
            # issue 13, later: the sweep keeps the episode markers (patch sweep-keeps-markers)
            "sweep-markers-hosted": lambda: hosted(client, queue, "sweep-markers-hosted", LONG_TRAJECTORY,
                                                   budget_tokens=4_000),
            # issue 16: the cost profile of new sessions (patch cost-profile): names in the checkpoint,
            # compaction at 75 % of the budget
            "cost-profile-hosted": lambda: hosted(client, queue, "cost-profile-hosted", LONG_TRAJECTORY,
                                                  budget_tokens=4_000),
            "cost-profile-external": lambda: external(client, queue, "cost-profile-external"),
            # issue 24: a step's items stored by an activity (patch step-items-activity), past ids
            # a lost workflow task left taken
            "step-items-activity": lambda: external_steps(client, queue, "step-items-activity", stack.dsn),
            # issue 25: a compaction in one activity round trip (patch one-write-compaction: its texts
            # measured by a local activity, its items and events written together), with the
            # budget notice and bounded active episodes of new sessions
            "one-write-hosted": lambda: hosted(client, queue, "one-write-hosted", LONG_TRAJECTORY, budget_tokens=4_000),
            "one-write-external": lambda: external_steps(client, queue, "one-write-external"),
            # issue 29: new sessions' checkpoints list no names, and show each archived output's
            # call (patch checkpoint-content)
            "checkpoint-content-hosted": lambda: hosted(client, queue, "checkpoint-content-hosted", LONG_TRAJECTORY,
                                                        budget_tokens=4_000),
            # issue 25: a gateway step's items measured within its workflow task and stored, with the
            # items its plan generates, by writes it does not wait for (patch step-writes-later)
            "step-writes-later": lambda: external_steps(client, queue, "step-writes-later", stack.dsn,
                                                        write_behind=True),
            # issue 29: a hosted step's generated items written by its model call (patch
            # model-call-writes-generated), no activity and workflow task of their own
            "model-call-writes-hosted": lambda: hosted(client, queue, "model-call-writes-hosted", LONG_TRAJECTORY,
                                                       budget_tokens=4_000),
            # issue 29: new sessions' checkpoints show key lines of archived items and brief references
            # (patch checkpoint-lines); a budget whose checkpoint has room for lines
            "checkpoint-lines-hosted": lambda: hosted(client, queue, "checkpoint-lines-hosted", LONG_TRAJECTORY,
                                                      budget_tokens=8_000),
            # issue 29: new sessions preview large tool outputs with lines of their middle and keep a
            # larger pool of archived lines (patch preview-lines)
            "preview-lines-hosted": lambda: hosted(client, queue, "preview-lines-hosted", LONG_TRAJECTORY,
                                                   budget_tokens=8_000),
            # issue 25: a new session's system prompt stored by start_session, not by an activity of
            # its own (patch start-stores-system-prompt); hosted, and gateway steps across hand-overs
            "start-stores-prompt-hosted": lambda: hosted(client, queue, "start-stores-prompt-hosted", LONG_TRAJECTORY,
                                                         budget_tokens=8_000),
            "start-stores-prompt-external": lambda: external_steps(client, queue, "start-stores-prompt-external",
                                                                   write_behind=True),
            # issue 29: the patches settled so far taken under one marker per run (workflows/patches.py):
            # hosted, gateway steps across hand-overs, a parent and its subagents' lanes
            "settled-hosted": lambda: hosted(client, queue, "settled-hosted", LONG_TRAJECTORY, budget_tokens=4_000),
            "settled-external": lambda: external_steps(client, queue, "settled-external", write_behind=True),
            "settled-subagents": lambda: subagents(client, queue, Path(tmp) / "settled-subagents", "settled-subagents"),
        }
        unknown = set(names) - set(scenarios)
        if unknown:
            raise SystemExit(f"unknown scenarios {sorted(unknown)}; known: {sorted(scenarios)}")
        async with build_worker(client, settings):
            for name, record in scenarios.items():
                if not names or name in names:
                    await record()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
    sys.stdout.flush()
