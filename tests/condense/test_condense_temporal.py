"""condense_with_llm on a real Temporal server: the error mapping drives Temporal's retries
(Retry-After honoured, non-retryable 4xx not retried, final failure visible to the workflow)."""

from __future__ import annotations

import time
import uuid

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from activities.condense import CondenseActivities
from tests.condense.probe_workflow import CondenseProbe
from tests.condense.test_condense_activity import make_input

pytestmark = pytest.mark.timeout(60)


async def probe(client: Client, activities: CondenseActivities, inp) -> dict:
    queue = f"condense-probe-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[CondenseProbe], activities=[activities.condense_with_llm]):
        return await client.execute_workflow(CondenseProbe.run, inp, id=f"probe-{uuid.uuid4().hex}",
                                             task_queue=queue)


async def test_429_is_retried_after_retry_after_then_succeeds(runtime, condenser, temporal_client, seeded):
    condenser.script({"mode": "http_429", "retry_after": 2}, "valid")
    started = time.monotonic()
    result = await probe(temporal_client, runtime, make_input(seeded))
    assert result == {"status": "succeeded", "attempts": 1}
    assert len(condenser.requests) == 2
    assert time.monotonic() - started >= 2.0  # Temporal waited Retry-After, not initial_interval


async def test_repeated_500_ends_as_failed(runtime, condenser, temporal_client, seeded):
    condenser.script("http_500", "http_500", "valid")
    result = await probe(temporal_client, runtime, make_input(seeded))
    assert result["status"] == "failed" and result["error_type"] == "CondenserHTTP500"
    assert result["retry_state"] == "MAXIMUM_ATTEMPTS_REACHED" and len(condenser.requests) == 2


async def test_rejected_request_is_not_retried(runtime, condenser, temporal_client, seeded):
    condenser.script("http_400", "valid")
    result = await probe(temporal_client, runtime, make_input(seeded))
    assert result["status"] == "failed" and result["error_type"] == "CondenserRejected"
    assert result["retry_state"] == "NON_RETRYABLE_FAILURE"
    assert len(condenser.requests) == 1
