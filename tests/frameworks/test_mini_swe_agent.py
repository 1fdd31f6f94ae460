"""mini-swe-agent on a Lanes session, end to end: its real ``DefaultAgent`` and
``LocalEnvironment`` (real commands in a temporary directory) and its real ``LitellmModel``
(litellm -> openai client -> HTTP) against a scripted local Chat Completions server, through
``LanesModel``, the HTTP API, the worker, Temporal and PostgreSQL.

The agent reads a pile of logs far larger than the session's budget: every request the model
received stays inside the budget, the task completes with the right answer, and the raw
history holds each of the agent's messages exactly once, also when the whole list is sent again.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

import pytest
import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from activities.tokens import count_message_tokens, count_tool_definitions
from lanes_client import LanesClient
from lanes_client.integrations.mini_swe_agent import LanesModel
from tests.frameworks.scripted_chat import ScriptedChat, bash_call

BUDGET = 8_000
LOGS = 14
LOG_CHARS = 8_000  # about 2,500 tokens each: the logs alone are several budgets


def _write_logs(root: Path) -> int:
    """Deterministic service logs; returns how many ERROR lines they hold."""
    errors = 0
    for n in range(LOGS):
        rng, lines, size = random.Random(n), [], 0
        while size < LOG_CHARS:
            level = rng.choice(["INFO", "INFO", "INFO", "WARN", "ERROR"])
            errors += level == "ERROR"
            line = (f"2024-05-{n + 1:02d} 12:{rng.randrange(60):02d}:{rng.randrange(60):02d} {level} worker-"
                    f"{rng.randrange(8)} request {rng.randrange(10**6)} /api/items/{rng.randrange(10**4)} "
                    f"{rng.randrange(900)}ms")
            lines.append(line)
            size += len(line) + 1
        (root / f"service-{n:02d}.log").write_text("\n".join(lines) + "\n")
    return errors


def _script() -> list[dict]:
    """The model's answers, in order: look, read every log (two calls in one answer at times),
    one answer without a tool call (a format error the agent reports back), count, submit."""
    script: list[dict] = [{"content": "Let me see the files.", "tool_calls": [bash_call("call-ls", "ls -la")]}]
    for n in range(LOGS):
        calls = [bash_call(f"call-cat-{n}", f"cat service-{n:02d}.log")]
        if n % 4 == 1:
            calls.append(bash_call(f"call-wc-{n}", f"wc -l service-{n:02d}.log"))
        script.append({"content": f"Reading log {n}.", "tool_calls": calls})
        if n == 6:
            script.append({"content": "I have read half of them."})  # no tool call: a format error
    script += [
        {"content": "Counting.", "tool_calls": [bash_call("call-count", "cat *.log | grep -c ERROR > answer.txt")]},
        {"content": "Checking.", "tool_calls": [bash_call("call-check", "cat answer.txt")]},
        {"content": "Done.", "tool_calls": [bash_call("call-submit",
                                                      "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat answer.txt")]},
    ]
    return script


@pytest.fixture
def chat():
    server = ScriptedChat(_script())
    yield server
    server.stop()


def _agent_config() -> tuple[dict, dict]:
    """mini-swe-agent's own ``mini`` config: its prompts and its observation template."""
    config = yaml.safe_load((package_dir / "config" / "mini.yaml").read_text())
    return config["agent"], config["model"]


def _tokens(body: dict, model: str) -> int:
    """What the model was sent, counted as Lanes counts a request (messages + tool definitions)."""
    return sum(count_message_tokens(m, model) for m in body["messages"]) + count_tool_definitions(body["tools"], model)


