"""Schemathesis fuzzing of /openapi.json against the live API: no 5xx, every status code and
body as documented, and schema-invalid input rejected. Bounded: a few dozen examples per
operation (positive and negative), well under a minute.

Half of the generated cases address real sessions (an external one, and for /messages a
hosted one limited to one turn per task) so that the workflow handlers see the input too,
not only the 404 of an unknown id.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from lanes_client import tool_result_item, user_item
from tests.api.stack import replay_body

EXAMPLES = {GenerationMode.POSITIVE: 12, GenerationMode.NEGATIVE: 8}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def rejects_invalid_data(ctx, response, case):
    """Schemathesis' negative_data_rejection, with 413 (body over the 2 MiB limit) as a rejection too:
    a string the schema caps at 1 M characters can exceed 2 MiB once JSON-escaped."""
    if response.status_code == 413:
        return None
    return negative_data_rejection(ctx, response, case)


@pytest.fixture(scope="module")
async def targets(client_a, trajectory, replay):
    external = (await client_a.create_session(mode="external")).session_id
    call = {"id": "f1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    out = await client_a.append_items(external, [
        user_item("fuzz me"), {"kind": "assistant", "text": "", "tool_calls": [
            {"id": call["id"], "name": "bash", "arguments": "{}"}]},
        tool_result_item("f1", "bash", "output " * 100, 0)])
    obs = (await client_a.item(external, out.item_ids[2])).metadata["observation_id"]
    hosted = (await client_a.create_session(**replay_body(trajectory, replay, max_turns_per_task=1))).session_id
    return {"external": external, "hosted": hosted, "item_id": out.item_ids[2], "obs_id": obs}


def fuzz(operation, mode: GenerationMode, examples: int, auth: dict[str, str], targets: dict[str, str]):
    """A Hypothesis test of one operation in one generation mode."""
    path = operation.path
    checks = CHECKS + ([rejects_invalid_data] if mode == GenerationMode.NEGATIVE else [])

    @given(case=operation.as_strategy(generation_mode=mode), real=st.booleans())
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def run(case, real):
        components = case.meta.components if case.meta is not None else {}

        def negated(location: ParameterLocation) -> bool:
            info = components.get(location)
            return info is not None and info.mode == GenerationMode.NEGATIVE

        if not negated(ParameterLocation.HEADER):  # a negated header set may be "no token": must be 401
            case.headers = {**(case.headers or {}), **auth}
        params = case.path_parameters or {}
        if real and "session_id" in params and not path.endswith("/cancel") and not negated(ParameterLocation.PATH):
            params["session_id"] = targets["hosted" if path.endswith("/messages") else "external"]
            for name in ("obs_id", "item_id"):
                if name in params:
                    params[name] = targets[name]
        if path.endswith("/stream"):
            case.query = {**(case.query or {}), "timeout": 0.2}
        case.call_and_validate(checks=checks, timeout=30)

    return run


def test_openapi_fuzz_finds_no_server_error_and_no_schema_violation(api_stack, targets):
    schema = schemathesis.openapi.from_url(f"{api_stack.base_url}/openapi.json")
    auth = {"Authorization": f"Bearer {api_stack.token_a}"}
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    for operation in operations:
        for mode, examples in EXAMPLES.items():  # bounded by examples, not by time (no timed assertion)
            try:
                fuzz(operation, mode, examples, auth, targets)()
            except Unsatisfiable:  # nothing to negate (an operation without parameters or body)
                continue
            except Exception as exc:  # collect every operation's failure, then report them all
                text = str(exc)  # a reproduction may quote a multi-megabyte body
                failures.append(f"{operation.label} [{mode.value}]: {text[:3000]}")
    assert not failures, "\n\n".join(failures)
