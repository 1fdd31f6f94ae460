"""``LanesModel``'s session bookkeeping on the real stack: a step whose answer was lost is
taken again without storing anything twice, each run of the agent gets its own session, and
a given session refuses a message list that is not its own."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from lanes_client import Conflict, LanesClient, LanesTimeout
from lanes_client.integrations.mini_swe_agent import LanesModel
from tests.frameworks.scripted_chat import ScriptedChat, bash_call

AGENT = {"system_template": "You run commands.", "instance_template": "Task: {{task}}", "step_limit": 10}


class LoseTheFirstStepAnswer(httpx.HTTPTransport):
    """The first ``POST /steps`` reaches the API and takes effect; its answer is lost (a timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path.endswith("/steps") and not self.lost:
            self.lost += 1
            response.read()
            response.close()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def _exchange(n: int) -> list[dict]:
    """One assistant turn with a bash call and its result, as mini-swe-agent keeps them."""
    return [{"role": "assistant", "content": f"step {n}", "tool_calls": [bash_call(f"call-{n}", "ls")],
             "extra": {"actions": [{"command": "ls", "tool_call_id": f"call-{n}"}]}},
            {"role": "tool", "tool_call_id": f"call-{n}", "content": f"file{n}.py\n", "extra": {"returncode": 0}}]


def _inner(base_url: str = "http://127.0.0.1:9/v1") -> LitellmModel:
    return LitellmModel(model_name="openai/scripted", cost_tracking="ignore_errors",
                        model_kwargs={"api_base": base_url, "api_key": "not-needed"})


async def test_a_step_whose_answer_was_lost_is_taken_again_without_storing_twice(api_stack):
    transport = LoseTheFirstStepAnswer()
    lanes = LanesClient(api_stack.base_url, api_stack.token_a, max_retries=0, transport=transport)
    model = LanesModel(_inner(), lanes, budget_tokens=4_000)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You run commands."},
                                      {"role": "user", "content": "list the files"}]
    with pytest.raises(LanesTimeout):
        await asyncio.to_thread(model.prepare, messages)
    assert transport.lost == 1 and model.n_steps == 0
    first = await asyncio.to_thread(model.prepare, messages)  # the agent's retry: the same list
    assert [m["role"] for m in first.messages] == ["system", "user"]
    go_on = {"role": "user", "content": "Go on."}
    messages += [*_exchange(1), dict(go_on), *_exchange(2), dict(go_on)]  # equal messages at two positions
    await asyncio.to_thread(model.prepare, messages)
    raw = list(lanes.iter_items(model.session_id))
    assert [i.client_id for i in raw] == [f"msa-{n}" for n in range(len(messages))]
    assert [i.kind for i in raw] == ["system", "user", "assistant", "tool_result", "user", "assistant", "tool_result",
                                     "user"]
    assert raw[4].text == raw[7].text == "Go on." and raw[4].item_id != raw[7].item_id
    lanes.close()


async def test_each_run_of_the_agent_gets_its_own_session(api_stack, tmp_path):
    script = [{"content": "Looking.", "tool_calls": [bash_call(f"call-{run}", "echo hi")]} for run in (1, 2)]
    chat = ScriptedChat([script[0], {"content": "Done.", "tool_calls": [
        bash_call("call-end-1", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]},
        script[1], {"content": "Done.", "tool_calls": [
            bash_call("call-end-2", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]}])
    lanes = LanesClient(api_stack.base_url, api_stack.token_a)
    try:
        model = LanesModel(_inner(chat.base_url), lanes, budget_tokens=4_000)
        agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)), **AGENT)
        runs = []
        for task in ("first task", "second task"):
            assert (await asyncio.to_thread(agent.run, task))["exit_status"] == "Submitted"
            await asyncio.to_thread(model.store, agent.messages)
            runs.append(list(agent.messages))
        assert len(model.session_ids) == 2 and len(set(model.session_ids)) == 2
        for sid, task in zip(model.session_ids, ("first task", "second task"), strict=True):
            raw = list(lanes.iter_items(sid))
            assert [i.role for i in raw] == ["system", "user", "assistant", "tool", "assistant"]
            assert raw[1].text == f"Task: {task}"
        # a session given by id holds one list: its own is recognised, another is refused
        first = model.session_ids[0]
        given = LanesModel(_inner(chat.base_url), lanes, session_id=first)
        await asyncio.to_thread(given.prepare, runs[0])
        assert len(list(lanes.iter_items(first))) == 5
        with pytest.raises(ValueError, match="another message list"):
            await asyncio.to_thread(given.prepare, runs[1])
        with pytest.raises(Conflict) as refused:  # a new wrapper: the server tells the lists apart
            await asyncio.to_thread(LanesModel(_inner(chat.base_url), lanes, session_id=first).prepare, runs[1])
        assert refused.value.code == "item_id_conflict"
        assert len(list(lanes.iter_items(first))) == 5
    finally:
        lanes.close()
        chat.stop()
