"""The README's client example, run as written (in its own process, as a user pastes it)
against the test API, with the token found the way the README says: the token file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def example(heading: str) -> str:
    """The first python block under the README's ``heading`` (a ``## `` or ``### `` line)."""
    section = README.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    assert blocks, f"the README's {heading!r} section has no python example"
    return blocks[0]


def test_the_readmes_client_example_runs_as_written(api_stack, tmp_path: Path):
    (tmp_path / "api-token").write_text(api_stack.token_a + "\n")  # where the local API writes it
    env = {k: v for k, v in os.environ.items() if k not in ("LANES_API_TOKEN", "LANES_API_URL")}
    env.update(LANES_DATA_DIR=str(tmp_path), LANES_API_URL=api_stack.base_url)
    done = subprocess.run([sys.executable, "-c", example("## Client")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "messages to send: 1"  # the task (no system prompt was given)
    assert "0 user" in lines  # the raw history, as iter_items pages it
    # its events, then the stream ends
    assert lines[2:] == ["context.recovery.completed", "task.started", "item.added", "context.request"], lines


def test_the_readmes_agents_sdk_example_runs_as_written(api_stack, tmp_path: Path):
    pytest.importorskip("agents")
    from agents.models import get_default_model

    from tests.gateway.upstream import Scripted, ScriptedUpstream

    model = ScriptedUpstream()  # the SDK's own model calls (Responses API), scripted
    try:
        model.script(get_default_model(), Scripted(text="the README's agent answered"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANES_", "OPENAI_"))}
        env.update(LANES_API_URL=api_stack.base_url, LANES_API_TOKEN=api_stack.token_a,
                   OPENAI_BASE_URL=f"{model.root}/v1", OPENAI_API_KEY="sk-test", OPENAI_AGENTS_DISABLE_TRACING="1")
        done = subprocess.run([sys.executable, "-c", example("### OpenAI Agents SDK")], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == "the README's agent answered"
        sent = model.of(get_default_model())
        assert len(sent) == 1 and "task" in json.dumps(sent[0]["input"])  # the compacted request, with the task
    finally:
        model.stop()


def test_the_readmes_mini_swe_agent_example_runs_as_written(api_stack, tmp_path: Path):
    """mini-swe-agent's real DefaultAgent, LocalEnvironment and LitellmModel (OpenAI base URL
    from the environment, as a user sets it) fix a failing test in the working directory
    against a scripted model; the agent's messages end up in a Lanes session."""
    pytest.importorskip("minisweagent")
    from tests.frameworks.scripted_chat import ScriptedChat, bash_call

    work = tmp_path / "repo"
    work.mkdir()
    (work / "test_add.py").write_text("def add(a, b):\n    return a - b\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    chat = ScriptedChat([
        {"content": "The sign is wrong.", "tool_calls": [bash_call("call-fix", "sed -i 's/a - b/a + b/' test_add.py")]},
        {"content": "Fixed.", "tool_calls": [bash_call("call-done", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]},
    ])
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANES_", "OPENAI_", "MSWEA_"))}
        env.update(LANES_API_URL=api_stack.base_url, LANES_API_TOKEN=api_stack.token_a,
                   OPENAI_BASE_URL=chat.base_url, OPENAI_API_KEY="sk-test", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   MSWEA_SILENT_STARTUP="1", MSWEA_GLOBAL_CONFIG_DIR=str(tmp_path / "mswea"))
        done = subprocess.run([sys.executable, "-c", example("### mini-swe-agent")], env=env, capture_output=True,
                              text=True, timeout=180, cwd=work)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "return a + b" in (work / "test_add.py").read_text()  # the agent's command ran, in its directory
        assert len(chat.requests) == 2 and all(r["model"] == "gpt-4.1" for r in chat.requests)
        assert "Fix the failing test" in json.dumps(chat.requests[0]["messages"])
    finally:
        chat.stop()
    # the agent's whole conversation is in one external session of the README's budget
    import httpx

    headers = {"Authorization": f"Bearer {api_stack.token_a}"}
    sessions = httpx.get(f"{api_stack.base_url}/v1/sessions", headers=headers, timeout=30).json()
    mine = [s for s in sessions["sessions"] if s["config"].get("model") == "openai/gpt-4.1"]
    assert len(mine) == 1 and mine[0]["mode"] == "external", sessions
    items = httpx.get(f"{api_stack.base_url}/v1/sessions/{mine[0]['session_id']}/items", headers=headers,
                      timeout=30).json()["items"]
    texts = json.dumps(items)
    assert "Fix the failing test" in texts and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in texts


def test_the_readmes_pydantic_ai_example_runs_as_written(api_stack, tmp_path: Path):
    pytest.importorskip("pydantic_ai")
    from tests.gateway.upstream import Scripted, ScriptedUpstream

    model = ScriptedUpstream()  # "openai:gpt-4.1" is pydantic-ai's Responses model: scripted
    try:
        model.script("gpt-4.1", Scripted(text="the README's pydantic-ai agent answered"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANES_", "OPENAI_"))}
        env.update(LANES_API_URL=api_stack.base_url, LANES_API_TOKEN=api_stack.token_a,
                   OPENAI_BASE_URL=f"{model.root}/v1", OPENAI_API_KEY="sk-test")
        done = subprocess.run([sys.executable, "-c", example("### pydantic-ai")], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == "the README's pydantic-ai agent answered"
        sent = json.dumps(model.of("gpt-4.1"))
        assert sent.count("You fix bugs.") == 1 and "Fix the failing test" in sent  # the instructions once
    finally:
        model.stop()
