"""The tool activity: run one tool call, archive its exact output, store the result item.

Three executors: ``recall_observation`` (built in, reads Postgres), the replay
executor (returns the recorded output of a trajectory) and the live workspace tools.
A tool's failure is an answer for the model (a result with a non-zero exit code),
not an activity failure; only infrastructure errors make Temporal retry.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity

from activities import metrics
from activities.heartbeat import heartbeating
from activities.items import StoredItem, finish_item, load_item, read_whole, store_item, stored_item
from activities.runtime import get_runtime
from activities.store import DEFAULT_RECALL_CHARS, ObservationNotFound, Store
from activities.workspace import ToolInputError, ToolOutput, Workspace, parse_arguments
from recordings import ToolResultRec, load_trajectory, recorded_outputs
from workflows.context.classify import classify_tool
from workflows.context.content import ItemContent
from workflows.context.ids import MAIN_LANE
from workflows.context.items import Item, Kind
from workflows.context.observations import parse_observation_uri, range_address
from workflows.contract import ReplaySpec
from workflows.tools import RECALL_TOOL


class ToolRunInput(BaseModel):
    session_id: str
    lane: str = MAIN_LANE
    call_id: str
    tool_name: str
    assistant_item_id: str
    result_item_id: str
    result_seq: int
    observation_id: str
    task_id: str
    group: int
    model: str
    preview_chars: int
    replay: ReplaySpec | None = None
    output: str | None = None  # set: the workflow already ran the tool; store this as its result
    exit_code: int = 0


class RecallMark(BaseModel):
    """What a recall_observation call read (coverage of exhaustive tasks)."""

    observation_id: str
    offset: int
    limit: int
    total_chars: int


class ToolRunResult(BaseModel):
    stored: StoredItem
    recall: RecallMark | None = None  # set for recall_observation: what was read


@functools.lru_cache(maxsize=32)
def _recorded(path: str) -> dict[str, ToolResultRec]:
    return recorded_outputs(load_trajectory(path))


async def recall(store: Store, session_id: str, arguments: str) -> tuple[ToolOutput, RecallMark | None]:
    """An exact slice of one of this session's observations, or a clear error."""
    try:
        args = parse_arguments(arguments)
        ref = parse_observation_uri(args.get("address", ""))
        offset = args.get("offset", ref.offset if ref.offset is not None else 0)
        limit = args.get("limit", ref.limit if ref.limit is not None else DEFAULT_RECALL_CHARS)
        if not isinstance(offset, int) or not isinstance(limit, int):
            raise ToolInputError("offset and limit must be integers")
        piece = await store.read_observation(session_id, ref.obs_id, offset, limit)
    except (ToolInputError, ValueError) as error:
        return ToolOutput(f"recall_observation error: {error}", 1), None
    except ObservationNotFound:
        return ToolOutput(f"recall_observation error: no observation {args.get('address')!r} in this session", 1), None
    where = range_address(ref.obs_id, piece.offset, piece.limit)
    tail = "end of observation" if piece.eof else f"next offset {piece.next_offset}"
    header = f"[{where}: {len(piece.text)} of {piece.total_chars} characters; {tail}]\n"
    mark = RecallMark(observation_id=ref.obs_id, offset=piece.offset, limit=piece.limit, total_chars=piece.total_chars)
    return ToolOutput(header + piece.text, 0), mark


def _replayed(inp: ToolRunInput) -> tuple[ToolOutput, str]:
    assert inp.replay is not None
    record = _recorded(inp.replay.trajectory_path).get(inp.call_id)
    if record is None:
        return ToolOutput(f"replay: the recording has no output for tool call {inp.call_id}", 1), "tool"
    exit_code = record.exit_code if record.exit_code is not None else 0
    return ToolOutput(record.output, exit_code), record.render_role


async def _execute(inp: ToolRunInput, store: Store, arguments: str, workspace_root: Path):
    """(output, render role, recall mark) for one call."""
    if inp.output is not None:  # the workflow ran it (condense_context): store its answer
        return ToolOutput(inp.output, inp.exit_code), "tool", None
    if inp.tool_name == RECALL_TOOL:
        output, mark = await recall(store, inp.session_id, arguments)
        return output, "tool", mark
    if inp.replay is not None:
        output, role = _replayed(inp)
        return output, role, None
    try:
        output = await Workspace(workspace_root / inp.session_id).run(inp.tool_name, arguments)
    except ToolInputError as error:
        output = ToolOutput(f"{inp.tool_name} error: {error}", 2)
    return output, "tool", None


@activity.defn
async def run_tool(inp: ToolRunInput) -> ToolRunResult:
    runtime = await get_runtime()
    store = runtime.store
    done = await stored_item(store, inp.session_id, inp.lane, inp.result_item_id)
    if done is not None:  # already ran; never run a side-effecting tool twice
        item, content = done
        mark = None
        if inp.tool_name == RECALL_TOOL:
            _, mark = await recall(store, inp.session_id, await _arguments(store, inp))
        return ToolRunResult(stored=StoredItem(item=item), recall=mark)

    arguments = await _arguments(store, inp)
    async with heartbeating():
        output, role, mark = await _execute(inp, store, arguments, runtime.workspace_root)
    # Recall output is a slice of an observation that is already archived: point at it.
    if mark is not None:
        observation_id = mark.observation_id
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
    item = finish_item(item, content, inp.preview_chars, inp.model)
    item = await store_item(store, inp.session_id, inp.lane, item, content)
    metrics.observe_tool_run(item.tool_class, item.exit_code)
    return ToolRunResult(stored=StoredItem(item=item), recall=mark)


async def _arguments(store: Store, inp: ToolRunInput) -> str:
    stored = await load_item(store, inp.session_id, inp.assistant_item_id)
    if stored is None:
        raise LookupError(f"assistant item {inp.assistant_item_id} is not stored")
    for call in stored[1].tool_calls:
        if call.id == inp.call_id:
            return call.arguments
    raise LookupError(f"assistant item {inp.assistant_item_id} has no tool call {inp.call_id}")
