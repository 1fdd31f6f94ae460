"""pydantic-ai on a Lanes session, end to end: its real ``Agent`` with a function tool and its
real ``OpenAIChatModel`` (openai client -> HTTP) against a scripted local Chat Completions
server, through ``LanesCapability``, the HTTP API, the worker, Temporal and PostgreSQL.

The agent reads logs far larger than the budget: every request the model received stays
inside it, the instructions reach the model once (inside the bounded request), the session
holds the run's history exactly once with the provider's usage, and an archived output is
read back exactly through the capability's recall tool."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from activities.tokens import count_message_tokens, count_tool_definitions
from lanes_client import AsyncLanesClient
from lanes_client.integrations.pydantic_ai import LanesCapability
from tests.frameworks.scripted_chat import ScriptedChat

BUDGET = 4_000
LOGS = 8
INSTRUCTIONS = "You count ERROR lines in service logs. Read each log with read_log."
ADDRESS = re.compile(r"observation://obs-[\w.-]+")


def _log(n: int) -> str:
    rng = random.Random(n)
    return "\n".join(f"12:{rng.randrange(60):02d} {rng.choice(['INFO', 'WARN', 'ERROR'])} worker-{rng.randrange(8)} "
                     f"request {rng.randrange(10**6)} took {rng.randrange(900)}ms" for _ in range(120)) + "\n"


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _recall_what_the_request_archived(body: dict) -> dict:
    """The model reads back the first archived output its request shows."""
    found = ADDRESS.search(json.dumps(body["messages"]))
    assert found, "no archived output in the request"
    return {"content": "Checking an archived log.",
            "tool_calls": [_call("call-recall", "recall_observation", {"address": found.group(0)})]}


@pytest.fixture
def chat():
    script: list[Any] = [{"content": f"Reading log {n}.", "tool_calls": [_call(f"call-{n}", "read_log", {"n": n})]}
                         for n in range(LOGS)]
    server = ScriptedChat([*script, _recall_what_the_request_archived, {"content": "DONE"}])
    yield server
    server.stop()


def _tokens(body: dict) -> int:
    return (sum(count_message_tokens(m, "gpt-4o-mini") for m in body["messages"])
            + count_tool_definitions(body.get("tools") or [], "gpt-4o-mini"))


async def test_a_pydantic_ai_agent_runs_inside_the_budget_and_recalls_archived_output(api_stack, chat):
    async with AsyncLanesClient(api_stack.base_url, api_stack.token_a, timeout=120) as client:
        lanes = LanesCapability(client, budget_tokens=BUDGET, context_window=32_000)
        model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=chat.base_url, api_key="sk-test"))
        agent = Agent(model, instructions=INSTRUCTIONS, capabilities=[lanes])

        @agent.tool_plain
        def read_log(n: int) -> str:
            """The n-th service log."""
            return _log(n)

        result = await agent.run(f"How many ERROR lines do logs 0 to {LOGS - 1} hold?")
        sid = lanes.session_id
        assert sid is not None and result.output == "DONE"

        # every request fit the budget; the instructions went once, as the session's system prompt
        sent = [_tokens(body) for body in chat.requests]
        assert len(chat.requests) == LOGS + 2 and max(sent) <= BUDGET, sent
        assert sum(len(_log(n)) for n in range(LOGS)) // 4 > 2 * BUDGET  # the logs alone are budgets
        for body in chat.requests:
            assert json.dumps(body["messages"]).count(json.dumps(INSTRUCTIONS)[1:-1]) == 1
            assert body["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
        assert sorted(t["function"]["name"] for t in chat.requests[0]["tools"]) == ["read_log", "recall_observation"]

        # the recall read an archived log back exactly
        recalled = next(m["content"] for m in chat.requests[-1]["messages"]
                        if m.get("role") == "tool" and m.get("tool_call_id") == "call-recall")
        assert "observation://" not in recalled.split("\n", 1)[1]  # whole, not head and tail
        header, text = recalled.split("\n", 1)
        assert any(_log(n).startswith(text) for n in range(LOGS)) and len(text) > 500, recalled[:300]

        # the session holds the run's history once: the task, each call with its result, the answer
        items = [i async for i in client.iter_items(sid)]
        kinds = [i.kind for i in items]
        assert kinds[:2] == ["system", "user"] and kinds[-1] == "assistant"
        assert kinds.count("tool_result") == LOGS + 1 and kinds.count("assistant") == LOGS + 2
        assert [i.text for i in items if i.kind == "tool_result"][:LOGS] == [_log(n) for n in range(LOGS)]
        assert items[-1].text == "DONE" and items[0].text == INSTRUCTIONS
        usage = (await client.status(sid)).usage
        assert usage.calls == len(chat.usages) and usage.prompt == sum(u["prompt_tokens"] for u in chat.usages)
