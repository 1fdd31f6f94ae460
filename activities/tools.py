"""The tool activity: run one tool call, archive its exact output, store the result item.

Three executors: ``recall_observation`` (built in, reads PostgreSQL), the replay executor
(the recorded output of a trajectory) and the live workspace tools (``bash`` sandboxed).
Whatever is wrong with a call is an answer for the model (a result with a non-zero exit
code), never an activity failure; only infrastructure errors make Temporal retry.

At most once: a command with effects records that it starts before it runs. A retry after
the worker died meanwhile finds that record without a stored result, and answers that the
earlier attempt was interrupted instead of running the command a second time. Read-only
calls (file reads, listings, read-only shell commands, recall) simply run again.
"""

from __future__ import annotations

import logging
from datetime import datetime

from temporalio import activity

from activities import metrics
from activities.command_effects import bash_call_may_have_effects
from activities.heartbeat import heartbeating
from activities.items import finish_item, item_event, item_of, read_whole, store_items
from activities.recall import recall
from activities.replay import recorded_output
from activities.runtime import ActivityGroup, Runtime
from activities.sandbox import SandboxPolicy
from activities.store_rows import EventRow
from activities.workspace import ToolOutput, Workspace
from workflows.context import Item, ItemContent, Kind, classify_tool, ids
from workflows.contract.items import StoredItem
from workflows.contract.tool_runs import RecallMark, ToolRunInput, ToolRunResult
from workflows.contract.tools import BASH_TOOL, RECALL_TOOL

log = logging.getLogger(__name__)

INTERRUPTED_EXIT = 125  # the call's earlier attempt was interrupted; not run again


def _replayed(inp: ToolRunInput) -> tuple[ToolOutput, str]:
    assert inp.replay is not None
    record = recorded_output(inp.replay.trajectory_path, inp.call_id)
    if record is None:
        return ToolOutput(f"replay: the recording has no output for tool call {inp.call_id}", 1), "tool"
    exit_code = record.exit_code if record.exit_code is not None else 0
    return ToolOutput(record.output, exit_code), record.render_role


def _has_effects(inp: ToolRunInput, arguments: str) -> bool:
    """A live shell command that may change the world (read-only commands are re-runnable;
    write_file writes the same content again)."""
    return (inp.output is None and inp.replay is None and inp.tool_name == BASH_TOOL
            and bash_call_may_have_effects(arguments))


def _interrupted(inp: ToolRunInput, started: datetime) -> ToolOutput:
    return ToolOutput(
        f"[{inp.tool_name} call {inp.call_id} was interrupted: an earlier attempt started it at "
        f"{started.isoformat(timespec='seconds')} and stopped (its worker went away) before its result "
        "was recorded. It was not run again, so its effects may be partial: check the workspace "
        "before repeating it.]", INTERRUPTED_EXIT)


async def _execute(inp: ToolRunInput, runtime: Runtime, arguments: str) -> tuple[ToolOutput, str, RecallMark | None]:
    """(output, render role, recall mark) for one call."""
    store = runtime.store
    if inp.output is not None:  # the workflow ran it (condense_context...): store its answer
        return ToolOutput(inp.output, inp.exit_code), "tool", None
    if inp.tool_name == RECALL_TOOL:
        output, mark = await recall(store, inp.session_id, arguments, inp.recall_max_chars)
        return output, "tool", mark
    if inp.replay is not None:
        output, role = _replayed(inp)
        return output, role, None
    if _has_effects(inp, arguments):
        started = await store.start_tool_attempt(inp.session_id, inp.result_item_id)
        if started is not None:
            lane = ids.tool_events_lane(inp.lane)
            await store.append_events(inp.session_id, [EventRow(
                lane=lane, seq=inp.result_seq, event_id=ids.event_id(lane, inp.result_seq), kind="tool.interrupted",
                payload={"item_id": inp.result_item_id, "call_id": inp.call_id, "tool": inp.tool_name,
                         "started_at": started.isoformat()})])
            return _interrupted(inp, started), "tool", None
    workspace = Workspace(runtime.workspace_root / inp.session_id, SandboxPolicy(network=inp.network),
                          unsafe_unconfined=runtime.settings.unsafe_no_sandbox,
                          quota_bytes=runtime.settings.workspace_quota_bytes)
    return await workspace.run(inp.tool_name, arguments), "tool", None


