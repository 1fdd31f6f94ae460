"""LiteLLM's own proxy (the PyPI package ``litellm[proxy]``), unchanged, with the gateway as the
``api_base`` of one of its models: a team that already routes its agents through LiteLLM adds
Lanes in its config. An agent speaking to the proxy runs a tool loop (streamed and not); the
answers come back through both, every upstream request fits the budget, and one session holds
the conversation exactly."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from activities.tokens import count_message_tokens
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import TOOLS, stored
from tests.gateway.test_gateway_crash import ready
from tests.gateway.upstream import Scripted, ScriptedUpstream
from worker.local.stack import free_port

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
BUDGET = 2_000
MASTER_KEY = "sk-proxy-master"


def litellm_binary() -> str | None:
    local = REPO / ".tools" / "litellm" / "bin" / "litellm"
    return os.environ.get("LANES_LITELLM") or (str(local) if local.exists() else shutil.which("litellm"))


@pytest.fixture
def proxy(gateway: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the proxy's base URL, the upstream model its ``lanes-agent`` names)."""
    binary = litellm_binary()
    if binary is None:
        pytest.skip("LiteLLM's proxy is not installed (make test-tools installs litellm[proxy] in .tools/litellm)")
    name = f"proxied-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "litellm.yaml"
    config.write_text(f"""model_list:
  - model_name: lanes-agent
    litellm_params:
      model: openai/{name}
      api_base: {gateway}/gateway/openai/v1
      api_key: {TOKEN}
      extra_headers:
        X-Lanes-Budget-Tokens: "{BUDGET}"
general_settings:
  master_key: {MASTER_KEY}
""")
    port = free_port()
    # offline and on its own: no model price map fetched, no telemetry, no database of its own
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", HOME=str(tmp_path))
    log = tmp_path / "litellm.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        ready(base, proc, "/health/liveliness", 120, lambda: log.read_text()[-3000:])
        yield base, name
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("stream", [False, True])
def test_litellm_proxy_forwards_an_agent_through_the_gateway(proxy: tuple[str, str], gateway: str,
                                                             upstream: ScriptedUpstream, stream: bool):
    base, name = proxy
    upstream.script(name, Scripted(calls=[("call_1", "read_file", {"path": "notes.txt"})]),
                    Scripted(text="The notes say to ship on Friday."))
    client = openai.OpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0)
    task = f"What do the notes say? ({uuid.uuid4().hex[:6]})"
    messages: list[Any] = [{"role": "system", "content": "You read files for the user."},
                           {"role": "user", "content": task}]

    def ask() -> tuple[str, list[Any]]:
        if not stream:
            message = client.chat.completions.create(model="lanes-agent", messages=messages, tools=TOOLS
                                                     ).choices[0].message
            return message.content or "", list(message.tool_calls or [])
        text, calls = "", dict[int, dict[str, str]]()
        for chunk in client.chat.completions.create(model="lanes-agent", messages=messages, tools=TOOLS,
                                                    stream=True):
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] = call.id or entry["id"]
                    entry["name"] = (call.function.name if call.function else None) or entry["name"]
                    entry["arguments"] += (call.function.arguments if call.function else None) or ""
        return text, [openai.types.chat.ChatCompletionMessageToolCall(
            id=c["id"], type="function", function={"name": c["name"], "arguments": c["arguments"]})
            for c in calls.values()]

    text, calls = ask()
    assert [(c.id, c.function.name) for c in calls] == [("call_1", "read_file")]
    messages += [{"role": "assistant", "content": text or None,
                  "tool_calls": [c.model_dump() for c in calls]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "Ship on Friday. " * 300}]
    text, calls = ask()
    assert text == "The notes say to ship on Friday." and not calls

    sent = upstream.of(name)
    assert len(sent) == 2
    for body in sent:  # the budget the proxy's config asked for, on every upstream request
        assert sum(count_message_tokens(m, "gpt-4o-mini") for m in body["messages"]) <= BUDGET
    sessions = httpx.get(f"{gateway}/v1/sessions", params={"limit": 100},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()["sessions"]
    held = [s["session_id"] for s in sessions if s["config"].get("model") == name]
    assert len(held) == 1, held
    items = stored(gateway, held[0])
    assert [i["kind"] for i in items] == ["system", "user", "assistant", "tool_result", "assistant"]
    assert items[1]["text"] == task and items[3]["text"] == messages[3]["content"]
    assert items[-1]["text"] == "The notes say to ship on Friday."