async def test_mini_swe_agent_completes_a_long_task_inside_the_budget(api_stack, chat, temporal_client, tmp_path):
    expected = _write_logs(tmp_path)
    agent_config, model_config = _agent_config()
    registry = tmp_path.parent / "model_registry.json"  # a price for the local model: cost tracking works
    registry.write_text(json.dumps({"openai/scripted": {
        "litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}))
    inner = LitellmModel(model_name="openai/scripted", litellm_model_registry=str(registry),
                         observation_template=model_config["observation_template"],
                         format_error_template=model_config["format_error_template"],
                         model_kwargs={"api_base": chat.base_url, "api_key": "not-needed", "drop_params": True})
    lanes = LanesClient(api_stack.base_url, api_stack.token_a, timeout=120)
    model = LanesModel(inner, lanes, budget_tokens=BUDGET, context_window=32_000, updates_per_run=10)
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path), timeout=30), **agent_config)

    started = time.monotonic()
    result = await asyncio.to_thread(agent.run, "Count the ERROR lines of all the logs in the current directory.")
    await asyncio.to_thread(model.store, agent.messages)  # the last answer, which no model saw
    elapsed = time.monotonic() - started

    # the task ran for real and completed with the right answer
    assert result["exit_status"] == "Submitted", result
    assert result["submission"].strip() == str(expected) == (tmp_path / "answer.txt").read_text().strip()
    assert len(chat.requests) == len(chat.script) == model.n_steps == agent.n_calls
    # the inner model's answers reach the agent unchanged, cost included
    costs = [m["extra"]["cost"] for m in agent.messages if "cost" in m.get("extra", {})]
    assert len(costs) >= len(chat.script) - 1 and agent.cost == pytest.approx(sum(costs)) and agent.cost > 0
    sid = model.session_id
    assert sid is not None and model.session_ids == [sid]

    # every request the model received fit the budget, though the agent's history is many budgets
    request_model = model.last_request.model
    sent = [_tokens(body, request_model) for body in chat.requests]
    assert max(sent) <= BUDGET, sent
    history = _tokens({"messages": [{k: v for k, v in m.items() if k != "extra"} for m in agent.messages[:-1]],
                       "tools": chat.requests[-1]["tools"]}, request_model)
    assert history > 4 * BUDGET
    assert all(body["tools"] == model.tools for body in chat.requests)  # the agent's bash tool, nothing of ours
    assert all(body["messages"][0] == {"role": "system", "content": agent.messages[0]["content"]}
               for body in chat.requests)
    assert chat.requests[-1]["messages"] == model.last_request.messages  # Lanes' request, as litellm sent it

    # the provider's counts of every answer went with the next step, the last one's with store()
    usage = lanes.status(sid).usage
    reported_calls = chat.usages
    assert usage.calls == len(reported_calls) == model.n_steps
    assert usage.prompt == sum(u["prompt_tokens"] for u in reported_calls)
    assert usage.cached == sum(u["prompt_tokens_details"]["cached_tokens"] for u in reported_calls)
    assert usage.completion == sum(u["completion_tokens"] for u in reported_calls)

    # compaction happened; the session continued as new on the way without the agent noticing
    report = lanes.context(sid)
    assert report.compactions > 0 and report.count_by_kind.get("checkpoint") == 1
    runs = [r async for r in temporal_client.list_workflows(f'WorkflowId = "{sid}"')]
    assert len(runs) >= 2

    # the raw history holds each message of the agent once, in order, under its position
    sent_messages = [(n, m) for n, m in enumerate(agent.messages) if m["role"] != "exit"]
    raw = list(lanes.iter_items(sid))
    assert len(report.items) < len(raw) / 2  # the working set keeps a fraction of the history
    assert [i.client_id for i in raw] == [f"msa-{n}" for n, _ in sent_messages]
    assert [(i.role, i.text) for i in raw] == [(m["role"], m["content"] or "") for _, m in sent_messages]
    assert [i.tool_call_id for i in raw] == [m.get("tool_call_id") for _, m in sent_messages]
    assert sum(len(i.tool_calls) for i in raw) == sum(len(m.get("tool_calls") or ()) for _, m in sent_messages)
    assert sum(m["role"] == "user" and "Tool call error" in m["content"] for _, m in sent_messages) == 1

    # the whole list again, from this wrapper or a new one on the session (a resumed process):
    # nothing is stored twice, and the request is the same
    before = [(i.item_id, i.client_id) for i in raw]
    again = await asyncio.to_thread(model.prepare, agent.messages)
    resumed = LanesModel(inner, lanes, session_id=sid)
    from_scratch = await asyncio.to_thread(resumed.prepare, agent.messages)
    assert [(i.item_id, i.client_id) for i in lanes.iter_items(sid)] == before
    assert again.messages == from_scratch.messages
    assert from_scratch.token_estimate <= BUDGET

    trajectory = agent.serialize()
    assert trajectory["info"]["lanes"]["session_id"] == sid
    assert trajectory["info"]["config"]["model_type"].endswith("LitellmModel")
    print(f"\nmini-swe-agent on Lanes: {model.n_steps} steps, {len(raw)} items, history {history} tokens, "
          f"largest request {max(sent)} tokens (budget {BUDGET}), {len(runs)} workflow runs, {elapsed:.1f}s")
    lanes.close()
