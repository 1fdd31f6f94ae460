"""Every activity the workflows call, by typed reference, with its timeouts and retry
policy in one place. Each helper has its activity's name; the worker registers exactly
the activities listed in ``ACTIVITIES`` (a test holds the two together).

The activity modules are imported passed through the sandbox: workflow code only takes
their names, payload types and error types from them.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities import condense, events, items, lanes, model, sessions, tools
    from activities.provider import CONTEXT_LENGTH_EXCEEDED
    from activities.runtime import WORKER_MISCONFIGURED
    from activities.workspace import SANDBOX_UNAVAILABLE
    from workflows import rejections
    from workflows.context.items import Item
    from workflows.lane_payloads import HandoffRef
    from workflows.session_checkpoint import SessionCheckpoint

# Every activity a worker must register for these workflows: the helpers below call them.
ACTIVITIES = (
    sessions.start_session, sessions.save_checkpoint, sessions.load_checkpoint,
    items.store_text, items.store_user_message, items.ingest_items, items.measure_texts,
    items.store_generated_items, events.record_events, model.call_model, tools.run_tool,
    condense.condense_with_llm, lanes.finish_lane, lanes.record_handoff, lanes.close_lane_episodes,
)
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
    non_retryable_error_types=[model.MODEL_REQUEST_REJECTED, CONTEXT_LENGTH_EXCEEDED, WORKER_MISCONFIGURED],
)
IO_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=[WORKER_MISCONFIGURED, rejections.INVALID_INPUT, sessions.CHECKPOINT_NOT_FOUND,
                               lanes.HANDOFF_MISSING],
)
# A tool's input and execution problems are results: only infrastructure fails (and retries).
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=[WORKER_MISCONFIGURED, SANDBOX_UNAVAILABLE],
)
ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)  # a fast path whose failure falls back to an activity
CONDENSE_RETRY = RetryPolicy(  # a provider failure is retried once, then the caller falls back
    initial_interval=timedelta(seconds=1),
    maximum_attempts=2,
    non_retryable_error_types=[condense.CONDENSER_REJECTED, condense.CONDENSER_RATE_LIMITED,
                               condense.CONDENSATION_INPUT_ERROR, WORKER_MISCONFIGURED],
)


async def start_session(inp: sessions.SessionStartInput) -> sessions.SessionStartResult:
    return await workflow.execute_activity(
        sessions.start_session, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"register {inp.session_id}")


async def store_text(inp: items.StoreTextInput) -> Item:
    activity = items.store_text if workflow.patched(STORE_TEXT_PATCH) else items.store_user_message
    return await workflow.execute_activity(
        activity, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"{inp.kind} text {inp.item_id}")


async def ingest_items(inp: items.IngestItemsInput, local: bool = False) -> list[Item]:
    summary = f"{len(inp.items)} external items from seq {inp.first_seq}"
    if local:  # the one-call step: stored within the workflow task that takes it (no task round trip)
        return await workflow.execute_local_activity(
            items.ingest_items, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY, summary=summary)
    return await workflow.execute_activity(
        items.ingest_items, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY, summary=summary)


def conflict_free_seq(error: BaseException) -> int | None:
    """The lane's next free seq when ``error`` is an ingest that found its ids taken
    (``items.ITEMS_CONFLICT``), else None. A local activity's failure is its cause itself."""
    cause = error.cause if isinstance(error, ActivityError) else error
    if not isinstance(cause, ApplicationError) or cause.type != items.ITEMS_CONFLICT or not cause.details:
        return None
    details = cause.details[0]
    free = details.get("next_free_seq") if isinstance(details, dict) else None
    return free if isinstance(free, int) else None


async def measure_texts(model_name: str, texts: dict[str, str]) -> dict[str, int]:
    return await workflow.execute_activity(
        items.measure_texts, items.MeasureTextsInput(model=model_name, texts=texts),
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY, summary=f"measure {', '.join(texts)}")


async def store_generated_items(inp: items.GeneratedItemsInput) -> None:
    await workflow.execute_activity(
        items.store_generated_items, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=", ".join(g.item.id for g in inp.items))


async def record_events(session_id: str, specs: list[events.EventSpec]) -> None:
    if not specs:
        return
    inp = events.EventsInput(session_id=session_id, events=specs)
    summary = ", ".join(dict.fromkeys(e.kind for e in specs))
    await workflow.execute_activity(
        events.record_events, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY, summary=summary)


async def save_checkpoint(inp: sessions.SaveCheckpointInput) -> None:
    await workflow.execute_activity(
        sessions.save_checkpoint, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=inp.checkpoint_id)


async def load_checkpoint(inp: sessions.LoadCheckpointInput) -> SessionCheckpoint:
    return await workflow.execute_activity(
        sessions.load_checkpoint, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=inp.checkpoint_id)


async def condense_with_llm(inp: condense.CondensationInput) -> condense.CondensationOutcome:
    """One bounded condensation; a provider failure is retried once, then the caller
    treats the error as a failed attempt and falls back."""
    return await workflow.execute_activity(
        condense.condense_with_llm, inp,
        start_to_close_timeout=timedelta(seconds=inp.timeout_seconds * 2 + 10),
        heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=CONDENSE_RETRY,
        summary=f"condense {len(inp.source_item_ids)} items of {inp.lane}")


async def call_model(inp: model.ModelCallInput, give_up: timedelta) -> model.ModelCallResult:
    return await workflow.execute_activity(
        model.call_model, inp, start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
        schedule_to_close_timeout=give_up, retry_policy=MODEL_RETRY,
        summary=f"{inp.lane} turn {inp.replay_turn}: plan {inp.plan.version}")


async def run_tool(inp: tools.ToolRunInput, give_up: timedelta, local: bool = False) -> tools.ToolRunResult:
    """``local``: a store-only call tries once as a local activity, within the workflow task that
    took the model's answer (no activity and workflow task of its own); when that attempt fails
    (an outage, a timeout) the call goes on as the activity, whose retries wait out the problem
    and whose pending failure operators see. Both are idempotent: a retry finds the stored result."""
    summary = f"{inp.tool_name} {inp.call_id}"
    if local:
        try:
            return await workflow.execute_local_activity(
                tools.run_tool, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=ONE_ATTEMPT,
                summary=summary)
        except FailureError as error:  # a local activity's failure is its cause itself, not an ActivityError
            if is_cancelled_exception(error):
                raise
    return await workflow.execute_activity(
        tools.run_tool, inp, start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
        schedule_to_close_timeout=give_up, retry_policy=TOOL_RETRY, summary=summary)


# --- subagent lanes ---------------------------------------------------------------------


async def finish_lane(inp: lanes.FinishLaneInput) -> HandoffRef:
    return await workflow.execute_activity(
        lanes.finish_lane, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"handoff of {inp.lane}")


async def record_handoff(inp: lanes.RecordHandoffInput) -> Item:
    return await workflow.execute_activity(
        lanes.record_handoff, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"handoff of {inp.child_lane} into {inp.lane}")


async def close_lane_episodes(inp: lanes.CloseLaneEpisodesInput) -> list[str]:
    return await workflow.execute_activity(
        lanes.close_lane_episodes, inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        summary=f"close episodes of {inp.lane}")


async def describe_lanes(workflow_ids: list[str]) -> list[lanes.LaneStatus]:
    return await workflow.execute_activity_method(
        lanes.LaneInspector.describe_lanes, workflow_ids, start_to_close_timeout=SHORT_IO_TIMEOUT,
        retry_policy=IO_RETRY, summary=f"describe {len(workflow_ids)} lanes")
