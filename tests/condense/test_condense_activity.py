"""condense_with_llm, run for real: ActivityEnvironment + the test session's PostgreSQL +
a scripted OpenAI-compatible condenser over HTTP through the real ``openai`` client.

Every run also checks that the session's stored history (sessions, items, observations,
events, checkpoints, request plans) is byte for byte what it was before.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.condense import CondenseActivities, check_answer, measure_memory
from activities.metrics import REGISTRY
from tests.condense.conftest import MODEL, PREVIEW_CHARS, Seeded, condense_activities, condense_settings, dump_history
from workflows.context import MemoryDoc, memory_text, validate_memory
from workflows.contract.condense import CondensationInput, CondensationOutcome
from workflows.contract.failures import (
    CONDENSATION_INPUT_ERROR,
    CONDENSER_RATE_LIMITED,
    CONDENSER_REJECTED,
    CONDENSER_TIMEOUT,
    CONDENSER_UNAVAILABLE,
)

pytestmark = pytest.mark.timeout(60)


def make_input(seeded: Seeded, **overrides) -> CondensationInput:
    fields = {
        "session_id": seeded.session_id,
        "lane": seeded.lane,
        "source_item_ids": seeded.source_ids,
        "anchor_item_ids": seeded.anchor_ids,
        "live_memory_item_id": seeded.memory_id,
        "known_observation_ids": seeded.known_observation_ids,
        "condenser_window": 128_000,
        "preview_chars": PREVIEW_CHARS,
        "timeout_seconds": 10,
    }
    fields.update(overrides)
    return CondensationInput(**fields)


async def run(activities: CondenseActivities, seeded: Seeded, inp: CondensationInput,
              beats: list | None = None) -> CondensationOutcome | ApplicationError:
    """Run the activity; returns its outcome or the ApplicationError it raised, after
    checking that the stored history did not change."""
    database_url = activities.settings.database_url
    assert database_url
    before = await dump_history(database_url, seeded.session_id)
    assert before["items"] and before["observations"] and before["events"]
    env = ActivityEnvironment()
    if beats is not None:
        env.on_heartbeat = lambda *details: beats.append(details)
    try:
        result: CondensationOutcome | ApplicationError = await env.run(activities.condense_with_llm, inp)
    except ApplicationError as error:
        result = error
    after = await dump_history(database_url, seeded.session_id)
    assert after == before, "the condensation activity changed the stored history"
    return result


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- succeeded ----------------------------------------------------------------------------

async def test_valid_memory_succeeds(runtime, condenser, database_url, seeded):
    result = await run(runtime, seeded, make_input(seeded))
    assert isinstance(result, CondensationOutcome), result
    assert result.status == "succeeded" and result.attempts == 1 and result.errors == []
    doc = MemoryDoc.model_validate(result.memory)
    assert result.memory_text == memory_text(doc)
    assert result.memory_tokens == measure_memory(result.memory_text, MODEL) <= 2000
    # the workflow's own check accepts it
    assert validate_memory(doc, seeded.known_observation_ids, result.memory_tokens) == []
    assert doc.references[0].startswith("observation://obs-")
    assert result.model == MODEL and 0 < result.source_tokens < result.request_tokens
    assert result.latency_ms >= 0

    [body] = condenser.requests
    assert "tools" not in body and "tool_choice" not in body
    assert body["model"] == MODEL
    assert body["response_format"] == {"type": "json_object"}
    assert 0 < body["max_tokens"] <= 4096
    assert condenser.headers[0]["authorization"] == "Bearer sk-test-not-a-secret"
    system, user = body["messages"]
    assert system["role"] == "system" and "ONLY one JSON object" in system["content"]
    prompt = user["content"]
    # anchors, the live memory to merge, the allowed addresses and the source are all there
    assert "keep the fix minimal" in prompt
    assert "## Existing long-term memory (merge it)" in prompt and "empty values crash" in prompt
    allowed = prompt.split("## Allowed observation addresses", 1)[1].split("##", 1)[0]
    assert f"observation://{seeded.known_observation_ids[0]}" in allowed  # a source output
    assert f"observation://{seeded.known_observation_ids[-1]}" in allowed  # cited by the live memory
    # the source stays bounded: every entry at most a COMPACT preview
    history = prompt.split("## History to condense", 1)[1]
    assert history.count("\n[#") + 1 >= len(seeded.source_ids)
    assert "characters omitted" in history  # large outputs shown as head + tail with their address


async def test_fenced_json_is_accepted(runtime, condenser, database_url, seeded):
    condenser.script("fenced")
    result = await run(runtime, seeded, make_input(seeded))
    assert result.status == "succeeded" and result.attempts == 1


async def test_invalid_json_is_retried_once_with_the_errors(runtime, condenser, database_url, seeded):
    condenser.script("invalid_json", "valid")
    result = await run(runtime, seeded, make_input(seeded))
    assert result.status == "succeeded" and result.attempts == 2
    assert len(result.errors) == 1 and result.errors[0].startswith("attempt 1: memory is not valid JSON")
    first, second = condenser.requests
    assert second["messages"][:2] == first["messages"]
    echo, feedback = second["messages"][2:]
    assert echo == {"role": "assistant", "content": "Here is the memory: completed_work = reproduced the bug"}
    assert feedback["role"] == "user" and "not valid JSON" in feedback["content"]


async def test_bad_reference_is_retried(runtime, condenser, database_url, seeded):
    condenser.script("bad_reference", "valid")
    result = await run(runtime, seeded, make_input(seeded))
    assert result.status == "succeeded" and result.attempts == 2
    assert any("absolute path" in e for e in result.errors)
    assert any("does not have" in e for e in result.errors)


async def test_slow_answer_heartbeats(runtime, condenser, database_url, seeded):
    condenser.script({"mode": "slow", "delay": 2.5})
    beats: list = []
    result = await run(runtime, seeded, make_input(seeded, timeout_seconds=10), beats)
    assert result.status == "succeeded"
    assert len(beats) >= 2  # one at the start, one every 2 s while waiting


# --- invalid --------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "reason"), [
    ("invalid_json", "not valid JSON"),
    ("schema", "Extra inputs are not permitted"),
    ("oversized_memory", "at most 2000 are allowed"),
])
async def test_invalid_twice_is_invalid(runtime, condenser, database_url, seeded, mode, reason):
    condenser.script(mode, mode, "valid")
    result = await run(runtime, seeded, make_input(seeded))
    assert isinstance(result, CondensationOutcome)
    assert result.status == "invalid" and result.attempts == 2 and result.memory is None
    assert len(condenser.requests) == 2  # one retry, no more
    assert result.errors[0].startswith("attempt 1:")
    assert any(e.startswith("attempt 2:") for e in result.errors)
    assert reason in "\n".join(result.errors)


async def test_schema_errors_name_the_fields(runtime, condenser, database_url, seeded):
    condenser.script("schema", "schema")
    result = await run(runtime, seeded, make_input(seeded))
    text = "\n".join(result.errors)
    assert "completed_work" in text and "mood" in text


# --- oversized and unavailable: no model call ------------------------------------------

async def test_oversized_source_makes_no_request(runtime, condenser, database_url, seeded):
    fits = await run(runtime, seeded, make_input(seeded))
    condenser.script()
    window = fits.request_tokens + 4096 - 1  # one token short
    result = await run(runtime, seeded, make_input(seeded, condenser_window=window))
    assert result.status == "oversized" and result.attempts == 0 and condenser.requests == []
    assert result.source_tokens == fits.source_tokens and "exceed the condenser window" in result.errors[0]
    ok = await run(runtime, seeded, make_input(seeded, condenser_window=window + 1))
    assert ok.status == "succeeded"


async def test_provider_context_overflow_is_oversized(runtime, condenser, database_url, seeded):
    condenser.script("context_length")
    result = await run(runtime, seeded, make_input(seeded))
    assert result.status == "oversized" and result.attempts == 1
    assert "maximum context length" in result.errors[-1]


async def test_no_condenser_configured_is_unavailable(runtime, condenser, database_url, seeded):
    unconfigured = condense_activities(condense_settings(database_url, None))
    assert unconfigured.settings.openai_base_url is None and unconfigured.settings.openai_api_key is None
    try:
        result = await run(unconfigured, seeded, make_input(seeded))
    finally:
        await unconfigured.stores.close()
    assert result.status == "unavailable" and result.attempts == 0 and condenser.requests == []


async def test_base_url_override_sends_no_real_key(condenser, database_url, seeded):
    activities = condense_activities(condense_settings(database_url, None).model_copy(
        update={"openai_api_key": condense_settings(database_url, condenser).openai_api_key}))
    condenser.script()
    try:
        result = await run(activities, seeded, make_input(seeded, base_url=condenser.base_url, model="replay"))
    finally:
        await activities.stores.close()
    assert result.status == "succeeded"
    assert condenser.headers[0]["authorization"] == "Bearer replay"
    assert condenser.requests[0]["model"] == "replay"


# --- provider errors: Temporal decides -----------------------------------------------

async def test_http_429_is_retryable_after_retry_after(runtime, condenser, database_url, seeded):
    condenser.script({"mode": "http_429", "retry_after": 7})
    error = await run(runtime, seeded, make_input(seeded))
    assert isinstance(error, ApplicationError)
    assert error.type == "CondenserHTTP429" and not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=7)
    assert len(condenser.requests) == 1  # SDK retries are off


async def test_http_429_with_a_long_retry_after_falls_back(runtime, condenser, database_url, seeded):
    condenser.script({"mode": "http_429", "retry_after": 3600})
    error = await run(runtime, seeded, make_input(seeded))
    assert isinstance(error, ApplicationError)
    assert error.type == CONDENSER_RATE_LIMITED and error.non_retryable


async def test_http_500_is_retryable(runtime, condenser, database_url, seeded):
    condenser.script("http_500", "valid")
    error = await run(runtime, seeded, make_input(seeded))
    assert isinstance(error, ApplicationError)
    assert error.type == "CondenserHTTP500" and not error.non_retryable and error.next_retry_delay is None
    assert len(condenser.requests) == 1
    # Temporal's next attempt succeeds
    assert (await run(runtime, seeded, make_input(seeded))).status == "succeeded"


async def test_timeout_is_retryable(runtime, condenser, database_url, seeded):
    condenser.script({"mode": "timeout", "delay": 3})
    error = await run(runtime, seeded, make_input(seeded, timeout_seconds=0.5))
    assert isinstance(error, ApplicationError)
    assert error.type == CONDENSER_TIMEOUT and not error.non_retryable
    assert len(condenser.requests) == 1


async def test_garbage_body_is_retryable(runtime, condenser, database_url, seeded):
    condenser.script("garbage")
    error = await run(runtime, seeded, make_input(seeded))
    assert isinstance(error, ApplicationError)
    assert error.type == CONDENSER_UNAVAILABLE and not error.non_retryable


async def test_http_400_is_rejected_for_good(runtime, condenser, database_url, seeded):
    condenser.script("http_400")
    error = await run(runtime, seeded, make_input(seeded))
    assert isinstance(error, ApplicationError)
    assert error.type == CONDENSER_REJECTED and error.non_retryable


async def test_unknown_items_are_an_input_error(runtime, condenser, database_url, seeded):
    error = await run(runtime, seeded, make_input(seeded, source_item_ids=[*seeded.source_ids, "itm-999999"]))
    assert isinstance(error, ApplicationError)
    assert error.type == CONDENSATION_INPUT_ERROR and error.non_retryable and condenser.requests == []


# --- metrics ----------------------------------------------------------------------------

async def test_metrics_move(runtime, condenser, database_url, seeded):
    succeeded = sample("lanes_condensations_total", status="succeeded")
    invalid = sample("lanes_condensation_failures_total", status="invalid")
    failed = sample("lanes_condensation_failures_total", status="failed")
    latency_count = sample("lanes_condensation_latency_seconds_count", status="succeeded")
    calls_ok = sample("lanes_model_call_latency_seconds_count", purpose="condenser", outcome="ok")
    errors_500 = sample("lanes_model_call_errors_total", purpose="condenser", type="CondenserHTTP500")

    condenser.script("valid", "invalid_json", "invalid_json", "http_500")
    assert (await run(runtime, seeded, make_input(seeded))).status == "succeeded"
    assert (await run(runtime, seeded, make_input(seeded))).status == "invalid"
    assert isinstance(await run(runtime, seeded, make_input(seeded)), ApplicationError)

    assert sample("lanes_condensations_total", status="succeeded") == succeeded + 1
    assert sample("lanes_condensation_failures_total", status="invalid") == invalid + 1
    assert sample("lanes_condensation_failures_total", status="failed") == failed + 1
    assert sample("lanes_condensation_latency_seconds_count", status="succeeded") == latency_count + 1
    assert sample("lanes_model_call_latency_seconds_count", purpose="condenser", outcome="ok") == calls_ok + 3
    assert sample("lanes_model_call_errors_total", purpose="condenser", type="CondenserHTTP500") == errors_500 + 1



def test_payloads_round_trip_through_the_data_converter():
    """What the workflow sends and gets back survives pydantic_data_converter."""
    from temporalio.contrib.pydantic import pydantic_data_converter

    converter = pydantic_data_converter.payload_converter
    inp = CondensationInput(session_id="s", source_item_ids=["itm-000002"], anchor_item_ids=["itm-000001"],
                            known_observation_ids=["obs-s-000003"], condenser_window=32_000)
    out = CondensationOutcome(status="succeeded", memory={"completed_work": ["x"]}, memory_text="m",
                              memory_tokens=5, attempts=1, source_tokens=10, request_tokens=20, latency_ms=3)
    [back_in] = converter.from_payloads(converter.to_payloads([inp]), [CondensationInput])
    [back_out] = converter.from_payloads(converter.to_payloads([out]), [CondensationOutcome])
    assert back_in == inp and back_out == out
    assert inp.reserve_tokens == 4096 and inp.max_memory_tokens == 2000 and inp.lane == "main"


def test_the_memory_contract_applies_to_condenser_answers_when_the_session_asks():
    answer = json.dumps({"completed_work": ["  fixed it ", "fixed it"], "open_questions": [f"q{n}" for n in range(21)]})
    doc, _, _, errors = check_answer(answer, set(), 2_000, memory_contract=True)
    assert doc is None and "open_questions: 21 entries; at most 20" in errors
    doc, _, _, errors = check_answer(answer, set(), 2_000, memory_contract=False)  # runs of engine rules 1
    assert doc is not None and errors == []
    trimmed = json.dumps({"completed_work": ["  fixed it ", "fixed it"]})
    doc, text, _, _ = check_answer(trimmed, set(), 2_000, memory_contract=True)
    assert doc is not None and doc.completed_work == ["fixed it"] and text.count("fixed it") == 1
