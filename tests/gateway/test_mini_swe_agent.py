"""mini-swe-agent, unchanged (its DefaultAgent, LocalEnvironment and LitellmModel: litellm ->
openai -> HTTP), pointed at the gateway with nothing but ``api_base`` and a Lanes token: a
task over logs several times its budget completes, every upstream request fits the budget,
and the session holds the conversation exactly once."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from activities.tokens import count_message_tokens, count_tool_definitions
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

BUDGET = 6_000
LOGS = 8


def bash(call_id: str, command: str) -> tuple[str, str, dict]:
    return call_id, "bash", {"command": command}


async def test_mini_swe_agent_through_the_gateway(gateway: str, upstream: ScriptedUpstream, tmp_path: Path):
    name = f"mswea-{uuid.uuid4().hex[:8]}"
    for n in range(LOGS):  # ~2,000 tokens each: the logs alone are several budgets
        (tmp_path / f"app-{n}.log").write_text("".join(f"{n}:{i} {'ERROR' if i % 7 == 0 else 'INFO'} request done\n"
                                                       for i in range(400)))
    expected = sum(1 for n in range(LOGS) for i in range(400) if i % 7 == 0)
    upstream.script(name, Scripted(text="Looking.", calls=[bash("c-ls", "ls")]),
                    *[Scripted(text=f"Reading {n}.", calls=[bash(f"c-cat-{n}", f"cat app-{n}.log")]) for n in range(LOGS)],
                    Scripted(text="Counting.", calls=[bash("c-count", "cat *.log | grep -c ERROR > answer.txt")]),
                    Scripted(text="Done.", calls=[bash("c-submit", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT "
                                                                   "&& cat answer.txt")]))
    config = yaml.safe_load((package_dir / "config" / "mini.yaml").read_text())
    registry = tmp_path.parent / f"registry-{name}.json"
    registry.write_text(json.dumps({f"openai/{name}": {"litellm_provider": "openai", "mode": "chat",
                                                       "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}))
    model = LitellmModel(model_name=f"openai/{name}", litellm_model_registry=str(registry),
                         observation_template=config["model"]["observation_template"],
                         format_error_template=config["model"]["format_error_template"],
                         model_kwargs={"api_base": f"{gateway}/gateway/openai/v1", "api_key": TOKEN,
                                       "extra_headers": {"X-Lanes-Budget-Tokens": str(BUDGET)}})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path), timeout=30), **config["agent"])
    result = await asyncio.to_thread(agent.run, "Count the ERROR lines of all the logs here.")
    assert result["exit_status"] == "Submitted", result
    assert result["submission"].strip() == str(expected)
    sent = upstream.of(name)
    assert len(sent) == LOGS + 3
    for body in sent:
        tokens = sum(count_message_tokens(m, "gpt-4o-mini") for m in body["messages"]) + \
            count_tool_definitions(body.get("tools", []), "gpt-4o-mini")
        assert tokens <= BUDGET, tokens
    sessions = httpx.get(f"{gateway}/v1/sessions", params={"limit": 50},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"]
    held = [stored(gateway, s["session_id"]) for s in sessions if s["config"].get("model") == name]
    assert len(held) == 1
    kinds = [i["kind"] for i in held[0]]
    # every answer; every output the model saw (the submission's own output ends the run, unsent)
    assert kinds.count("assistant") == LOGS + 3 and kinds.count("tool_result") == LOGS + 2
    outputs = [i["text"] for i in held[0] if i["kind"] == "tool_result"]
    assert any(f"{LOGS - 1}:398 INFO request done" in text for text in outputs)  # the agent's output, stored
