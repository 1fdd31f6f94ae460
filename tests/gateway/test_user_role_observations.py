"""An agent whose tool outputs come back as user messages (mini-swe-agent's text protocol,
aider): through the gateway its conversation is one task, so its statement stays verbatim in
every upstream request and compactions come in batches, leaving the requests between them
append-only (the provider's prompt cache serves them). Before, each user message began a task,
and every call rolled all but the newest two into the summary: the request changed right after
the system prompt on every call, and the statement was a 300-character digest."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest

from activities.tokens import count_message_tokens
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import session_of, stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

pytestmark = pytest.mark.timeout(240)

BUDGET = 6_000
CALLS = 36


def observation(n: int) -> str:
    """About 300 tokens of a command's output, different on every turn."""
    return "<returncode>0</returncode>\n<output>\n" + "".join(
        f"src/module_{n}/file_{i}.py:{i * 7 + n}: def handler_{n}_{i}(request): return process(request, {i})\n"
        for i in range(12)) + "</output>"


def extends(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool:
    """``after`` is ``before`` with messages appended: the provider's cache serves all of ``before``."""
    return after[:len(before)] == before


def test_a_conversation_of_user_role_observations_is_one_task_with_its_statement_kept(
        gateway: str, upstream: ScriptedUpstream):
    name = f"obs-{uuid.uuid4().hex[:8]}"
    upstream.script(name, *[Scripted(text=f"THOUGHT: look further.\n```bash\ncat module_{n}\n```")
                            for n in range(CALLS)])
    client = openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0,
                           default_headers={"X-Lanes-Budget-Tokens": str(BUDGET)})
    statement = f"TASK-{uuid.uuid4().hex[:8]}: the handlers drop the request id; find where and fix it."
    messages: list[Any] = [{"role": "system", "content": "You are a software agent. Answer with one bash block."},
                           {"role": "user", "content": statement}]
    sid = None
    for n in range(CALLS):
        raw = client.chat.completions.with_raw_response.create(model=name, messages=messages)
        sid = sid or session_of(raw)
        assert session_of(raw) == sid
        messages += [{"role": "assistant", "content": raw.parse().choices[0].message.content},
                     {"role": "user", "content": observation(n)}]
    sent = [body["messages"] for body in upstream.of(name)]
    assert len(sent) == CALLS
    full = sum(count_message_tokens(m, "gpt-4o-mini") for m in messages)
    assert full > 1.5 * BUDGET  # the conversation outgrew the budget: compactions ran
    for request in sent:
        assert sum(count_message_tokens(m, "gpt-4o-mini") for m in request) <= BUDGET
        assert any(m["role"] == "user" and m["content"] == statement for m in request)  # verbatim
    rewritten = [n for n in range(1, CALLS) if not extends(sent[n - 1], sent[n])]
    assert rewritten, "no compaction changed the request: the budget was never reached"
    # compactions in batches: most calls only append to the request before them
    assert len(rewritten) <= CALLS // 4, rewritten
    items = stored(gateway, sid)
    users = [i for i in items if i["kind"] == "user"]
    # the statement and every observation sent (the last one never was: no call followed it)
    assert [i["text"] for i in users] == [statement, *(observation(n) for n in range(CALLS - 1))]  # exactly
    assert len({i["task_id"] for i in users}) == 1  # one task
    session = httpx.get(f"{gateway}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert session["config"]["tasks"] == "conversation"
