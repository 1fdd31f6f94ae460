"""mini-swe-agent reads archived output back: its model runs ``recall_observation <address>``
(the command the session's placeholders name) and ``LanesModel`` answers it from the session,
storing the round there; the agent never sees the round, nor a command it cannot run."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import yaml
from fastapi import FastAPI, Request
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from lanes_client import LanesClient
from lanes_client.integrations.mini_swe_agent import LanesModel, recall_commands
from tests.frameworks.scripted_chat import bash_call
from tests.threaded_server import ThreadedServer

LOGS = 4


def _log(n: int) -> str:
    return "".join(f"log {n} line {k}: worker-{k % 7} handled request {k * 7919 % 100_003}\n" for k in range(160))


class RecallingChat:
    """Reads the logs, then recalls the first 300 characters of the first address its request
    shows, then submits."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict[str, Any]:
            body = await request.json()
            self.requests.append(body)
            n = len(self.requests)
            if n <= LOGS:
                message = {"content": f"Reading log {n}.", "tool_calls": [bash_call(f"cat-{n}", f"cat log-{n - 1}.txt")]}
            elif n == LOGS + 1:
                address = re.search(r"observation://obs-[\w.-]+", json.dumps(body["messages"]))
                assert address is not None, "the compacted request shows an address"
                message = {"content": "Reading it back.", "tool_calls": [
                    bash_call("recall-1", f"recall_observation {address.group(0)} 0 300")]}
            else:
                message = {"content": "Done.", "tool_calls": [
                    bash_call("submit", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo read")]}
            return {"id": f"r{n}", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "tool_calls"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

        self.http = ThreadedServer(app)


def test_recall_commands_are_recognised_as_written() -> None:
    def answer(*commands: str) -> dict:
        return {"extra": {"actions": [{"command": c} for c in commands]}}
    assert recall_commands(answer("recall_observation observation://obs-a-1 0 300")) == [("observation://obs-a-1", 0, 300)]
    assert recall_commands(answer('recall_observation("observation://obs-a-1", offset=5, limit=9)')) == [
        ("observation://obs-a-1", 5, 9)]
    assert recall_commands(answer("recall_observation observation://obs-a-1")) == [("observation://obs-a-1", None, None)]
    assert recall_commands(answer("recall_observation observation://obs-a-1", "ls")) is None  # the agent runs them
    assert recall_commands(answer("cat observation://obs-a-1")) is None and recall_commands(answer()) is None


async def test_a_compacted_mini_swe_agent_reads_archived_output_back(api_stack, tmp_path):
    for n in range(LOGS):
        (tmp_path / f"log-{n}.txt").write_text(_log(n))
    config = yaml.safe_load((package_dir / "config" / "mini.yaml").read_text())
    chat = RecallingChat()
    try:
        inner = LitellmModel(model_name="openai/scripted", cost_tracking="ignore_errors",
                             observation_template=config["model"]["observation_template"],
                             format_error_template=config["model"]["format_error_template"],
                             model_kwargs={"api_base": chat.http.base_url, "api_key": "not-needed"})
        lanes = LanesClient(api_stack.base_url, api_stack.token_a, timeout=120)
        model = LanesModel(inner, lanes, budget_tokens=3_000, context_window=32_000)
        agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path), timeout=30), **config["agent"])
        result = await asyncio.to_thread(agent.run, "Read the logs.")
        await asyncio.to_thread(model.store, agent.messages)  # the last answer, which no model saw
    finally:
        chat.http.stop()
    assert result["exit_status"] == "Submitted", result
    assert model.recall_rounds == 1 and len(chat.requests) == LOGS + 2
    # the model got the exact text back: the first 300 characters of one of the logs
    after = [m for m in chat.requests[-1]["messages"] if m["role"] == "tool" and m.get("tool_call_id") == "recall-1"]
    assert len(after) == 1
    shown = json.loads(after[0]["content"])["output"]  # mini's observation template writes JSON
    # exactly the first 300 characters of one read's stored result (the agent's own tool message)
    reads = [m["content"] for m in agent.messages if m["role"] == "tool" and m["tool_call_id"].startswith("cat-")]
    assert len(reads) == LOGS and all(_log(n).splitlines()[0] in reads[n] for n in range(LOGS))
    assert shown.startswith("[observation://obs-") and any(shown.endswith("\n" + text[:300]) for text in reads)
    # the agent never saw the round; the session holds it, between the reads and the submission
    assert not any("recall_observation" in json.dumps(m.get("tool_calls") or []) for m in agent.messages)
    items = list(lanes.iter_items(model.session_id))
    ids = [i.client_id for i in items]
    assert ids.index("msa-recall-1-0") < ids.index("msa-recall-1-1") < len(ids) - 1
    assert items[ids.index("msa-recall-1-1")].tool_call_id == "recall-1"
    lanes.close()
