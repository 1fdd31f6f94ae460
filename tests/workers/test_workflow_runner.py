"""The worker's workflow runner: the SDK's sandbox, asked its per-payload questions directly.

Fails when the SDK's private sandboxed instance changes (a new temporalio): then
``worker/workflow_runner.py`` falls back to the stock sandbox and should be looked at again."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.api.enums.v1 import CommandType
from temporalio.worker import WorkflowInstanceDetails
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _fake_info, _Instance

from worker.payload_codec import DATA_CONVERTER
from worker.workflow_runner import LanesSandboxRunner, fits_this_sdk, workflow_runner
from workflows.session import SessionWorkflow


def _instance(runner: SandboxedWorkflowRunner) -> Any:
    return runner.create_instance(WorkflowInstanceDetails(
        payload_converter_factory=DATA_CONVERTER._new_payload_converter,
        failure_converter_class=DATA_CONVERTER.failure_converter_class, interceptor_classes=[],
        defn=workflow._Definition.must_from_class(SessionWorkflow), info=_fake_info, randomness_seed=1,
        extern_functions={}, disable_eager_activity_execution=False, worker_level_failure_exception_types=[],
        patch_activation_callback=None, last_completion_result=None, last_failure=None))


async def test_workers_and_replayers_get_the_lanes_sandbox_on_this_sdk():
    assert fits_this_sdk()
    runner = workflow_runner()
    assert isinstance(runner, LanesSandboxRunner)
    assert runner.restrictions is SandboxedWorkflowRunner().restrictions  # the SDK's default restrictions
    assert isinstance(_instance(runner), _Instance)  # workflow code runs in the SDK's own sandbox


async def test_it_answers_every_context_question_as_the_stock_sandbox_does():
    ours = _instance(LanesSandboxRunner())
    questions = [None, *(CommandInfo(command_type=kind, command_seq=seq)
                         for kind in (CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
                                      CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
                                      CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION)
                         for seq in (0, 1, 7))]
    for command_info in questions:
        for question in ("get_serialization_context", "get_external_store_context"):
            direct = getattr(ours, question)(command_info)
            through_sandbox = getattr(_Instance, question)(ours, command_info)
            assert direct == through_sandbox, (question, command_info)
    assert ours.get_serialization_context(None).workflow_id == _fake_info.workflow_id
    # the flags a sandboxed call sets are cleared after a direct one
    assert not ours.importer.restriction_context.is_runtime
    assert not workflow.unsafe.in_sandbox()
