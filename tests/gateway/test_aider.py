"""aider (the PyPI package aider-chat), unchanged, pointed at the gateway with nothing but its
``--openai-api-base`` and a Lanes token as the key: its first edit does not apply, aider sends
the failure back (a reflection: the same conversation, one exchange longer), the second edit
applies; the file on disk is edited, every upstream request fits the budget, and the session
holds the conversation exactly once. Streaming (aider's default) and not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from activities.tokens import count_message_tokens
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
BUDGET = 6_000


def aider_binary() -> str | None:
    local = REPO / ".tools" / "aider" / "bin" / "aider"
    return os.environ.get("LANES_AIDER") or (str(local) if local.exists() else shutil.which("aider"))


def edit(search: str, replace: str) -> str:
    return f"greet.py\n```python\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"


@pytest.mark.parametrize("stream", [True, False])
def test_aider_edits_a_file_through_the_gateway(gateway: str, upstream: ScriptedUpstream, tmp_path: Path,
                                                stream: bool):
    binary = aider_binary()
    if binary is None:
        pytest.skip("aider is not installed (make test-tools installs aider-chat in .tools/aider)")
    name = f"aider-{uuid.uuid4().hex[:8]}"
    work = tmp_path / "work"
    work.mkdir()
    source = work / "greet.py"
    source.write_text('def greet():\n    print("hello")\n')
    upstream.script(name,
                    Scripted(text="I will change the greeting.\n\n" + edit('    print("helo")', '    print("hi")')),
                    Scripted(text="Fixed the search.\n\n" + edit('    print("hello")',
                                                                  '    print("hello from the gateway")')))
    settings = tmp_path / "models.yml"  # how a user gives aider a header for the session's budget
    settings.write_text(f"- name: openai/{name}\n  edit_format: diff\n  extra_params:\n    extra_headers:\n"
                        f"      X-Lanes-Budget-Tokens: '{BUDGET}'\n")
    metadata = tmp_path / "models.json"  # what aider knows of the model: a window, prices
    metadata.write_text(json.dumps({f"openai/{name}": {"max_input_tokens": 128_000, "max_output_tokens": 4_096,
                                                       "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                                                       "litellm_provider": "openai", "mode": "chat"}}))
    env = {**os.environ, "HOME": str(tmp_path), "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS": "false"}
    done = subprocess.run(
        [binary, "--model", f"openai/{name}", "--openai-api-base", f"{gateway}/gateway/openai/v1",
         "--openai-api-key", TOKEN, "--model-settings-file", str(settings),
         "--model-metadata-file", str(metadata), "--no-git", "--yes-always",
         "--no-show-model-warnings", "--no-check-update", "--no-analytics", "--no-pretty", "--map-tokens", "0",
         "--stream" if stream else "--no-stream", "--message", "Make greet print 'hello from the gateway'.",
         "greet.py"],
        cwd=work, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-2000:])
    assert source.read_text() == 'def greet():\n    print("hello from the gateway")\n', done.stdout[-2000:]
    sent = upstream.of(name)
    assert len(sent) == 2, [b["messages"][-1] for b in sent]
    for body in sent:
        assert sum(count_message_tokens(m, "gpt-4o-mini") for m in body["messages"]) <= BUDGET
    # the second call carries the first answer and aider's reflection on it (aider moves the
    # files' messages after the conversation: not a continuation of the first call's order)
    second = sent[1]["messages"]
    assert "failed to match" in second[-1]["content"]
    assert any(m["role"] == "assistant" and 'print("helo")' in m["content"] for m in second)
    sessions = httpx.get(f"{gateway}/v1/sessions", params={"limit": 50},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"]
    held = [stored(gateway, s["session_id"]) for s in sessions if s["config"].get("model") == name]
    # the reordered conversation diverges from the first call's after aider's examples: it goes
    # on as a branch (a session of its own holding it whole); nothing stored is rewritten
    assert len(held) == 2, [s["config"].get("model") for s in sessions]
    first, branch = sorted(held, key=len)
    assert [i["text"] for i in first if i["kind"] == "assistant"][-1].startswith("I will change the greeting.")
    texts = [i["text"] for i in branch]
    assert sum("Fixed the search." in t for t in texts) == 1 and sum("failed to match" in t for t in texts) == 1
    assert any('print("helo")' in t for t in texts)  # the first answer, in the branch's history
    assert any("greet.py" in t and 'print("hello")' in t for t in texts)  # the file aider sent, stored
