"""Every activity the workflows call, with its timeouts and retry policy in one place.

Activities are named by string so that workflow code never imports their modules
(openai, asyncpg...) into the sandbox.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows.checkpoint import LoadCheckpointInput, SaveCheckpointInput, SessionCheckpoint
    from workflows.context.items import Item
    from workflows.messages import (
        CloseLaneEpisodesInput,
        CondensationInput,
        CondensationOutcome,
        EventsInput,
        EventSpec,
        FinishLaneInput,
        GeneratedItemsInput,
        HandoffRef,
        IngestItemsInput,
        MeasureTextsInput,
        ModelCallInput,
        ModelCallResult,
        LaneStatus,
        RecordHandoffInput,
        SessionStartInput,
        SessionStartResult,
        StoreUserMessageInput,
        ToolRunInput,
        ToolRunResult,
    )

CONTEXT_LENGTH_EXCEEDED = "ContextLengthExceeded"
# Long activities heartbeat every 2 s: a killed worker's call is retried elsewhere
# after this, not after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
SHORT_IO_TIMEOUT = timedelta(seconds=20)  # store writes and token counts
LONG_TIMEOUT = timedelta(seconds=300)  # model calls and tools

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
    non_retryable_error_types=["WorkerMisconfigured", "ItemInputError", "CheckpointNotFound", "HandoffMissing"],
)


async def start_session(inp: SessionStartInput) -> SessionStartResult:
    return await workflow.execute_activity(
        "start_session", inp, result_type=SessionStartResult,
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def store_text(inp: StoreUserMessageInput) -> Item:
    return await workflow.execute_activity(
        "store_user_message", inp, result_type=Item,
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def ingest_items(inp: IngestItemsInput) -> list[Item]:
    return await workflow.execute_activity(
        "ingest_items", inp, result_type=list[Item],
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def measure_texts(model: str, texts: dict[str, str]) -> dict[str, int]:
    return await workflow.execute_activity(
        "measure_texts", MeasureTextsInput(model=model, texts=texts), result_type=dict[str, int],
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def store_generated(inp: GeneratedItemsInput) -> None:
    await workflow.execute_activity(
        "store_generated_items", inp,
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def record_events(session_id: str, events: list[EventSpec]) -> None:
    if events:
        await workflow.execute_activity(
            "record_events", EventsInput(session_id=session_id, events=events),
            start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
        )


async def save_checkpoint(inp: SaveCheckpointInput) -> None:
    await workflow.execute_activity(
        "save_checkpoint", inp, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def load_checkpoint(inp: LoadCheckpointInput) -> SessionCheckpoint:
    return await workflow.execute_activity(
        "load_checkpoint", inp, result_type=SessionCheckpoint,
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def condense_with_llm(inp: CondensationInput) -> CondensationOutcome:
    """One bounded condensation; Temporal retries a provider failure once, then the
    caller treats the error as a failed attempt and falls back."""
    return await workflow.execute_activity(
        "condense_with_llm", inp, result_type=CondensationOutcome,
        start_to_close_timeout=timedelta(seconds=inp.timeout_seconds * 2 + 10),
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=2,
                                 non_retryable_error_types=["CondenserRejected", "CondenserRateLimited",
                                                            "CondensationInputError", "WorkerMisconfigured"]),
    )


async def call_model(inp: ModelCallInput) -> ModelCallResult:
    return await workflow.execute_activity(
        "call_model", inp, result_type=ModelCallResult,
        start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=MODEL_RETRY,
    )


async def run_tool(inp: ToolRunInput) -> ToolRunResult:
    return await workflow.execute_activity(
        "run_tool", inp, result_type=ToolRunResult,
        start_to_close_timeout=LONG_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=IO_RETRY,
    )


# --- subagent lanes ---------------------------------------------------------------------


async def finish_lane(inp: FinishLaneInput) -> HandoffRef:
    return await workflow.execute_activity(
        "finish_lane", inp, result_type=HandoffRef, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def record_handoff(inp: RecordHandoffInput) -> Item:
    return await workflow.execute_activity(
        "record_handoff", inp, result_type=Item, start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def close_lane_episodes(inp: CloseLaneEpisodesInput) -> list[str]:
    return await workflow.execute_activity(
        "close_lane_episodes", inp, result_type=list[str],
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )


async def describe_lanes(workflow_ids: list[str]) -> list[LaneStatus]:
    return await workflow.execute_activity(
        "describe_lanes", workflow_ids, result_type=list[LaneStatus],
        start_to_close_timeout=SHORT_IO_TIMEOUT, retry_policy=IO_RETRY,
    )
