"""Every activity the workflows call, by name, with its timeouts and retry policy in one
place. Each helper has its activity's name; the worker registers exactly the activities
named in ``ACTIVITY_NAMES`` (a test holds the two together).

Workflows call activities by name with the result type from ``workflows.contract``, so
no activity module (and none of the I/O libraries they import) is loaded by workflow code.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from workflows import patches
    from workflows.context import Item
    from workflows.contract import failures, rejections
    from workflows.contract.checkpoint import LoadCheckpointInput, SaveCheckpointInput, SessionCheckpoint
    from workflows.contract.condense import CondensationInput, CondensationOutcome
    from workflows.contract.events import EventsInput, EventSpec
    from workflows.contract.items import GeneratedItemsInput, IngestItemsInput, MeasureTextsInput, StoreTextInput
    from workflows.contract.lanes import (
        CloseLaneEpisodesInput,
        FinishLaneInput,
        HandoffRef,
        LaneStatus,
        RecordHandoffInput,
    )
    from workflows.contract.model import ModelCallInput, ModelCallResult
    from workflows.contract.session_start import SessionStartInput, SessionStartResult
    from workflows.contract.tool_runs import ToolRunInput, ToolRunResult

# Every activity a worker must register for these workflows: the helpers below call them.
ACTIVITY_NAMES = frozenset({
    "start_session", "save_checkpoint", "load_checkpoint",
    "store_text", "store_user_message", "ingest_items", "measure_items", "measure_texts", "store_generated_items",
    "record_events", "call_model", "run_tool", "condense_with_llm",
    "finish_lane", "record_handoff", "close_lane_episodes", "describe_lanes",
})
# Gates the activity name of store_text (it was "store_user_message" before, also for
# system prompts and briefs): runs recorded with the old name replay with it.
STORE_TEXT_PATCH = "store-text-activity"

# Long activities heartbeat every 2 s: a killed worker's call is retried elsewhere
# after this, not after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
SHORT_IO_TIMEOUT = timedelta(seconds=20)  # store writes and token counts
LONG_TIMEOUT = timedelta(seconds=300)  # model calls and tools

# Model and tool calls retry transient failures (a killed worker, a provider's 5xx or 429,
# an outage) for as long as the session allows (SessionConfig.give_up_seconds), not a fixed
# number of attempts: a burst of worker restarts must not fail a task that can still succeed.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=[failures.MODEL_REQUEST_REJECTED, failures.CONTEXT_LENGTH_EXCEEDED,
                               failures.WORKER_MISCONFIGURED],
)
IO_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=[failures.WORKER_MISCONFIGURED, rejections.INVALID_INPUT, failures.CHECKPOINT_NOT_FOUND,
                               failures.HANDOFF_MISSING],
)
# A tool's input and execution problems are results: only infrastructure fails (and retries).
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=[failures.WORKER_MISCONFIGURED, failures.SANDBOX_UNAVAILABLE],
)
ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)  # a fast path whose failure falls back to an activity
CONDENSE_RETRY = RetryPolicy(  # a provider failure is retried once, then the caller falls back
    initial_interval=timedelta(seconds=1),
    maximum_attempts=2,
    non_retryable_error_types=[failures.CONDENSER_REJECTED, failures.CONDENSER_RATE_LIMITED,
                               failures.CONDENSATION_INPUT_ERROR, failures.WORKER_MISCONFIGURED],
)


async def start_session(inp: SessionStartInput) -> SessionStartResult:
    return await workflow.execute_activity(
        "start_session", inp, result_type=SessionStartResult, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"register {inp.session_id}")


async def store_text(inp: StoreTextInput) -> Item:
    activity = "store_text" if patches.patched(STORE_TEXT_PATCH) else "store_user_message"
    return await workflow.execute_activity(
        activity, inp, result_type=Item, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"{inp.kind} text {inp.item_id}")


async def ingest_items(inp: IngestItemsInput, local: bool = False) -> list[Item]:
    summary = f"{len(inp.items)} external items from seq {inp.first_seq}"
    if local:  # the one-call step: stored within the workflow task that takes it (no task round trip)
        return await workflow.execute_local_activity(
            "ingest_items", inp, result_type=list[Item], start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
            summary=summary)
    return await workflow.execute_activity(
        "ingest_items", inp, result_type=list[Item], start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=summary)


async def measure_items(inp: IngestItemsInput) -> list[Item]:
    """The items as ``ingest_items`` will store them, refused as it would refuse them, with no
    write: within the workflow task that takes the step (a local activity: reads only)."""
    return await workflow.execute_local_activity(
        "measure_items", inp, result_type=list[Item], start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"measure {len(inp.items)} external items from seq {inp.first_seq}")


def conflict_free_seq(error: BaseException) -> int | None:
    """The lane's next free seq when ``error`` is an ingest that found its ids taken
    (``failures.ITEMS_CONFLICT``), else None. A local activity's failure is its cause itself."""
    cause = error.cause if isinstance(error, ActivityError) else error
    if not isinstance(cause, ApplicationError) or cause.type != failures.ITEMS_CONFLICT or not cause.details:
        return None
    details = cause.details[0]
    free = details.get("next_free_seq") if isinstance(details, dict) else None
    return free if isinstance(free, int) else None


