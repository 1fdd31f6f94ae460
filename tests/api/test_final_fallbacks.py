"""The spec's last fallbacks through the product, hosted and external (issue 27):

- a bounded active episode: an exploration that outgrows the budget is never archived, but its
  older outputs become references (exact text at their address) in the working set, so the
  request is planned whole at full fidelity, its newest exchanges in full; before, every
  request from then on went out on the overflow ladder with only the newest output in full;
- pinned-only overflow: when the user messages kept verbatim alone overflow the budget, they
  roll into the rolling summary (all but the current one) instead of the request being refused.
"""

from __future__ import annotations

import json

from lanes_client import AsyncLanesClient, assistant_item, tool_result_item, user_item
from tests.integration.scripted_model import tool_call

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "


def _text(chars: int, seed: str) -> str:
    return (f"{seed} " + WORDS * (chars // len(WORDS) + 1))[:chars]


LINES = 36  # about 3,400 characters: under the preview size, so an output is shown whole
LINE = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november"


def _read_output(n: int) -> str:
    """About 700 tokens that name their file on every line."""
    return "\n".join(f"mod{n}.py:{line} {LINE}" for line in range(LINES))


def _read_command(n: int) -> str:
    """A shell command printing ``_read_output(n)`` (a short call: the output is not in it)."""
    return f'for i in $(seq 0 {LINES - 1}); do echo "mod{n}.py:$i {LINE}"; done'


def _full_outputs(messages: list[dict], count: int) -> list[int]:
    """Which of mod0..mod{count-1}'s outputs the request shows whole (first and last line, no address)."""
    texts = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    return [n for n in range(count) if any(f"mod{n}.py:0 " in text and f"mod{n}.py:{LINES - 1} {LINE}" in text
                                           and "observation://" not in text for text in texts)]


def _assert_newest_whole(messages: list[dict], reads: int) -> None:
    """The newest reads whole (at least the two protected groups of a session without LLM
    condensation, and those read since the last compaction), every older one by reference."""
    whole = _full_outputs(messages, reads)
    assert len(whole) >= 2 and whole == list(range(whole[0], reads)) and whole[0] > 0, whole
    references = [text for m in messages if m.get("role") == "tool" and "observation://" in (text := str(m["content"]))]
    assert len(references) == whole[0], references


async def _assert_bounded_exploration(client: AsyncLanesClient, sid: str, reads: int) -> None:
    report = await client.context(sid)
    outputs = sorted((i for i in report.items if i.kind == "tool_result" and i.episode == "explore"),
                     key=lambda i: i.seq)
    assert len(outputs) == reads  # none archived
    referenced = [i for i in outputs if i.projection == "reference"]
    assert referenced and referenced == outputs[:len(referenced)]  # the oldest first
    assert {i.reason for i in referenced} == {"pass2-active:older-output→reference"}
    assert {i.projection for i in outputs[len(referenced):]} == {"full"}
    assert (await client.episodes(sid)).active == ["explore"]


async def test_an_external_exploration_outgrowing_the_budget_is_bounded(client_a, api_stack):
    sid = (await client_a.create_session(mode="external", budget_tokens=8_000)).session_id
    await client_a.append_items(sid, [user_item("map the codebase")])
    await client_a.begin_episode(sid, "explore", "exploration", "map every module")
    reads = 12
    for n in range(reads):
        call = {"id": f"r{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"mod{n}.py"})}}
        await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                          tool_result_item(f"r{n}", "read_file", _read_output(n), 0)])
        request = await client_a.next_request(sid)
        assert request.fits and request.plan_tokens <= request.budget, request.reason
    _assert_newest_whole(request.messages, reads)
    shown = json.dumps(request.messages)
    assert all(f"mod{n}.py" in shown for n in range(reads))  # every older read by its reference
    await _assert_bounded_exploration(client_a, sid, reads)


async def test_a_hosted_exploration_outgrowing_the_budget_is_bounded(client_a, scripted):
    model = "fallbacks-exploration"
    reads = 10
    script = [{"content": "", "tool_calls": [tool_call("e1", "begin_episode", episode_id="explore",
                                                       kind="exploration", goal="map every module")]}]
    script += [{"content": "", "tool_calls": [tool_call(f"r{n}", "bash", command=_read_command(n))]}
               for n in range(reads)]
    scripted.add(model, [*script, {"content": "mapped"}], sequential=True)
    created = await client_a.create_session(model=model, budget_tokens=8_000, tools="workspace",
                                            context_tools=["begin_episode", "end_episode"],
                                            compaction={"enabled": False})
    sid = created.session_id
    done = await client_a.send_message(sid, "map the codebase", wait=60)
    assert done.task is not None and done.task.state == "completed", done.task
    last = [r for r in scripted.requests if r.get("model") == model][-1]
    _assert_newest_whole(last["messages"], reads)  # (the task's end omits its tool traffic from the ledger)


async def test_kept_user_messages_roll_when_pinned_content_alone_overflows_external(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000)).session_id
    for n in range(5):  # each a task of its own; the three newest are kept verbatim until they cannot be
        await client_a.append_items(sid, [user_item(_text(2_400, f"instruction {n}"))])
        request = await client_a.next_request(sid)
        assert request.fits and request.plan_tokens <= request.budget, request.reason
        await client_a.append_items(sid, [assistant_item({"content": f"done {n}"})])
    users = [m for m in request.messages if m["role"] == "user"]
    assert str(users[-1]["content"]) == _text(2_400, "instruction 4")  # the current submission whole
    report = await client_a.context(sid)
    assert report.summary_id is not None


async def test_kept_user_messages_roll_when_pinned_content_alone_overflows_hosted(client_a, scripted):
    model = "fallbacks-pinned"
    scripted.add(model, [{"content": "noted"}])
    sid = (await client_a.create_session(model=model, budget_tokens=2_000, tools="recall",
                                         compaction={"enabled": False})).session_id
    for n in range(5):
        done = await client_a.send_message(sid, _text(2_400, f"instruction {n}"), wait=60)
        assert done.task is not None and done.task.state == "completed", done.task
    sent = [r for r in scripted.requests if r.get("model") == model][-1]["messages"]
    assert str([m for m in sent if m["role"] == "user"][-1]["content"]) == _text(2_400, "instruction 4")
    assert (await client_a.context(sid)).summary_id is not None
