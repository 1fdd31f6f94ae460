"""The client's wire models of the engine's shapes (lanes_client/shapes.py) against the
server's (workflows): same fields, same types, same enum values, same bounds, same
defaults-or-required. Changing one side alone fails here; tests/client/test_clients.py
checks the same against live answers."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import BaseModel

from lanes_client import schemas, shapes
from workflows.context import content, ids, memory, report
from workflows.context.formats import request_formats  # its enum values, against the client's
from workflows.contract import session as contract

PAIRS: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (contract.SessionStatus, shapes.SessionStatus),
    (contract.TaskStatus, shapes.TaskStatus),
    (contract.SpawnResult, shapes.SpawnResult),
    (contract.ChildLane, shapes.ChildLane),
    (report.ContextReport, shapes.ContextReport),
    (memory.MemoryDoc, shapes.MemoryDoc),
    (content.ToolCall, shapes.ToolCall),
]
CONSTRAINTS = ("maxLength", "minLength", "maxItems", "minItems", "pattern", "minimum", "maximum",
               "exclusiveMinimum", "exclusiveMaximum")


def _shape(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A JSON schema without its titles, descriptions and defaults: what the wire carries."""
    if "$ref" in schema:
        return _shape(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    bounds = tuple((k, schema[k]) for k in CONSTRAINTS if k in schema)
    if "anyOf" in schema:
        return ("anyOf", tuple(sorted(repr(_shape(s, defs)) for s in schema["anyOf"])))
    if "enum" in schema or "const" in schema:
        return ("enum", tuple(sorted(map(str, schema.get("enum", [schema.get("const")])))))
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        return ("object", {k: _shape(v, defs) for k, v in schema["properties"].items()},
                tuple(sorted(schema.get("required", []))), schema.get("additionalProperties"))
    if kind == "object":
        extra = schema.get("additionalProperties")
        return ("map", _shape(extra, defs) if isinstance(extra, dict) else extra)
    if kind == "array" and "prefixItems" in schema:
        return ("tuple", tuple(_shape(s, defs) for s in schema["prefixItems"]))
    if kind == "array":
        return ("array", _shape(schema.get("items", {}), defs), bounds)
    return (kind, bounds)


def _wire(model: type[BaseModel], *, responses: bool) -> Any:
    schema = model.model_json_schema(mode="validation")
    shape = _shape(schema, schema.get("$defs", {}))
    return _relaxed(shape) if responses else shape


def _relaxed(shape: Any) -> Any:
    """A response model's shape without additionalProperties: the server's models forbid
    extras (they are its own state), the client's ignore them (an older client keeps working)."""
    if isinstance(shape, tuple) and shape and shape[0] == "object":
        return ("object", {k: _relaxed(v) for k, v in shape[1].items()}, shape[2])
    if isinstance(shape, tuple):
        return tuple(_relaxed(s) for s in shape)
    return shape


@pytest.mark.parametrize(("server", "client"), PAIRS, ids=[c.__name__ for _, c in PAIRS])
def test_the_client_model_carries_what_the_server_model_does(server, client):
    responses = client not in (shapes.MemoryDoc, shapes.ToolCall)  # those two are request bodies: strict both sides
    assert _wire(client, responses=responses) == _wire(server, responses=responses)


def test_the_shapes_drift_test_would_notice_a_change():
    class Renamed(shapes.SpawnResult):
        workflow: str = ""

    class Narrowed(BaseModel):
        lane: str
        workflow_id: int

    assert _wire(Renamed, responses=True) != _wire(contract.SpawnResult, responses=True)
    assert _wire(Narrowed, responses=True) != _wire(contract.SpawnResult, responses=True)


def test_literals_and_limits_match():
    assert shapes.MAX_SUBMIT_CHARS == ids.MAX_SUBMIT_CHARS
    for server, client in ((contract.SessionMode, shapes.SessionMode), (contract.TaskState, shapes.TaskState),
                           (contract.ChildLaneState, shapes.ChildLaneState),
                           (contract.CondenseStatus, shapes.CondenseStatus),
                           (request_formats.RequestFormat, shapes.RequestFormat)):
        assert set(get_args(server)) == set(get_args(client))
    assert schemas.MessageIn.model_json_schema()["properties"]["text"]["maxLength"] == ids.MAX_SUBMIT_CHARS
    assert [name for name, _ in memory.SECTIONS] == list(shapes.MemoryDoc.model_fields)


def test_capability_and_note_bodies_match_the_contract():
    from workflows.contract.tools import CONTEXT_TOOLS

    assert set(get_args(schemas.CapabilityKind)) == set(contract.CAPABILITY_KINDS)
    assert set(get_args(schemas.ContextTool)) == set(CONTEXT_TOOLS)
    assert schemas.MAX_CAPABILITY_CHARS == contract.MAX_CAPABILITY_CHARS
    assert schemas.MAX_NOTE_CHARS == contract.MAX_NOTE_CHARS
    assert set(get_args(schemas.CapabilityOut.model_fields["status"].annotation)) == set(
        get_args(contract.CapabilityStatus))
    server = set(contract.CapabilityResult.model_fields) | {"session_id", "name"}
    assert set(schemas.CapabilityOut.model_fields) == server
    assert set(schemas.NoteOut.model_fields) == set(contract.PinResult.model_fields) | {"session_id"}
