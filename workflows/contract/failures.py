"""The error types activities raise that the workflows react to (``ApplicationError.type``).

One place for all of them, so a retry policy (``workflows.activity_calls``) names what it
will not retry without importing the activity that raises it.
"""

from __future__ import annotations

# Any activity: the worker process is set up wrong; no retry can fix it.
WORKER_MISCONFIGURED = "WorkerMisconfigured"

# The model activity.
# The provider refused the request as too long (non-retryable: the agent loop answers it
# with the overflow ladder, the condenser with "oversized").
CONTEXT_LENGTH_EXCEEDED = "ContextLengthExceeded"
MODEL_REQUEST_REJECTED = "ModelRequestRejected"  # a 4xx no retry can fix
MODEL_ANSWER_INVALID = "ModelAnswerInvalid"  # garbage: retried

# The tool activity: bash cannot be confined and the operator did not explicitly allow
# unconfined tools (LANES_UNSAFE_NO_SANDBOX=1); the task fails, non-retryable.
SANDBOX_UNAVAILABLE = "ToolSandboxUnavailable"

# The condenser (the workflow treats all of them as outcome "failed").
CONDENSER_REJECTED = "CondenserRejected"  # 4xx other than 408/409/429: non-retryable
CONDENSER_RATE_LIMITED = "CondenserRateLimited"  # Retry-After beyond max_retry_delay_seconds: non-retryable
CONDENSER_TIMEOUT = "CondenserTimeout"
CONDENSER_UNAVAILABLE = "CondenserUnavailable"  # connection error, garbage answer
CONDENSATION_INPUT_ERROR = "CondensationInputError"  # no source / items not stored: non-retryable

# Subagent lanes.
HANDOFF_MISSING = "HandoffMissing"  # non-retryable: no retry makes a missing handoff appear
HANDOFF_INVALID = "HandoffInvalid"
LANE_REPAIR_CONFLICT = "LaneRepairConflict"

# Sessions and items.
CHECKPOINT_NOT_FOUND = "CheckpointNotFound"
# An ingest whose ids hold other content (details: next_free_seq, ids).
ITEMS_CONFLICT = "ItemsConflict"
