"""The model activity: the planned request, the model's answer, stored.

Any OpenAI-compatible chat-completions endpoint works. Provider SDK retries are off:
Temporal's retry policy is the only one, and errors are mapped (``activities.provider``) so
that it retries what can succeed later (timeouts, 408/409/429, 5xx, garbage) and nothing else.
The call reads as its four steps: the request (``activities.requests``), an answer an earlier
attempt stored, the provider call, storing the answer (``activities.answers``).
"""

from __future__ import annotations

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import metrics
from activities.answers import answered_before, store_answer
from activities.heartbeat import heartbeating
from activities.provider import ModelClients, complete, map_provider_error
from activities.replay import follow_ups
from activities.requests import Request, model_request
from activities.runtime import ActivityGroup, ActivitySettings, StoreSource
from workflows.context import price_for
from workflows.contract.failures import MODEL_ANSWER_INVALID
from workflows.contract.model import ModelCallInput, ModelCallResult


class ModelActivities(ActivityGroup):
    """Calls of the agent's model, with the worker's endpoint or a replay's."""

    def __init__(self, settings: ActivitySettings, stores: StoreSource, clients: ModelClients) -> None:
        super().__init__(settings, stores)
        self.clients = clients

    @activity.defn
    async def call_model(self, inp: ModelCallInput) -> ModelCallResult:
        # The first beat after one interval: most calls are over before it (a beat is a server
        # round trip and a history write); the heartbeat timeout runs from the start regardless.
        async with heartbeating(at_start=False):
            result = await self._call(inp)
        if inp.replay is not None:
            result.follow_ups = follow_ups(inp.replay.trajectory_path, inp.replay_turn)
        return result

    async def _call(self, inp: ModelCallInput) -> ModelCallResult:
        store = await self.store()
        request = await model_request(store, inp)
        # Only a retry can find the answer stored: an earlier attempt stored it, then its result
        # was lost. (A first attempt that finds the row stored anyway, e.g. after a reset of the
        # workflow, keeps the stored answer: the first write wins.)
        if activity.info().attempt > 1 and (done := await answered_before(store, inp, request.total_tokens)):
            return done
        response = await self._complete(inp, request)
        price = inp.price or price_for(self.settings.prices, inp.model)
        return await store_answer(store, inp, response, request.total_tokens, price)

    async def _complete(self, inp: ModelCallInput, request: Request):
        timeout = self.settings.model_timeout_seconds
        if inp.replay is not None:
            client = self.clients.client(inp.replay.model_base_url, "replay", timeout)
            headers = {"X-Lanes-Trajectory": inp.replay.trajectory_id, "X-Lanes-Turn": str(inp.replay_turn)}
        else:
            key = self.settings.openai_api_key
            client = self.clients.client(self.settings.openai_base_url, key.get_secret_value() if key else "missing",
                                         timeout)
            headers = {}
        body = {"model": inp.model, "messages": request.messages, "tools": request.tools,
                "max_tokens": inp.max_output_tokens}
        try:
            with metrics.model_call_timer("agent"):
                return await complete(client, body, headers)
        except openai.APIError as error:
            raise map_provider_error(error) from None
        except ValueError as error:  # a body that is not JSON at all
            raise ApplicationError(f"model answered garbage: {error}", type=MODEL_ANSWER_INVALID) from None