async def measure_texts(model_name: str, texts: dict[str, str], local: bool = False) -> dict[str, int]:
    """``local``: counted within the workflow task that asks (no server round trip; counting
    tokens has no side effect, so a repeat after a lost task is harmless)."""
    inp, summary = MeasureTextsInput(model=model_name, texts=texts), f"measure {', '.join(texts)}"
    if local:
        return await workflow.execute_local_activity(
            "measure_texts", inp, result_type=dict[str, int], start_to_close_timeout=SHORT_IO_TIMEOUT,
            retry_policy=IO_RETRY, summary=summary)
    return await workflow.execute_activity(
        "measure_texts", inp, result_type=dict[str, int], start_to_close_timeout=SHORT_IO_TIMEOUT,
        retry_policy=IO_RETRY, summary=summary)


async def store_generated_items(inp: GeneratedItemsInput) -> None:
    await workflow.execute_activity(
        "store_generated_items", inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=", ".join(g.item.id for g in inp.items))


async def record_events(session_id: str, specs: list[EventSpec]) -> None:
    if not specs:
        return
    inp = EventsInput(session_id=session_id, events=specs)
    summary = ", ".join(dict.fromkeys(e.kind for e in specs))
    await workflow.execute_activity(
        "record_events", inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY, summary=summary)


async def save_checkpoint(inp: SaveCheckpointInput) -> None:
    await workflow.execute_activity(
        "save_checkpoint", inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=inp.checkpoint_id)


async def load_checkpoint(inp: LoadCheckpointInput) -> SessionCheckpoint:
    return await workflow.execute_activity(
        "load_checkpoint", inp, result_type=SessionCheckpoint, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=inp.checkpoint_id)


async def condense_with_llm(inp: CondensationInput) -> CondensationOutcome:
    """One bounded condensation; a provider failure is retried once, then the caller
    treats the error as a failed attempt and falls back."""
    return await workflow.execute_activity(
        "condense_with_llm", inp, result_type=CondensationOutcome,
        start_to_close_timeout=timedelta(seconds=inp.timeout_seconds * 2 + 10),
        heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=CONDENSE_RETRY,
        summary=f"condense {len(inp.source_item_ids)} items of {inp.lane}")


async def call_model(inp: ModelCallInput, give_up: timedelta) -> ModelCallResult:
    return await workflow.execute_activity(
        "call_model", inp, result_type=ModelCallResult, start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
        schedule_to_close_timeout=give_up, retry_policy=MODEL_RETRY,
        summary=f"{inp.lane} turn {inp.replay_turn}: plan {inp.plan.version}")


async def run_tool(inp: ToolRunInput, give_up: timedelta, local: bool = False) -> ToolRunResult:
    """``local``: a store-only call tries once as a local activity, within the workflow task that
    took the model's answer (no activity and workflow task of its own); when that attempt fails
    (an outage, a timeout) the call goes on as the activity, whose retries wait out the problem
    and whose pending failure operators see. Both are idempotent: a retry finds the stored result."""
    summary = f"{inp.tool_name} {inp.call_id}"
    if local:
        try:
            return await workflow.execute_local_activity(
                "run_tool", inp, result_type=ToolRunResult, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=ONE_ATTEMPT,
                summary=summary)
        except FailureError as error:  # a local activity's failure is its cause itself, not an ActivityError
            if is_cancelled_exception(error):
                raise
    return await workflow.execute_activity(
        "run_tool", inp, result_type=ToolRunResult, start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
        schedule_to_close_timeout=give_up, retry_policy=TOOL_RETRY, summary=summary)


# --- subagent lanes ---------------------------------------------------------------------


async def finish_lane(inp: FinishLaneInput) -> HandoffRef:
    return await workflow.execute_activity(
        "finish_lane", inp, result_type=HandoffRef, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"handoff of {inp.lane}")


async def record_handoff(inp: RecordHandoffInput) -> Item:
    return await workflow.execute_activity(
        "record_handoff", inp, result_type=Item, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"handoff of {inp.child_lane} into {inp.lane}")


async def close_lane_episodes(inp: CloseLaneEpisodesInput) -> list[str]:
    return await workflow.execute_activity(
        "close_lane_episodes", inp, result_type=list[str], start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"close episodes of {inp.lane}")


async def describe_lanes(workflow_ids: list[str]) -> list[LaneStatus]:
    return await workflow.execute_activity(
        "describe_lanes", workflow_ids, result_type=list[LaneStatus], start_to_close_timeout=SHORT_IO_TIMEOUT,
        retry_policy=IO_RETRY, summary=f"describe {len(workflow_ids)} lanes")
