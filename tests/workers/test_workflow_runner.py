"""The worker's workflow runner: the SDK's sandbox, asked its per-payload questions directly.

Fails when the SDK's private sandboxed instance changes (a new temporalio): then
``worker/workflow_runner.py`` falls back to the stock sandbox and should be looked at again."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import CommandType
from temporalio.worker import WorkflowInstanceDetails
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _fake_info, _Instance

from worker import workflow_runner as runner_module
from worker.payload_codec import DATA_CONVERTER
from worker.workflow_runner import LanesSandboxRunner, compile_sources_once, fits_this_sdk, workflow_runner
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


@pytest.fixture
def plain_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Source compiled as Python does, until the code under test says otherwise (undone after)."""
    monkeypatch.setattr(importlib.machinery.SourceFileLoader, "source_to_code", runner_module._compile_source)


def test_a_source_file_is_compiled_once_per_text(tmp_path: Path, plain_compile: None):
    compile_sources_once()
    path = tmp_path / "settings_module.py"
    loader = importlib.machinery.SourceFileLoader("settings_module", str(path))
    first = loader.source_to_code(b"LIMIT = 1\n", str(path))
    assert loader.source_to_code(b"LIMIT = 1\n", str(path)) is first
    changed = loader.source_to_code(b"LIMIT = 2\n", str(path))  # an edited file compiles anew
    namespace: dict[str, Any] = {}
    exec(changed, namespace)
    assert namespace["LIMIT"] == 2


async def test_each_runs_sandbox_imports_the_workflow_afresh_from_code_compiled_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plain_compile: None):
    # no bytecode to read or write (PYTHONDONTWRITEBYTECODE, as deploy/Dockerfile sets): source is compiled
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    runner = workflow_runner()
    first, second = (_instance(runner).globals_and_locals["__temporal_workflow_class"] for _ in range(2))
    assert first is not second and first is not SessionWorkflow  # each run's sandbox has its own module
    assert first.run.__code__ is second.run.__code__  # made from one compilation of the source
