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
