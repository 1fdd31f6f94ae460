"""The inspector page (/ui) in a real headless Chromium against the live stack.

Needs Debian's chromium (``apt-get install chromium``) and the ``playwright`` Python
package; never ``playwright install``. Without them the tests are skipped with the reason.
"""

from __future__ import annotations

import pytest

from tests.api.stack import replay_body
from tests.ui.conftest import REPO

ARTIFACTS = REPO / "test-artifacts"


async def _shown_items(page) -> list[dict]:
    return await page.eval_on_selector_all(
        "#items tbody tr",
        "rows => rows.map(r => ({id: r.dataset.itemId, cells: [...r.children].map(c => c.textContent)}))")


async def test_inspector_follows_a_live_session_through_a_compaction(browser, api_stack, client_a, trajectory,
                                                                    replay):
    created = await client_a.create_session(**replay_body(trajectory, replay, budget_tokens=4000))
    sid = created.session_id
    page = await browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        await page.goto(f"{api_stack.base_url}/ui?token={api_stack.token_a}#session={sid}")
        assert "token=" not in page.url  # the token left the address bar for sessionStorage
        await page.wait_for_selector(f'#sessions li[data-session-id="{sid}"].selected')
        await page.wait_for_selector('#items tbody tr[data-item-id="itm-000000"]', timeout=30_000)
        assert await page.text_content("#compactions") == "0"
        assert await page.locator("#bar-lifecycle .seg").count() >= 1
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "inspector-before.png"), full_page=True)

        # the agent runs; the page is never reloaded
        task = await client_a.send_message(sid, trajectory.task)
        await page.wait_for_function(
            "() => Number(document.querySelector('#compactions').textContent) > 0", timeout=90_000)
        await client_a.wait_task(sid, task.task_id, timeout=120)
        report = await client_a.context(sid)
        expected = sorted((i for i in report.items if i.projection != "omitted"), key=lambda i: (i.seq, i.id))
        await page.wait_for_function(
            f"() => document.querySelectorAll('#items tbody tr').length === {len(expected)}", timeout=30_000)
        await page.wait_for_function(
            f"() => document.querySelector('#compactions').textContent === '{report.compactions}'", timeout=30_000)

        shown = await _shown_items(page)
        assert [row["id"] for row in shown] == [i.id for i in expected]
        by_id = {i.id: i for i in expected}
        for row in shown:  # seq, item, kind, state, projection, tokens, reason, episode
            item = by_id[row["id"]]
            assert row["cells"][3] == item.lifecycle and row["cells"][4] == item.projection
            assert row["cells"][5].replace(",", "") == str(item.tokens)
            assert row["cells"][6] == item.reason
        # what the compaction left is visible: its checkpoint (the fallback's record of archived history)
        assert any(row["cells"][2].endswith("checkpoint") for row in shown), [r["cells"][2] for r in shown]
        # budget bars: one segment per lifecycle / kind in use, widths proportional to the budget
        segments = await page.eval_on_selector_all(
            "#bar-lifecycle .seg", "s => s.map(e => [e.dataset.name, parseFloat(e.style.width)])")
        in_use = {k for k, v in report.tokens_by_lifecycle.items() if v > 0 and k != "archived"}
        assert {name for name, _ in segments} == in_use
        scale = max(report.budget, report.working_set_tokens)
        assert sum(w for _, w in segments) == pytest.approx(100 * report.working_set_tokens / scale, abs=0.5)
        kinds = await page.eval_on_selector_all("#bar-kind .seg", "s => s.map(e => e.dataset.name)")
        assert set(kinds) == {k for k, v in report.tokens_by_kind.items() if v > 0}
        budget_text = await page.text_content("#budget-text")
        assert f"{report.budget:,}" in budget_text
        # the timeline got the compaction event live
        kinds_seen = await page.eval_on_selector_all("#events li", "ls => ls.map(l => l.dataset.kind)")
        assert any(k.startswith("context.compaction") for k in kinds_seen)
        assert "item.archived" in kinds_seen or report.counters.model_dump().get("archived", 0) == 0
        # clicking an item shows its exact content
        await page.click('#items tbody tr[data-item-id="itm-000001"]')
        await page.wait_for_selector("#item-panel:not([hidden])")
        await page.wait_for_function("() => document.querySelector('#item-text').textContent.length > 0")
        assert trajectory.task[:40] in await page.text_content("#item-text")
        await page.screenshot(path=str(ARTIFACTS / "inspector.png"), full_page=True)
        assert not errors, errors
    finally:
        await page.close()
        await client_a.cancel_session(sid)


async def test_inspector_asks_for_a_token_and_rejects_a_bad_one(browser, api_stack):
    page = await browser.new_page()
    try:
        await page.goto(f"{api_stack.base_url}/ui")
        await page.wait_for_selector("#login:not([hidden])")
        help_text = await page.text_content("#token-help")  # the login page says where the token is
        assert "api-token" in help_text and "LANES_API_TOKENS" in help_text
        await page.fill("#token-input", "not-a-valid-token")
        await page.click("#login button")
        await page.wait_for_function("() => document.querySelector('#connection').textContent.includes('rejected')")
        assert await page.is_hidden("#app")
        await page.fill("#token-input", api_stack.token_b)
        await page.click("#login button")
        await page.wait_for_selector("#app:not([hidden])")
        assert await page.text_content("#connection") == "connected"
    finally:
        await page.close()


async def test_inspector_shows_episodes_of_an_external_session(browser, api_stack, client_a):
    from lanes_client import assistant_item, tool_result_item, user_item

    sid = (await client_a.create_session(mode="external", system_prompt="You fix auth bugs.")).session_id
    await client_a.append_items(sid, [user_item("fix auth")])
    await client_a.begin_episode(sid, "inspect-auth", "exploration", "find the validation")
    call = {"id": "r1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.ts"}'}}
    await client_a.append_items(sid, [assistant_item({"content": "", "tool_calls": [call]}),
                                      tool_result_item("r1", "read_file", "export const a = 1", 0)])
    await client_a.end_episode(sid, "inspect-auth", "validation happens in a.ts")
    await client_a.begin_episode(sid, "fix-auth", "action", "edit a.ts", depends_on=["inspect-auth"])
    await client_a.append_items(sid, [assistant_item({"content": "editing a.ts"})])
    page = await browser.new_page(viewport={"width": 1200, "height": 900})
    try:
        await page.goto(f"{api_stack.base_url}/ui?token={api_stack.token_a}#session={sid}")
        await page.wait_for_selector('#episodes li[data-episode-id="fix-auth"]')
        listed = await page.eval_on_selector_all("#episodes li", "ls => ls.map(l => l.dataset.episodeId)")
        assert listed == ["fix-auth", "inspect-auth"]  # active first
        assert await page.locator("#episode-graph rect").count() == 2
        assert "fix-auth" in await page.text_content("#budget-more")  # active episodes in the facts line
        rows = await _shown_items(page)
        assert [r["cells"][7] for r in rows if r["id"] in ("itm-000002", "itm-000003")] == ["inspect-auth"] * 2
        await page.screenshot(path=str(ARTIFACTS / "inspector-episodes.png"), full_page=True)
    finally:
        await page.close()
        await client_a.cancel_session(sid)
