"""The condenser activity reports what the provider counted for its calls (summed over the
retry), with our count of each request and the cost at the session's prices."""

from __future__ import annotations

from activities.tokens import count_message_tokens
from tests.condense.conftest import MODEL
from tests.condense.test_condense_activity import make_input, run, sample
from workflows.context import ModelPrice
from workflows.contract.condense import CondensationOutcome


async def test_usage_sums_the_calls_of_a_retried_condensation(runtime, condenser, database_url, seeded):
    condenser.script("invalid_json", "valid")
    before = sample("lanes_model_tokens_total", purpose="condenser", model=MODEL, type="prompt")
    price = ModelPrice(input=1_000_000.0, output=2_000_000.0)  # 1 and 2 units a token
    inp = make_input(seeded).model_copy(update={"prices": {MODEL: price}})
    result = await run(runtime, seeded, inp)
    assert isinstance(result, CondensationOutcome) and result.status == "succeeded"
    usage = result.usage
    assert usage is not None
    assert (usage.calls, usage.prompt, usage.completion, usage.cached) == (2, 2, 2, 0)  # the server reports 1 and 1
    ours = [sum(count_message_tokens(m, MODEL) for m in body["messages"]) for body in condenser.requests]
    assert usage.estimate == sum(ours) and usage.reported
    assert usage.cost == 2 * 1 + 2 * 2
    assert sample("lanes_model_tokens_total", purpose="condenser", model=MODEL, type="prompt") == before + 2


async def test_no_call_no_usage(runtime, condenser, database_url, seeded):
    result = await run(runtime, seeded, make_input(seeded).model_copy(update={"condenser_window": 500}))
    assert isinstance(result, CondensationOutcome) and result.status == "oversized" and result.usage is None
