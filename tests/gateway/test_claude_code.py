"""Claude Code (the npm package @anthropic-ai/claude-code), unchanged, run non-interactively
with ANTHROPIC_BASE_URL pointing at the gateway: a multi-step task with its own tools (Write,
then Bash), every upstream request bounded, tool calls paired, the work done on disk."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]


def claude_binary() -> str:
    """Claude Code's command (the test is skipped without it)."""
    installed = os.environ.get("LANES_CLAUDE_CODE") or shutil.which("claude")
    local = REPO / ".tools" / "node_modules" / ".bin" / "claude"
    found = installed or (str(local) if local.exists() else None)
    if found is None:
        pytest.skip("Claude Code is not installed (make test-tools installs it with npm)")
    return found


def claude_env(gateway: str, home: Path) -> dict[str, str]:
    """Claude Code pointed at the gateway by base URL, with a Lanes token as its key; its small
    model (titles, summaries) a name the scripted upstream does not script; nothing else called."""
    return {**os.environ, "ANTHROPIC_BASE_URL": f"{gateway}/gateway/anthropic", "ANTHROPIC_API_KEY": TOKEN,
            "ANTHROPIC_SMALL_FAST_MODEL": f"cc-small-{uuid.uuid4().hex[:8]}", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "HOME": str(home), "CI": "1"}


def test_claude_code_does_a_multi_step_task_through_the_gateway(gateway: str, upstream: ScriptedUpstream,
                                                                tmp_path: Path):
    binary = claude_binary()
    name = f"cc-{uuid.uuid4().hex[:8]}"
    work = tmp_path / "work"
    work.mkdir()
    target = work / "hello.txt"
    upstream.script(name,
                    Scripted(text="I will write the file.", calls=[("toolu_w", "Write", {
                        "file_path": str(target), "content": "hello from the gateway\n"})]),
                    Scripted(calls=[("toolu_b", "Bash", {"command": f"cat {target}", "description": "Show the file"})]),
                    Scripted(text="Done: hello.txt says hello from the gateway."))
    env = claude_env(gateway, tmp_path)
    done = subprocess.run(
        [binary, "-p", "Write hello.txt, then show it.", "--model", name, "--output-format", "json",
         "--allowedTools", "Write", "Bash", "--max-turns", "6"],
        cwd=work, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-2000:], upstream.requests[-3:])
    result = json.loads(done.stdout)
    assert "hello from the gateway" in result["result"]
    assert target.read_text() == "hello from the gateway\n"
    sent = upstream.of(name)
    assert len(sent) == 3
    for body in sent:  # every tool_use the upstream saw is answered in the next message, none unasked
        messages = body["messages"]
        for n, message in enumerate(messages):
            uses = {b["id"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
            if uses:
                answered = {b.get("tool_use_id") for b in messages[n + 1]["content"] if isinstance(b, dict)}
                assert uses <= answered, (n, uses, answered)
    sessions = httpx.get(f"{gateway}/v1/sessions", params={"limit": 20},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"]
    held = [stored(gateway, s["session_id"]) for s in sessions if s["config"].get("model") == name]
    assert len(held) == 1  # the task's calls continued one session
    calls = [c["name"] for item in held[0] if item["kind"] == "assistant" for c in item["tool_calls"]]
    results = [item["tool_call_id"] for item in held[0] if item["kind"] == "tool_result"]
    assert calls == ["Write", "Bash"] and results == ["toolu_w", "toolu_b"]
    assert held[0][-1]["text"] == "Done: hello.txt says hello from the gateway."
    last = sent[-1]["messages"][-1]["content"]
    assert any(b.get("type") == "tool_result" and b.get("tool_use_id") == "toolu_b"
               and "hello from the gateway" in json.dumps(b.get("content")) for b in last)


def test_claude_code_reads_a_picture_through_the_gateway(gateway: str, upstream: ScriptedUpstream, tmp_path: Path):
    """Its Read tool on an image answers with the picture inside the tool_result: the gateway
    stores it and sends it upstream with the result."""
    binary = claude_binary()
    from PIL import Image

    name = f"cc-{uuid.uuid4().hex[:8]}"
    work = tmp_path / "work"
    work.mkdir()
    picture = work / "shot.png"
    Image.new("RGB", (300, 200), (220, 20, 20)).save(picture)
    upstream.script(name, Scripted(calls=[("toolu_r", "Read", {"file_path": str(picture)})]),
                    Scripted(text="It is a red rectangle."))
    env = claude_env(gateway, tmp_path)
    done = subprocess.run([binary, "-p", "What is in shot.png?", "--model", name, "--output-format", "json",
                           "--allowedTools", "Read", "--max-turns", "4"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-2000:], upstream.requests[-3:])
    assert "red rectangle" in json.loads(done.stdout)["result"]
    sent = upstream.of(name)
    assert len(sent) == 2
    result = next(b for b in sent[1]["messages"][-1]["content"] if b.get("type") == "tool_result")
    images = [b for b in result["content"] if b.get("type") == "image"]
    assert result["tool_use_id"] == "toolu_r" and len(images) == 1
    assert images[0]["source"]["type"] == "base64" and images[0]["source"]["media_type"].startswith("image/")
    assert Image.open(io.BytesIO(base64.b64decode(images[0]["source"]["data"]))).size == (300, 200)
