"""Liveness of activities that heartbeat from the first interval on (activities.heartbeat,
``at_start=False``): with no beat yet, Temporal's heartbeat timeout runs from the attempt's
start, so a worker that dies before its first beat is noticed after the heartbeat timeout,
not after the start-to-close timeout (300 s here)."""

from __future__ import annotations

import uuid

from temporalio.worker import Worker

from tests.workers.heartbeat_probe import HeartbeatProbe, silent_before_first_beat


async def test_no_beat_yet_times_out_on_the_heartbeat_timeout(temporal_client):
    queue = f"hb-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[HeartbeatProbe],
                      activities=[silent_before_first_beat]):
        outcome = await temporal_client.execute_workflow(HeartbeatProbe.run, id=queue, task_queue=queue)
    assert outcome == "timeout HEARTBEAT"
