"""Task assembly and ended explorations through the product, hosted and external (issue 27):
at a task's start, with no pressure at all, the submissions older than the two most recent
roll into the rolling summary (the two stay verbatim); an exploration that just ended keeps
its conclusion in the next request while its traffic leaves it."""

from __future__ import annotations

from lanes_client import user_item
from tests.integration.scripted_model import tool_call


def _submission(n: int) -> str:
    # a summary quotes the first 120 characters of what it rolls: the tail says whether it is whole
    return f"Task {n}: " + "please look at the module layout and report anything odd " * 3 + f"(tail-marker-{n})"


def _assert_assembled(text: str) -> None:
    assert "tail-marker-1" not in text  # rolled into the summary
    assert all(f"tail-marker-{n}" in text for n in (2, 3, 4))  # the two before the current one, and it


async def test_an_external_task_starts_with_old_submissions_rolled(client_a):
    sid = (await client_a.create_session(mode="external", budget_tokens=32_000)).session_id
    for n in range(1, 5):
        await client_a.append_items(sid, [user_item(_submission(n))])
        request = await client_a.next_request(sid)
        await client_a.append_items(sid, [{"kind": "assistant", "text": f"done {n}"}])
    _assert_assembled("\n".join(str(m.get("content")) for m in request.messages))
    report = await client_a.context(sid)
    assert report.summary_id is not None and report.pressure < 0.2 and report.counters.compactions == 0


async def test_a_hosted_task_starts_with_old_submissions_rolled(client_a, scripted):
    model = scripted.add("assembly-hosted", [{"content": "done"}])
    sid = (await client_a.create_session(model=model, budget_tokens=32_000, tools="none")).session_id
    for n in range(1, 5):
        done = await client_a.send_message(sid, _submission(n), wait=60)
        assert done.task is not None and done.task.state == "completed", done.task
    last = [r for r in scripted.requests if r.get("model") == model][-1]
    _assert_assembled("\n".join(str(m.get("content")) for m in last["messages"]))
    assert (await client_a.context(sid)).summary_id is not None


async def test_a_hosted_exploration_that_ended_keeps_its_conclusion_in_the_next_task(client_a, scripted):
    model = "assembly-exploration"
    conclusion = "The flaky test depends on the wall clock in tests/test_time.py"
    scripted.add(model, [
        {"content": "", "tool_calls": [tool_call("e1", "begin_episode", episode_id="probe", kind="exploration",
                                                 goal="find what the test depends on")]},
        {"content": "", "tool_calls": [tool_call("b1", "bash", command="echo 'tests/test_time.py: now() # probe-output'")]},
        {"content": "", "tool_calls": [tool_call("e2", "end_episode", episode_id="probe", conclusion=conclusion)]},
        {"content": "It depends on the clock."},
        {"content": "Fixed."},
    ], sequential=True)
    sid = (await client_a.create_session(model=model, budget_tokens=32_000,
                                         context_tools=["begin_episode", "end_episode"])).session_id
    first = await client_a.send_message(sid, "Why is the test flaky?", wait=60)
    assert first.task is not None and first.task.state == "completed", first.task
    second = await client_a.send_message(sid, "Fix it.", wait=60)
    assert second.task is not None and second.task.state == "completed", second.task
    text = "\n".join(str(m.get("content")) for m in [r for r in scripted.requests if r.get("model") == model][-1]["messages"])
    assert "probe-output" not in text and conclusion in text
