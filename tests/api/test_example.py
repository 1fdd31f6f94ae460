"""examples/external_agent.py drives a real session: a scripted OpenAI-compatible model asks
for tools, the example runs them in a work directory and its loop goes through the API."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import openai

from tests.integration.scripted_model import ScriptedModel, tool_call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "external_agent.py"


def load_example():
    spec = importlib.util.spec_from_file_location("external_agent_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_example_agent_loop_runs_through_the_api(client_a, tmp_path):
    example = load_example()
    script = [
        {"content": None, "tool_calls": [tool_call("c1", "write_file", path="notes/plan.txt", content="step 1")]},
        {"content": "Checking.", "tool_calls": [tool_call("c2", "bash", command="cat notes/plan.txt; seq 1 5000")]},
        {"content": None, "tool_calls": [tool_call("c3", "read_file", path="../outside.txt")]},
        {"content": "Done: the plan is written."},
    ]
    model_server = ScriptedModel(script)
    model = openai.AsyncOpenAI(base_url=model_server.base_url, api_key="unused", max_retries=0)
    try:
        sid, answer = await example.run_agent("write the plan", client_a, model, model_name="scripted",
                                              workdir=tmp_path)
    finally:
        await model.close()
        model_server.stop()
    assert answer == "Done: the plan is written."
    assert (tmp_path / "notes" / "plan.txt").read_text() == "step 1"
    report = await client_a.context(sid)
    kinds = [i.kind for i in sorted(report.items, key=lambda i: i.seq)]
    assert kinds == ["system", "user"] + ["assistant", "tool_result"] * 3 + ["assistant"]
    # the model got the example's own prompt and tools, and nothing of Lanes' own
    assert [t["function"]["name"] for t in model_server.requests[0]["tools"]] == [
        t["function"]["name"] for t in example.TOOLS]
    assert model_server.requests[0]["messages"][0] == {"role": "system", "content": example.SYSTEM_PROMPT}
    # the model saw each tool result in the next request, and the large one is recallable exactly
    last_request = model_server.requests[-1]["messages"]
    tool_messages = [m for m in last_request if m["role"] == "tool"]
    assert tool_messages[0]["content"].startswith("wrote 6 characters")
    assert "outside the workspace" in tool_messages[2]["content"]
    bash_result = next(i for i in report.items if i.kind == "tool_result" and i.size_chars > 20_000)
    piece = await client_a.read_observation(sid, bash_result.observation_id, offset=0, limit=12)
    assert piece.text == "step 11\n2\n3\n"
