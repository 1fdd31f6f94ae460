"""Histories recorded by earlier workflow code still replay against the current code.

A change that alters the commands SessionWorkflow issues must be gated with
``workflow.patched`` (DESIGN §4); otherwise in-flight sessions would fail to replay
after an upgrade. Re-record with ``python -m tests.histories.record`` only when a
release deliberately drops support for older histories.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from worker.payload_codec import DATA_CONVERTER
from worker.workflow_runner import workflow_runner
from workflows.lane_workflow import LaneWorkflow
from workflows.session import SessionWorkflow

HISTORIES = sorted(Path(__file__).resolve().parent.glob("*.json.gz"))


def test_histories_are_recorded():
    names = {path.name.split("-run")[0] for path in HISTORIES}
    assert {"hosted", "continue-as-new", "overflow", "external", "subagents", "subagents-sub-0001",
            "rules2-hosted", "rules2-external", "rules2-unfit", "external-steps", "answers-hosted",
            "answers-external", "local-tools-hosted"} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.name for p in HISTORIES])
async def test_recorded_history_replays_against_current_code(path: Path):
    history = WorkflowHistory.from_json(path.name, gzip.decompress(path.read_bytes()).decode())
    result = await Replayer(workflows=[SessionWorkflow, LaneWorkflow], data_converter=DATA_CONVERTER,
                            workflow_runner=workflow_runner()).replay_workflow(
        history, raise_on_replay_failure=True
    )
    assert result.replay_failure is None
