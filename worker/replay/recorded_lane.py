"""A recorded trajectory as the lane items the hosted workflow would store, batch by batch.

Ids, seqs, groups, observation ids and tool classes are assigned as the workflow and its
activities assign them (``workflows.context.ids``), so the offline simulator's requests are
the hosted session's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from recordings import Trajectory
from workflows.context import SCHEME, Item, ItemContent, Kind, classify_tool, ids

# The session id the replay plans and counts under. Observation addresses quote the session
# id, so a session's token figures would depend on its id's length and spelling: the replay
# plans every session under this constant id (addresses of constant length) and only the
# requests it hands out carry the session's real addresses (:func:`readdressed`).
SESSION_ID = "replay"
TASK_ID = ids.task_id(0)


@dataclass(frozen=True)
class ReplayItem:
    """One lane item as the workflow would store it (tokens not measured yet)."""

    item: Item
    content: ItemContent
    arguments: str | None = None  # the call's raw arguments, for tool results


def lane_batches(traj: Trajectory, session_id: str = SESSION_ID) -> list[list[ReplayItem]]:
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

    def text_item(text: str, kind: Kind, role: str, task: str | None) -> ReplayItem:
        seq = next(counter)
        obs = ids.observation_id(session_id, ids.MAIN_LANE, seq) if len(text) > ids.OVERSIZED_INPUT_CHARS else None
        item = Item(id=ids.item_id(ids.MAIN_LANE, seq), seq=seq, kind=kind, role=role, task=task, observation_id=obs)
        return ReplayItem(item, ItemContent(text=text))

    first: list[ReplayItem] = []
    if traj.system:
        first.append(text_item(traj.system, Kind.SYSTEM, "system", None))
    first.append(text_item(traj.task, Kind.USER, "user", TASK_ID))
    batches = [first]
    for turn in traj.turns[:-1]:  # the last answer is followed by no recorded call
        seq = next(counter)
        calls = list(turn.tool_calls)
        assistant = Item(id=ids.item_id(ids.MAIN_LANE, seq), seq=seq, kind=Kind.ASSISTANT, role="assistant", group=seq,
                         task=TASK_ID, tool_call_ids=[c.id for c in calls])
        # Text-protocol agents (mini-swe-agent 1) put the action in the prose and get the
        # output back as a user message: their calls are never sent as tool_calls, so the
        # stored content has none (and the measured cost is what is sent).
        sent_calls = [] if traj.tool_protocol == "text" else calls
        batch = [ReplayItem(assistant, ItemContent(text=turn.assistant_text, tool_calls=sent_calls))]
        arguments = {c.id: c.arguments for c in calls}
        for result in turn.results:
            rseq = next(counter)
            exit_code = result.exit_code if result.exit_code is not None else 0  # as the replay tool runner
            args = arguments.get(result.tool_call_id)
            item = Item(
                id=ids.item_id(ids.MAIN_LANE, rseq), seq=rseq, kind=Kind.TOOL_RESULT, role=result.render_role, group=seq,
                task=TASK_ID, tool_name=result.tool_name, tool_call_ids=[result.tool_call_id],
                tool_class=classify_tool(result.tool_name, args, exit_code), exit_code=exit_code,
                observation_id=ids.observation_id(session_id, ids.MAIN_LANE, rseq),
            )
            content = ItemContent(text=result.output, tool_call_id=result.tool_call_id, tool_name=result.tool_name)
            batch.append(ReplayItem(item, content, args))
        batch.extend(text_item(text, Kind.USER, "user", TASK_ID) for text in turn.user_after)
        batches.append(batch)
    return batches


def readdressed(message: dict, session_id: str) -> dict:
    """``message`` planned under :data:`SESSION_ID`, its observation addresses pointing into
    ``session_id`` (where recall finds them). Session ids are ``[A-Za-z0-9_.-]``: nothing to
    escape in JSON, and the scheme in front keeps the replacement to addresses."""
    if session_id == SESSION_ID:
        return message
    canonical, real = f"{SCHEME}obs-{SESSION_ID}-", f"{SCHEME}obs-{session_id}-"
    raw = json.dumps(message, ensure_ascii=False)
    return json.loads(raw.replace(canonical, real)) if canonical in raw else message
