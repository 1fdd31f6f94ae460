"""The inspector's views of a whole session, in headless Chromium on the real stack: the
lanes tree (each subagent lane with its own working set and events), the pressure timeline
with its compaction marks, event filters by kind and lane with per-session numbers, the
legend of reason codes, the side panel with an item's text, an external session's turns
and task state, and usage when the session reports it.

Assertions are on the DOM against what the API says; a screenshot of each view is kept
under test-artifacts/ui/ (gitignored) for people to look at.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from recordings import ToolResultRec, Trajectory, Turn
from tests.integration.subagent_script import child_trajectory, replay_field, write_recordings
from tests.ui.conftest import REPO
from worker.replay.model_server import ReplayModelServer
from workflows.context import ToolCall

ARTIFACTS = REPO / "test-artifacts" / "ui"
LEGEND = REPO / "worker" / "api" / "static" / "reasons.json"
BUDGET = 3_000
READS = 6


def _lane(event) -> str:
    return event.lane.split(":")[0]


def delegating_parent() -> Trajectory:
    """Turn 0 starts two subagents; then the lead reads large files (the main lane compacts); then it answers."""
    spawns = [ToolCall(id=f"spawn-{n}", name="spawn_subagent", arguments=json.dumps({"brief": f"Inspect module {n}."}))
              for n in range(2)]
    turns = [Turn(assistant_text="Delegating the investigation.", tool_calls=spawns, results=[])]
    for r in range(READS):
        call = ToolCall(id=f"p-read{r}", name="bash", arguments=json.dumps({"command": f"cat src/auth_{r}.py"}))
        output = "".join(f"src/auth_{r}.py:{line}: def check_{r}_{line}(token): return token.scope == {line}\n"
                         for line in range(40))
        turns.append(Turn(assistant_text="", tool_calls=[call], results=[
            ToolResultRec(tool_call_id=call.id, tool_name="bash", output=output, exit_code=0, render_role="tool")]))
    turns.append(Turn(assistant_text="The subagents and the reads agree: the scope check is inverted.", tool_calls=[],
                      results=[]))
    return Trajectory(id="parent", source_format="synthetic", system="You are the lead engineer.",
                      task="Find why auth rejects valid tokens.", tool_protocol="tool_calls", turns=turns)


async def _events(client, sid: str) -> list:
    return [e async for e in client.iter_events(sid)]


async def _open(browser, api_stack, sid: str):
    page = await browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{api_stack.base_url}/ui?token={api_stack.token_a}#session={sid}")
    await page.wait_for_selector(f'#sessions li[data-session-id="{sid}"].selected')
    return page, errors


async def _shown_events(page) -> list[dict]:
    return await page.eval_on_selector_all(
        "#events li", "ls => ls.map(l => ({n: Number(l.dataset.n), kind: l.dataset.kind, lane: l.dataset.lane}))")


async def _settle_events(page, count: int) -> None:
    await page.wait_for_function(f"() => document.querySelector('#filter-kind option')?.textContent"
                                 f" === 'all kinds ({count:,})'", timeout=30_000)


@pytest.fixture(scope="module")
async def delegated(api_stack, client_a):
    """A finished hosted replay session whose lead started two subagents and compacted."""
    folder = api_stack.settings.replay_roots[-1] / "inspector-lanes"
    parent, children = write_recordings(folder, delegating_parent(), [child_trajectory(n, reads=3) for n in range(2)])
    with ReplayModelServer([parent[0]] + [c[0] for c in children]) as server:
        created = await client_a.create_session(
            mode="hosted", model="replay", system_prompt=parent[0].system, tools="recall", budget_tokens=BUDGET,
            replay=replay_field(*parent, server, [replay_field(*c, server) for c in children]),
            subagents={"enabled": True, "max_concurrent": 2})
        sid = created.session_id
        task = await client_a.send_message(sid, parent[0].task)
        status = await client_a.wait_task(sid, task.task_id, timeout=180)
        assert status.tasks[0].state == "completed", status.tasks[0].error
    yield sid
    await client_a.cancel_session(sid)


async def test_the_lanes_tree_shows_each_lane_with_its_own_working_set_and_events(browser, api_stack, client_a,
                                                                                 delegated):
    sid = delegated
    lanes = await client_a.subagents(sid)
    assert [c.lane for c in lanes] == ["sub-0001", "sub-0002"] and all(c.state == "completed" for c in lanes)
    events = await _events(client_a, sid)
    per_lane = Counter(_lane(e) for e in events)
    page, errors = await _open(browser, api_stack, sid)
    try:
        await _settle_events(page, len(events))
        for lane in ("main", "sub-0001", "sub-0002"):
            await page.wait_for_selector(f'#lanes-tree .lane-node[data-lane="{lane}"] >> text=/tokens/')
        # the tree: main at the root, the subagents under it
        nested = await page.eval_on_selector_all(
            "#lanes-tree > li > ul > li > .lane-node", "ns => ns.map(n => n.dataset.lane)")
        assert nested == ["sub-0001", "sub-0002"]
        for child in lanes:
            report = await client_a.subagent_context(sid, child.lane)
            facts = await page.text_content(f'#lanes-tree .lane-node[data-lane="{child.lane}"] [data-role="facts"]')
            assert f"{report.working_set_tokens:,} / {report.budget:,} tokens" in facts
            assert f"{len(report.items)} items" in facts and f"{per_lane[child.lane]} events" in facts
            assert "completed" in await page.text_content(f'#lanes-tree .lane-node[data-lane="{child.lane}"]')

        # choosing a subagent shows its working set, its items and its events only
        await page.click('#lanes-tree .lane-node[data-lane="sub-0001"]')
        await page.wait_for_function("() => document.querySelector('#working-set-lane').textContent === 'sub-0001'")
        report = await client_a.subagent_context(sid, "sub-0001")
        shown = await page.eval_on_selector_all("#items tbody tr", "rs => rs.map(r => r.dataset.itemId)")
        expected = sorted((i for i in report.items if i.projection != "omitted"), key=lambda i: (i.seq, i.id))
        assert shown == [i.id for i in expected] and all(i.startswith("sub-0001") or "sub-0001" in i for i in shown)
        assert f"{report.budget:,}" in await page.text_content("#budget-text")
        assert await page.input_value("#filter-lane") == "sub-0001"
        listed = await _shown_events(page)
        assert len(listed) == per_lane["sub-0001"] and {e["lane"] for e in listed} == {"sub-0001"}
        assert "shared prefix" in await page.text_content("#budget-more")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "lanes-tree.png"), full_page=True)
        assert not errors, errors
    finally:
        await page.close()


async def test_the_timeline_plots_every_request_against_the_budget_with_compactions_marked(
        browser, api_stack, client_a, delegated):
    sid = delegated
    events = await _events(client_a, sid)
    report = await client_a.context(sid)
    requests = [e.payload for e in events if e.kind == "context.request" and _lane(e) == "main"]
    compactions = [e.payload for e in events if e.kind == "context.compaction.fallback" and _lane(e) == "main"]
    assert len(requests) == READS + 2 and compactions, Counter(e.kind for e in events)  # one request per model turn
    assert all(r["working_set_tokens"] <= r["budget"] == report.budget for r in requests)
    page, errors = await _open(browser, api_stack, sid)
    try:
        await _settle_events(page, len(events))
        await page.wait_for_selector("#timeline .sample")
        samples = await page.eval_on_selector_all(
            "#timeline .sample", "cs => cs.map(c => [Number(c.dataset.x), Number(c.dataset.tokens)])")
        assert samples == [[n + 1, r["working_set_tokens"]] for n, r in enumerate(requests)]
        marks = await page.eval_on_selector_all("#timeline .mark", "ms => ms.map(m => m.dataset.kind)")
        assert marks == ["compaction"] * len(compactions)
        assert await page.get_attribute("#timeline .budget", "data-budget") == str(report.budget)
        summary = await page.text_content("#timeline-summary")
        assert f"{len(requests)} requests" in summary and f"{len(compactions)} compactions" in summary
        # a mark sits where the compaction happened: between the requests before and after it
        tips = await page.eval_on_selector_all("#timeline .mark title", "ts => ts.map(t => t.textContent)")
        assert all("→" in tip for tip in tips)
        # a subagent's timeline is its own
        await page.click('#lanes-tree .lane-node[data-lane="sub-0002"]')
        child_requests = sum(1 for e in events if e.kind == "context.request" and _lane(e) == "sub-0002")
        await page.wait_for_function(f"() => document.querySelectorAll('#timeline .sample').length === {child_requests}")
        await page.click('#lanes-tree .lane-node[data-lane="main"]')
        await page.wait_for_function(f"() => document.querySelectorAll('#timeline .sample').length === {len(requests)}")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.locator("#timeline-section").screenshot(path=str(ARTIFACTS / "timeline.png"))
        assert not errors, errors
    finally:
        await page.close()


async def test_events_are_numbered_per_session_and_filtered_by_kind_and_lane(browser, api_stack, client_a, delegated):
    sid = delegated
    events = await _events(client_a, sid)
    page, errors = await _open(browser, api_stack, sid)
    try:
        await _settle_events(page, len(events))
        listed = await _shown_events(page)
        # per-session numbers, newest first, whatever the log's global ids
        assert [e["n"] for e in listed] == list(range(len(events), 0, -1))
        first = await page.get_attribute('#events li[data-n="1"]', "data-event-id")
        assert first == str(events[0].id)
        assert [e["kind"] for e in reversed(listed)] == [e.kind for e in events]

        await page.select_option("#filter-kind", "context.compaction.*")
        listed = await _shown_events(page)
        expected = [e for e in events if e.kind.startswith("context.compaction.")]
        assert len(listed) == len(expected) > 0 and {e["kind"] for e in listed} == {e.kind for e in expected}
        assert "shown" in await page.text_content("#events-count")

        await page.select_option("#filter-kind", "item.added")
        await page.select_option("#filter-lane", "sub-0002")
        listed = await _shown_events(page)
        expected = [e for e in events if e.kind == "item.added" and _lane(e) == "sub-0002"]
        assert [e["n"] for e in listed] == sorted((events.index(e) + 1 for e in expected), reverse=True)
        assert {(e["kind"], e["lane"]) for e in listed} == {("item.added", "sub-0002")}
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.locator("#events-section").screenshot(path=str(ARTIFACTS / "events-filtered.png"))

        # an item's event opens the item in the side panel
        await page.click("#events li[data-item-id]")
        await page.wait_for_selector("#item-panel:not([hidden])")
        assert (await page.text_content("#item-title")).startswith("sub-0002")
        assert not errors, errors
    finally:
        await page.close()


async def test_the_legend_explains_the_codes_and_the_side_panel_shows_the_item_text(browser, api_stack, client_a,
                                                                                   delegated):
    sid = delegated
    report = await client_a.context(sid)
    legend = json.loads(LEGEND.read_text())["codes"]
    page, errors = await _open(browser, api_stack, sid)
    try:
        await page.wait_for_selector("#items tbody tr")
        codes = await page.eval_on_selector_all("#legend tbody tr", "rs => rs.map(r => r.dataset.code)")
        assert codes == [entry["code"] for entry in legend]
        in_use = await page.eval_on_selector_all("#legend tbody tr.in-use", "rs => rs.map(r => r.dataset.code)")
        assert "pinned:{kind}" in in_use and in_use  # the system prompt and the task are pinned
        # every reason shown in the table is explained (its tooltip), none is unknown
        assert await page.locator("#items td.reason .code.unknown").count() == 0
        tip = await page.get_attribute('#items tbody tr[data-item-id="itm-000000"] td.reason', "title")
        assert tip.startswith("pinned:system: Pinned by its kind")

        # the finished task's tool traffic is omitted from requests: shown on demand
        tool_output = next(i for i in sorted(report.items, key=lambda i: i.seq) if i.kind == "tool_result")
        stored = await client_a.item(sid, tool_output.id)
        if tool_output.projection == "omitted":
            await page.check("#show-omitted")
        await page.click(f'#items tbody tr[data-item-id="{tool_output.id}"]')
        await page.wait_for_selector("#item-panel:not([hidden])")
        await page.wait_for_function("() => document.querySelector('#item-text').textContent.length > 0")
        assert await page.text_content("#item-title") == tool_output.id
        assert stored.text[:300] in await page.text_content("#item-text")
        meta = await page.text_content("#item-meta")
        assert f"{tool_output.lifecycle} · {tool_output.projection} · {tool_output.tokens:,} tokens" in meta
        reasons = await page.eval_on_selector_all("#item-reason li code", "cs => cs.map(c => c.textContent)")
        assert reasons == tool_output.reason.split(";")
        # the panel is beside the table, not below it: both are on screen at once
        panel = await page.locator("#item-panel").bounding_box()
        table = await page.locator("#items").bounding_box()
        assert panel and table and panel["x"] > table["x"] and panel["y"] < 1000
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "item-panel.png"))
        await page.keyboard.press("Escape")
        await page.wait_for_selector("#item-panel", state="hidden")
        await page.locator("#legend-section").screenshot(path=str(ARTIFACTS / "legend.png"))
        assert not errors, errors
    finally:
        await page.close()


async def test_an_external_session_shows_its_turns_task_state_and_requests(browser, api_stack, client_a):
    from lanes_client import assistant_item, tool_result_item, user_item

    sid = (await client_a.create_session(mode="external", system_prompt="You fix auth bugs.")).session_id
    call = {"id": "r1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.ts"}'}}
    await client_a.append_items(sid, [user_item("fix auth")])
    await client_a.next_request(sid)
    await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                      tool_result_item("r1", "read_file", "export const a = 1", 0)])
    await client_a.next_request(sid)
    await client_a.append_items(sid, [assistant_item({"content": "Fixed: a.ts exported the wrong constant."})])
    page, errors = await _open(browser, api_stack, sid)
    try:
        await page.wait_for_selector('#tasks [data-task-id="task-0000"]')
        assert await page.get_attribute('#tasks [data-task-id="task-0000"]', "data-state") == "completed"
        assert "2 turns" in await page.text_content('#tasks [data-task-id="task-0000"]')
        assert "turns 2" in await page.text_content("#session-status")
        await page.wait_for_function("() => document.querySelectorAll('#timeline .sample').length === 2")
        assert await page.is_hidden("#usage")  # this session reports no usage: nothing is made up

        await client_a.append_items(sid, [user_item("now add a test")])  # the next task begins
        await page.wait_for_selector('#tasks [data-task-id="task-0001"][data-state="running"]', timeout=15_000)
        assert await page.get_attribute('#tasks [data-task-id="task-0000"]', "data-state") == "completed"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "external.png"), full_page=True)
        assert not errors, errors
    finally:
        await page.close()
        await client_a.cancel_session(sid)


async def test_usage_and_condensations_are_shown_from_what_the_session_reported(browser, api_stack, client_a):
    """An external agent reports its provider's counts with each step, and condenses its
    finished task explicitly: the usage panel shows the session's totals, the timeline marks
    the condensation as such."""
    from lanes_client import assistant_item, tool_result_item, user_item

    sid = (await client_a.create_session(mode="external", model="ui-usage",
                                         prices={"ui-usage": {"input": 2.0, "cached_input": 0.5, "output": 8.0}})
           ).session_id
    step = await client_a.step(sid, [user_item("read the auth module")], step_id="s-0")
    for n in range(1, 4):
        call = {"id": f"r{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"auth_{n}.ts"})}}
        prompt = round(step.request.token_estimate * 1.2)
        step = await client_a.step(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                         tool_result_item(f"r{n}", "read_file", f"export const a{n} = {n}", 0)],
                                   step_id=f"s-{n}", usage={"prompt_tokens": prompt, "cached_tokens": prompt // 2,
                                                            "completion_tokens": 30})
    await client_a.step(sid, [assistant_item({"content": "Read all three."}), user_item("now fix it")], step_id="s-4")
    accepted = await client_a.condense(sid, {"completed_work": ["read auth_1..3.ts"], "references": ["auth_1.ts"]})
    assert accepted.status == "accepted", accepted
    await client_a.next_request(sid)
    usage = (await client_a.status(sid)).usage
    assert usage is not None and usage.calls == 3
    condensations = [e async for e in client_a.iter_events(sid) if e.kind == "context.compaction.explicit"]
    assert len(condensations) == 1
    page, errors = await _open(browser, api_stack, sid)
    try:
        await page.wait_for_selector("#usage:not([hidden])")
        text = await page.text_content("#usage")
        assert f"prompt {usage.prompt:,} tokens" in text and f"cached {usage.cached:,}" in text
        assert f"({usage.cached_share * 100:.1f}% cache hits)" in text and f"completion {usage.completion:,}" in text
        assert usage.cost and f"cost {usage.cost:.4f} units" in text
        assert usage.token_ratio > 1 and f"calibrated ×{usage.token_ratio:.2f}" in text
        await page.wait_for_selector("#timeline .mark")
        marks = await page.eval_on_selector_all("#timeline .mark", "ms => ms.map(m => m.dataset.kind)")
        assert marks == ["condensation"]
        assert "1 condensations" in await page.text_content("#timeline-summary")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "usage-and-condensation.png"), full_page=True)
        assert not errors, errors
    finally:
        await page.close()
        await client_a.cancel_session(sid)


async def test_the_session_list_says_what_each_session_is_and_events_read_as_sentences(browser, api_stack, client_a,
                                                                                       delegated):
    """Each listed session shows its first task, mode, model, turns and last activity; every
    event row reads as a sentence with its figures (no ``key=value`` dumps)."""
    sid = delegated
    status = await client_a.status(sid)
    listed = next(s for s in (await client_a.list_sessions(limit=100)).sessions if s.session_id == sid)
    assert listed.first_task == "Find why auth rejects valid tokens."
    assert listed.turns == READS + 2 == status.turns and listed.last_activity is not None
    events = await _events(client_a, sid)
    page, errors = await _open(browser, api_stack, sid)
    try:
        entry = await page.text_content(f'#sessions li[data-session-id="{sid}"]')
        assert "Find why auth rejects valid tokens." in entry
        assert f"hosted · replay · {READS + 2} turns · active " in entry
        await _settle_events(page, len(events))
        rows = await page.eval_on_selector_all("#events li", "ls => ls.map(l => [l.dataset.kind, l.textContent])")
        assert rows and not [text for _, text in rows if "=" in text]
        request = next(e.payload for e in events if e.kind == "context.request" and _lane(e) == "main")
        texts = [text for kind, text in rows if kind == "context.request"]
        assert any(f"Request of {request['request_tokens']:,} of {request['budget']:,} tokens planned" in t
                   for t in texts)
        compacted = [text for kind, text in rows if kind == "context.compaction.fallback"]
        assert compacted and all("tokens," in t and "archived" in t for t in compacted)
        assert any("Task task-0000 completed after" in text for kind, text in rows if kind == "task.completed")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "sessions-and-events.png"), full_page=True)
        assert not errors, errors
    finally:
        await page.close()
