"""The agent sees its own budget (issue 27): a hosted session's model is told, once per task,
when its context was compacted; an external session asks for it with ``budget_notice``."""

from __future__ import annotations

from lanes_client import assistant_item, tool_result_item, user_item
from tests.integration.scripted_model import tool_call

NOTICE = "[Context budget]"
LINE = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november"


def _notices(messages: list[dict]) -> list[str]:
    return [str(m["content"]) for m in messages if NOTICE in str(m.get("content"))]


async def test_a_hosted_model_is_told_once_per_task_that_its_context_was_compacted(client_a, scripted):
    model = "notice-hosted"
    reads = [{"content": "", "tool_calls": [tool_call(f"r{n}", "bash", command=(
        f'for i in $(seq 0 35); do echo "m{n}.py:$i {LINE}"; done'))]} for n in range(16)]
    scripted.add(model, [*reads, {"content": "done"}], sequential=True)
    created = await client_a.create_session(model=model, budget_tokens=4_000, tools="workspace",
                                            compaction={"enabled": False})
    assert created.config["budget_notice"] is True  # on by default for hosted sessions
    sid = created.session_id
    done = await client_a.send_message(sid, "read the modules", wait=60)
    assert done.task is not None and done.task.state == "completed", done.task

    events = [e async for e in client_a.iter_events(sid)]
    compactions = [e for e in events if e.kind == "context.compaction.fallback"]
    notices = [e for e in events if e.kind == "context.budget.notice"]
    assert len(compactions) >= 2 and len(notices) == 1  # one streak, one announcement
    assert notices[0].payload["streak"] == 1 and notices[0].payload["budget"] == compactions[0].payload["budget"]
    requests = [r for r in scripted.requests if r.get("model") == model]
    told = [n for n, r in enumerate(requests) if _notices(r["messages"])]
    assert told and told == list(range(told[0], len(requests)))  # from the compaction on, in every request
    [text] = _notices(requests[-1]["messages"])
    assert "budget of" in text and "recall_observation" in text
    # the notice is an item of the session like the checkpoint: pinned, in the ledger
    report = await client_a.context(sid)
    assert [i.lifecycle for i in report.items if i.kind == "budget_notice"] == ["pinned"]


async def test_an_external_session_gets_the_notice_only_when_it_asks(client_a):
    async def drive(**config) -> list[dict]:
        sid = (await client_a.create_session(mode="external", budget_tokens=3_000, **config)).session_id
        await client_a.append_items(sid, [user_item("read the modules")])
        for n in range(8):
            call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat"}'}}
            output = "\n".join(f"m{n}.py:{i} {LINE}" for i in range(36))
            await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                              tool_result_item(f"c{n}", "bash", output, 0)])
            request = await client_a.next_request(sid)
            assert request.fits, request.reason
        return request.messages

    assert _notices(await drive()) == []  # off by default: the agent brings its own prompt
    [text] = _notices(await drive(budget_notice=True, recall="endpoint"))
    assert "budget of 3,000 tokens" in text and "observations endpoint" in text
