"""Continued requests (worker/api/gateway/continuation.py): a call whose new turns (tool
outputs, user messages) continue the plan made after the last answer goes upstream with no
workflow update first. What must hold: the upstream gets the requests it would get without
the fast path (exactly, unless a compaction comes due with an answer alone: see IDENTICAL),
the session stores exactly the same turns once each, the session never records a miss, and
the fast path is taken (the continued calls' Server-Timing has no ``step``).

A recorded Claude Code session drives it (its tool calls and outputs, parallel calls among
them), and a mini-swe-agent one (its outputs come back as user messages), each at a budget
small enough that it compacts along the way, through the official ``openai`` client: once
through an API process with the fast path (the ``gateway`` fixture), once through one with
``LANES_GATEWAY_CONTINUE=false``.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from activities.tokens import count_message_tokens
from recordings import DEFAULT_TRAJECTORY_ROOT
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import stored
from tests.gateway.test_gateway_crash import ready, start_api
from tests.gateway.upstream import Scripted, ScriptedUpstream
from tests.recordings import load_recording
from worker.api.gateway.timing import parse_header
from worker.local.stack import free_port
from worker.settings import Settings
from workflows.contract.lane_events import CONTINUATION_MISSED

ROOT = Path(DEFAULT_TRAJECTORY_ROOT)
RECORDINGS = {  # a tool-calling agent with parallel calls; a text-protocol one (outputs as user messages)
    "claude-code": ROOT / "claude-code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl.gz",
    "mini-swe-agent": ROOT / "mini-swe-agent-gemini" / "astropy__astropy-14309.traj.json.gz",
}
# Where a compaction comes due after an answer alone (the text-protocol agent's long answers at
# this budget), the session compacts when it stores the answer; without continued requests the
# answer is stored with the next call's turns and compacted then: another (as valid) schedule.
# The tool-calling agent's answers are short: the same requests, byte for byte.
IDENTICAL = {"claude-code": True, "mini-swe-agent": False}
TURNS = 40
AGENT_SECONDS = 0.1  # the agent's own time after each answer (a call at once carries the answer instead)
BUDGET = 5_000
TOOLS: list[Any] = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
                    for name in ("Bash", "Read", "Edit", "Write", "Glob", "Grep", "TodoWrite", "Task", "LS")]


def _script(upstream: ScriptedUpstream, model: str, turns: list[Any], tool_calls: bool) -> None:
    """The recorded answers; a text-protocol agent's actions stay in its text (no calls)."""
    upstream.script(model, *[Scripted(text=turn.assistant_text or "", calls=[
        (call.id or f"call-{n}-{k}", call.name, json.loads(call.arguments or "{}"))
        for k, call in enumerate(turn.tool_calls if tool_calls else ())]) for n, turn in enumerate(turns)])


def _play(base: str, model: str, system: str | None, task: str, turns: list[Any],
          conversation: str) -> tuple[str, list[dict[str, float]]]:
    """The recording as the agent sends it; the session and each call's Server-Timing."""
    client = openai.OpenAI(base_url=f"{base}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    messages: list[Any] = [*([{"role": "system", "content": system}] if system else []),
                           {"role": "user", "content": task}]
    timings, sessions = [], set()
    for turn in turns:
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=messages, tools=TOOLS,
            extra_headers={"X-Lanes-Budget-Tokens": str(BUDGET), "X-Lanes-Conversation": conversation})
        sessions.add(raw.headers["x-lanes-session"])
        timings.append(parse_header(raw.headers["server-timing"]))
        message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        ids = [c["id"] for c in message.get("tool_calls") or ()]
        for n, result in enumerate(turn.results):  # tool messages, or a text-protocol agent's user messages
            if result.render_role == "tool" and n < len(ids):
                messages.append({"role": "tool", "tool_call_id": ids[n], "content": result.output})
            else:
                messages.append({"role": "user", "content": result.output})
        messages += [{"role": "tool", "tool_call_id": call_id, "content": "(no output recorded)"}
                     for call_id in ids[len(turn.results):]]
        messages += [{"role": "user", "content": text} for text in turn.user_after]
        time.sleep(AGENT_SECONDS)  # the agent's tools run: the answer's write ends meanwhile
    assert len(sessions) == 1
    return sessions.pop(), timings


def _sent(upstream: ScriptedUpstream, model: str, session_id: str) -> list[str]:
    """The upstream request bodies, the session's own names (in archived outputs' addresses) and
    the model's name left out."""
    return [json.dumps({k: v for k, v in body.items() if k != "model"}, sort_keys=True).replace(session_id, "SID")
            for body in upstream.of(model)]


def _tokens(upstream: ScriptedUpstream, model: str) -> int:
    return sum(count_message_tokens(m, "gpt-4o-mini") for body in upstream.of(model) for m in body["messages"])


def _events(base: str, session_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/v1/sessions/{session_id}/events", params={"limit": 1000},
                         headers={"Authorization": f"Bearer {TOKEN}"})
    response.raise_for_status()
    return response.json()["events"]


@pytest.mark.parametrize("agent", sorted(RECORDINGS))
def test_continued_requests_are_the_requests_the_session_plans(gateway: str, gateway_settings: Settings,
                                                               upstream: ScriptedUpstream, agent: str):
    recording = load_recording(RECORDINGS[agent])
    turns = recording.turns[:TURNS]
    assert len(turns) == TURNS
    port = free_port()
    plain = f"http://127.0.0.1:{port}"
    api = start_api(gateway_settings, upstream, port, env_extra={"LANES_GATEWAY_CONTINUE": "false"})
    try:
        ready(plain, api)
        runs = {}
        for base, fast in ((gateway, True), (plain, False)):
            model = f"cc-{uuid.uuid4().hex[:8]}"
            _script(upstream, model, turns, recording.tool_protocol == "tool_calls")
            session_id, timings = _play(base, model, recording.system, recording.task, turns, f"continued-{model}")
            runs[fast] = (model, session_id, timings)
    finally:
        api.terminate()
        api.wait(30)

    (fast_model, fast_sid, fast_timings), (plain_model, plain_sid, plain_timings) = runs[True], runs[False]
    assert len(upstream.of(fast_model)) == len(upstream.of(plain_model)) == TURNS
    if IDENTICAL[agent]:  # the same requests went upstream, call for call
        assert _sent(upstream, fast_model, fast_sid) == _sent(upstream, plain_model, plain_sid)
    else:  # compactions came one step earlier (with the answer, not its next turns): about the same cost
        fast_tokens, plain_tokens = _tokens(upstream, fast_model), _tokens(upstream, plain_model)
        assert 0.9 * plain_tokens <= fast_tokens <= 1.1 * plain_tokens, (fast_tokens, plain_tokens)
    # most calls carry tool outputs that continue the last plan: sent with no update first
    continued = sum(1 for t in fast_timings if "step" not in t)
    assert continued >= TURNS // 2, fast_timings
    assert all("step" in t for t in plain_timings)
    # the session stores the same turns, once each, and never planned another request
    def items(sid: str) -> list[tuple[str, str, str | None]]:
        return [(i["kind"], i["text"], i.get("tool_call_id")) for i in stored(gateway, sid)]
    assert items(fast_sid) == items(plain_sid)
    events = _events(gateway, fast_sid)
    assert not [e for e in events if e["kind"] == CONTINUATION_MISSED]
    assert any(e["kind"].startswith("context.compaction") or e["kind"] == "checkpoint.created" for e in events)
    requests = [e["payload"] for e in events if e["kind"] == "context.request"]
    assert len(requests) == TURNS and all(r["request_tokens"] <= r["budget"] for r in requests)