async def _run_tool(inp: ToolRunInput, runtime: Runtime) -> ToolRunResult:
    store = runtime.store
    # The deferred events go with the result item's event (one write; on the done path too).
    events = [EventRow(**e.model_dump()) for e in inp.events]
    metrics.observe_events(events)
    # A call that answers the same when run again (an answer the workflow has, a recorded output,
    # a recall) needs no read first when this worker stored the model's answer: the writes below
    # keep whatever an earlier attempt stored, and report it.
    cached = store.recent_items.get(inp.session_id, [inp.assistant_item_id]) if _rerunnable(inp) else {}
    if cached:
        arguments = _arguments(cached[inp.assistant_item_id][1], inp)
    else:
        # One read: the result an earlier attempt stored (if any) and the call's arguments.
        rows = await store.get_items(inp.session_id, [inp.result_item_id, inp.assistant_item_id])
        if inp.assistant_item_id not in rows:
            raise LookupError(f"assistant item {inp.assistant_item_id} is not stored")
        arguments = _arguments(item_of(rows[inp.assistant_item_id])[1], inp)
        if inp.result_item_id in rows:  # already ran; never run a side-effecting tool twice
            item, _ = item_of(rows[inp.result_item_id])
            await store.append_events(inp.session_id, [*events, item_event(item, inp.lane)])  # an attempt may have died before
            mark = None
            if inp.tool_name == RECALL_TOOL:
                _, mark = await recall(store, inp.session_id, arguments, inp.recall_max_chars)
            return ToolRunResult(stored=StoredItem(item=item), recall=mark)

    output, role, mark = await _execute(inp, runtime, arguments)
    # Recall output is a slice of an observation that is already archived: point at it.
    archive = None
    if mark is not None:
        observation_id = mark.observation_id
    elif _rerunnable(inp):  # every attempt archives the same text: written with the item, one round trip
        observation_id = inp.observation_id
        archive = (observation_id, inp.result_item_id, output.text)
    else:
        observation_id = inp.observation_id
        meta = await store.put_observation(inp.session_id, observation_id, inp.result_item_id, output.text)
        if not meta.inserted:  # an earlier attempt archived its output: that one is the truth
            output = ToolOutput(await read_whole(store, inp.session_id, observation_id), output.exit_code)
    content = ItemContent(text=output.text, tool_call_id=inp.call_id, tool_name=inp.tool_name)
    item = Item(
        id=inp.result_item_id,
        seq=inp.result_seq,
        kind=Kind.TOOL_RESULT,
        role=role,
        group=inp.group,
        task=inp.task_id,
        tool_name=inp.tool_name,
        tool_call_ids=[inp.call_id],
        tool_class=classify_tool(inp.tool_name, arguments, output.exit_code),
        exit_code=output.exit_code,
        observation_id=observation_id,
    )
    item = finish_item(item, content, inp.preview_chars, inp.model, preview_lines=inp.preview_lines)
    item = (await store_items(store, inp.session_id, inp.lane, [(item, content)], events=events,
                              observation=archive))[0]
    metrics.observe_tool_run(item.tool_class, item.exit_code)
    return ToolRunResult(stored=StoredItem(item=item), recall=mark)


def _rerunnable(inp: ToolRunInput) -> bool:
    """Running the call again gives the same answer and changes nothing."""
    return inp.output is not None or inp.replay is not None or inp.tool_name == RECALL_TOOL


def _arguments(assistant: ItemContent, inp: ToolRunInput) -> str:
    for call in assistant.tool_calls:
        if call.id == inp.call_id:
            return call.arguments
    raise LookupError(f"assistant item {inp.assistant_item_id} has no tool call {inp.call_id}")


class ToolActivities(ActivityGroup):
    """Running tool calls and storing their results."""

    @activity.defn
    async def run_tool(self, inp: ToolRunInput) -> ToolRunResult:
        if activity.info().is_local:  # a store-only call (no heartbeats: the workflow task is its liveness)
            return await _run_tool(inp, await self.runtime())
        async with heartbeating(at_start=False):  # as long as the tool runs (and PostgreSQL is waited for)
            return await _run_tool(inp, await self.runtime())
