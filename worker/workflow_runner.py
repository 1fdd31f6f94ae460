"""The workflow sandbox, without its cost per payload.

Temporal's Python SDK (1.35) asks the workflow instance for a serialization context before it
decodes each payload of an activation and encodes each payload of a completion. In the sandbox,
each question compiles and runs a snippet of source text inside it, under the sandbox's import
hooks (``_Instance.get_serialization_context``): sampled on one worker serving 128 hosted
sessions, that was 13 % of the worker's CPU, against under 1 % for the workflow code itself. The
answer is a plain lookup in the instance (its info and pending commands), which imports nothing.

The sandbox also imports the workflow modules afresh for every workflow run (a new session, a
run continued as new, a workflow brought back into the worker's cache), and without bytecode on
disk (``PYTHONDONTWRITEBYTECODE``, which deploy/Dockerfile and this machine set) each import
compiles the source again: about 12 ms of a new run's first workflow task, 18-30 ms in all to
make its sandbox. ``compile_sources_once`` keeps each source file's code object by its text, so
the process compiles a file once; a file whose text changed compiles anew.

``LanesSandboxRunner`` is the SDK's own sandbox with its default restrictions; workflow code
still runs inside it. Only those two questions are asked of the in-sandbox instance by a plain
call, with the flags the snippet sets. The class it extends is private to the SDK, so
``workflow_runner()`` checks it is the one this was written against and otherwise uses the stock
sandbox (tests/test_workflow_runner.py fails then, to have this looked at again).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import logging
from types import CodeType
from typing import Any

import temporalio.workflow
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

log = logging.getLogger("lanes.worker")

try:  # private to the SDK: checked below, the stock sandbox used when it differs
    from temporalio.worker.workflow_sandbox._runner import _Instance
except ImportError:  # pragma: no cover - another SDK layout
    _Instance = None  # type: ignore[assignment,misc]

IN_SANDBOX = "__temporal_in_sandbox"  # the global the SDK keeps the in-sandbox instance under
QUESTIONS = ("get_serialization_context", "get_external_store_context")


def fits_this_sdk() -> bool:
    """Whether the SDK's sandboxed instance is the one ``LanesSandboxRunner`` extends."""
    return _Instance is not None and all(hasattr(_Instance, name) for name in (*QUESTIONS, "_run_code", "activate"))


class _DirectContextInstance(_Instance or object):  # type: ignore[misc]
    """The SDK's sandboxed instance; the per-payload context questions are plain calls."""

    def _ask(self, question: str, command_info: Any) -> Any:
        inside = self.globals_and_locals[IN_SANDBOX]
        self.importer.restriction_context.is_runtime = True
        temporalio.workflow.unsafe._set_in_sandbox(True)
        try:
            return getattr(inside, question)(command_info)
        finally:
            temporalio.workflow.unsafe._set_in_sandbox(False)
            self.importer.restriction_context.is_runtime = False

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._ask("get_serialization_context", command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._ask("get_external_store_context", command_info)


class LanesSandboxRunner(SandboxedWorkflowRunner):
    """The SDK's sandbox whose instances answer the per-payload context questions directly."""

    def create_instance(self, det: Any) -> Any:
        return _DirectContextInstance(det, self.runner_class, self.restrictions)


_compile_source = importlib.machinery.SourceFileLoader.source_to_code
_compiled: dict[tuple[str, bytes], CodeType] = {}


def _source_to_code_once(self: Any, data: Any, path: Any, *, _optimize: int = -1) -> CodeType:
    """``SourceLoader.source_to_code``, compiled once per file path and text digest."""
    if not isinstance(data, bytes) or not isinstance(path, str) or _optimize != -1:
        return _compile_source(self, data, path, _optimize=_optimize)
    key = (path, hashlib.blake2b(data, digest_size=16).digest())
    code = _compiled.get(key)
    if code is None:  # two threads may both compile it: the same code either way
        code = _compiled[key] = _compile_source(self, data, path)
    return code


def compile_sources_once() -> None:
    """Keep the code of each source file the process compiles (idempotent)."""
    importlib.machinery.SourceFileLoader.source_to_code = _source_to_code_once  # type: ignore[method-assign]


def workflow_runner() -> WorkflowRunner:
    """The runner every worker and replayer uses."""
    compile_sources_once()
    if fits_this_sdk():
        return LanesSandboxRunner()
    log.warning("temporalio's sandboxed instance is not the one LanesSandboxRunner extends: the stock sandbox runs")
    return SandboxedWorkflowRunner()
