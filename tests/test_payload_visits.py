"""The SDK's payload walks are skipped only where they could not have changed anything.

``worker/payload_visits.py`` lets a small completion, or an activation without a compressed or
externally stored payload, pass without the SDK's three walks over its payloads. Checked here
against the SDK's own walks on activations and completions with small, large, compressed and
reference-marked payloads: the same protos come out, and the same errors. The whole suite runs
the worker through the replacements (every integration test), and the codec's own tests send
payloads past the threshold through them."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.bridge.proto import activity_result as ar
from temporalio.bridge.proto import workflow_activation as wa
from temporalio.bridge.proto import workflow_commands as cmd
from temporalio.bridge.proto import workflow_completion as wc
from temporalio.contrib.pydantic import pydantic_data_converter

from worker import payload_visits
from worker.payload_codec import DATA_CONVERTER, THRESHOLD, compressed


def json_payload(size: int) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps("x" * size).encode())


def activation(payloads: list[Payload]) -> wa.WorkflowActivation:
    return wa.WorkflowActivation(run_id="run", jobs=[
        wa.WorkflowActivationJob(resolve_activity=wa.ResolveActivity(
            seq=n, result=ar.ActivityResolution(completed=ar.Success(result=p))))
        for n, p in enumerate(payloads)])


def completion(payloads: list[Payload]) -> wc.WorkflowActivationCompletion:
    return wc.WorkflowActivationCompletion(run_id="run", successful=wc.Success(commands=[
        cmd.WorkflowCommand(schedule_activity=cmd.ScheduleActivity(seq=1, activity_type="a", arguments=payloads))]))


async def both(walk: str, message, converter=DATA_CONVERTER):
    """``message`` after the SDK's walk and after the replacement (each on its own copy), or
    the type of the error each raised."""
    outcomes = []
    for function in ((payload_visits.SDK_DECODE, payload_visits.decode_activation) if walk == "decode"
                     else (payload_visits.SDK_ENCODE, payload_visits.encode_completion)):
        copy = type(message)()
        copy.CopyFrom(message)
        try:
            await function(copy, converter, True, 4)
            outcomes.append(copy.SerializeToString(deterministic=True))
        except Exception as error:  # the same error is what is compared
            outcomes.append(type(error).__name__)
    return outcomes


SIZES = st.lists(st.sampled_from([0, 10, 2_000, THRESHOLD // 2, THRESHOLD - 100, THRESHOLD, 3 * THRESHOLD]),
                 min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(SIZES, st.booleans())
async def test_a_completion_comes_out_as_the_sdks_walks_leave_it(sizes, precompressed):
    payloads = [json_payload(size) for size in sizes]
    if precompressed:
        payloads = [compressed(p) for p in payloads]
    sdk, ours = await both("encode", completion(payloads))
    assert sdk == ours


@settings(max_examples=40, deadline=None)
@given(SIZES, st.booleans())
async def test_an_activation_comes_out_as_the_sdks_walks_leave_it(sizes, compress):
    payloads = [compressed(json_payload(size)) if compress else json_payload(size) for size in sizes]
    sdk, ours = await both("decode", activation(payloads))
    assert sdk == ours


async def test_a_compressed_payload_is_inflated_and_a_large_one_compressed():
    big = json_payload(3 * THRESHOLD)
    message = activation([compressed(big)])
    await payload_visits.decode_activation(message, DATA_CONVERTER, True, 4)
    assert message.jobs[0].resolve_activity.result.completed.result == big
    outgoing = completion([big])
    await payload_visits.encode_completion(outgoing, DATA_CONVERTER, True, 4)
    assert outgoing.successful.commands[0].schedule_activity.arguments[0].metadata["encoding"] == b"binary/zlib"


async def test_an_external_storage_reference_is_refused_as_the_sdk_refuses_it():
    marked = json_payload(10)
    marked.metadata["__temporal_external_storage_reference"] = b"true"
    sdk, ours = await both("decode", activation([marked]))
    assert sdk == ours == "RuntimeError"


async def test_small_messages_are_not_walked_and_others_are(monkeypatch):
    walked = []

    async def counting(message, *args):
        walked.append(type(message).__name__)

    monkeypatch.setattr(payload_visits, "SDK_DECODE", counting)
    monkeypatch.setattr(payload_visits, "SDK_ENCODE", counting)
    await payload_visits.decode_activation(activation([json_payload(100)]), DATA_CONVERTER, True, 4)
    await payload_visits.encode_completion(completion([json_payload(100)]), DATA_CONVERTER, True, 4)
    assert walked == []
    await payload_visits.decode_activation(activation([compressed(json_payload(3 * THRESHOLD))]), DATA_CONVERTER, True, 4)
    await payload_visits.encode_completion(completion([json_payload(THRESHOLD)]), DATA_CONVERTER, True, 4)
    assert walked == ["WorkflowActivation", "WorkflowActivationCompletion"]
    # another codec, or none: always the SDK's walks
    await payload_visits.encode_completion(completion([json_payload(100)]), pydantic_data_converter, True, 4)
    await payload_visits.decode_activation(activation([json_payload(100)]),
                                           dataclasses.replace(DATA_CONVERTER, payload_codec=None), True, 4)
    assert len(walked) == 4


def test_the_replacements_fit_this_sdk_and_are_installed():
    # fails when the SDK's walks change: look at worker/payload_visits.py again
    assert payload_visits.fits_this_sdk()
    assert payload_visits.install()
    import temporalio.bridge.worker as bridge_worker
    assert bridge_worker.decode_activation is payload_visits.decode_activation
    assert bridge_worker.encode_completion is payload_visits.encode_completion


@pytest.fixture(autouse=True)
def _sdk_walks_back():
    import temporalio.bridge.worker as bridge_worker
    before = bridge_worker.decode_activation, bridge_worker.encode_completion
    yield
    bridge_worker.decode_activation, bridge_worker.encode_completion = before
