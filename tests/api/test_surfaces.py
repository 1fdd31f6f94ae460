"""Every surface of the spec through the HTTP API (issue 15, part 4), against a scripted
model: a default session compacts at 80 % with an LLM attempt; capability admission, its
refusal message, step and task scope clearing and a manual skill skipped (the task does
not fail); an exhaustive task refusing to end with unread ranges; episode tools and
pin_note offered to a hosted model and used; pin_note through the API, budget-checked.
Bad input is a 4xx naming the field, with nothing stored."""

from __future__ import annotations

import asyncio

import httpx

from lanes_client import AsyncLanesClient, user_item
from lanes_client.schemas import ItemIn
from tests.integration.scripted_model import ScriptedModel, tool_call
from workflows.context import ids

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "


def _text(chars: int, seed: str = "") -> str:
    out = (seed + " " + WORDS * (chars // len(WORDS) + 1))
    return out[:chars]


async def _events(client: AsyncLanesClient, sid: str, prefix: str) -> list:
    return [e async for e in client.iter_events(sid) if e.kind.startswith(prefix)]


def _raw(client: AsyncLanesClient, api_stack) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=api_stack.base_url, headers={"Authorization": f"Bearer {api_stack.token_a}"},
                             timeout=60)


def _requests_of(scripted: ScriptedModel, model: str) -> list[dict]:
    return [r for r in scripted.requests if r.get("model") == model]


def _system_texts(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "system")


async def test_a_default_session_compacts_at_80_percent_with_an_llm_attempt(client_a, scripted):
    model = "surfaces-compaction"
    turns = [{"content": _text(2_400, f"step {n}"),
              "tool_calls": [tool_call(f"c{n}", "recall_observation", address="observation://obs-missing")]}
             for n in range(12)]
    scripted.add(model, [*turns, {"content": "all done"}], sequential=True)
    created = await client_a.create_session(model=model, budget_tokens=6_000, tools="recall")
    sid = created.session_id
    assert created.config["llm_compaction"] is True and created.config["condenser_model"] == model

    done = await client_a.send_message(sid, "work through the steps", wait=60)
    assert done.task is not None and done.task.state == "completed", done.task

    started = await _events(client_a, sid, "context.condensation.started")
    succeeded = await _events(client_a, sid, "context.condensation.succeeded")
    assert started and succeeded, [e.kind async for e in client_a.iter_events(sid)]
    ours = [c for c in scripted.condensations if c["model"] == model]
    assert ours and "tools" not in ours[0]  # the condenser has no tools
    # what the condensation cost, as the provider counted it (the scripted condenser reports 1 and 1)
    assert {(e.payload["model"], e.payload["input_tokens"], e.payload["output_tokens"]) for e in succeeded} == {
        (model, 1, 1)}
    requests = await _events(client_a, sid, "context.request")
    assert requests and all(len(e.payload["stable_prefix_digest"]) == 16 for e in requests)
    report = await client_a.context(sid)
    assert report.live_memory_id is not None


async def test_known_windows_and_the_unknown_model_fallback(client_a, scripted):
    known = await client_a.create_session(model="gpt-4.1-mini", mode="external")
    assert known.config["context_window"] == 1_047_576 and known.config["model_known"] is True
    unknown = await client_a.create_session(model="surfaces-unknown", mode="external")
    assert unknown.config["model_known"] is False
    given = await client_a.create_session(model="surfaces-unknown", mode="external", context_window=32_000)
    assert given.config["context_window"] == 32_000 and given.config["model_known"] is True
    replay_like = await client_a.create_session(model="surfaces-x", compaction={"enabled": False})
    assert replay_like.config["llm_compaction"] is False


async def test_capabilities_admission_refusal_scopes_and_a_skipped_skill(client_a, api_stack, scripted):
    model = "surfaces-capabilities"
    scripted.add(model, [
        {"content": "", "tool_calls": [tool_call("c1", "recall_observation", address="observation://obs-missing")]},
        {"content": "finished"},
    ], sequential=True)
    sid = (await client_a.create_session(model=model, tools="recall")).session_id
    before = await client_a.context(sid)

    task_skill = await client_a.add_capability(sid, "review", "Review every change twice.", kind="skill")
    assert task_skill.status == "admitted" and task_skill.item_id and task_skill.scope == "task"
    step_tool = await client_a.add_capability(sid, "lint", '{"name": "lint", "parameters": {}}',
                                              kind="tool_schema", scope="step")
    assert step_tool.status == "admitted" and step_tool.scope == "step"
    # an unknown model: the 8,000 fallback ceiling less the 512 margin
    assert task_skill.ceiling == 8_000 - 512 and task_skill.margin == 512

    big = _text(60_000)
    refused = await client_a.add_capability(sid, "huge", big)
    assert refused.status == "refused" and refused.item_id is None
    assert refused.need > refused.available
    for figure in (f"estimated need {refused.need}", "safety margin 512", f"ceiling {refused.ceiling}",
                   "model unknown"):
        assert figure in refused.message, refused.message
    skipped = await client_a.add_capability(sid, "deploy", big, kind="manual_skill")
    assert skipped.status == "skipped" and skipped.message.startswith("Skill")
    events = await _events(client_a, sid, "capability.")
    assert [e.kind for e in events] == ["capability.admitted", "capability.admitted", "capability.refused",
                                        "capability.skipped"]
    assert events[-1].payload["message"] == skipped.message

    async with _raw(client_a, api_stack) as raw:
        for body, field in (({"name": "x", "content": "y", "scope": "forever"}, "scope"),
                            ({"name": "x", "content": "", "kind": "skill"}, "content"),
                            ({"name": "x", "content": "y", "kind": "plugin"}, "kind"),
                            ({"content": "y"}, "name")):
            answer = await raw.post(f"/v1/sessions/{sid}/capabilities", json=body)
            assert answer.status_code == 422 and field in answer.text, answer.text
    items = {i.id for i in (await client_a.context(sid)).items}
    assert items == {i.id for i in before.items} | {task_skill.item_id, step_tool.item_id}
    stored = [i.item_id async for i in client_a.iter_items(sid)]
    assert set(stored) == {i.id for i in before.items} | {task_skill.item_id, step_tool.item_id}

    done = await client_a.send_message(sid, "go", wait=60)
    assert done.task is not None and done.task.state == "completed", done.task  # the skipped skill failed nothing
    first, second = _requests_of(scripted, model)
    assert "Review every change twice." in _system_texts(first) and '"name": "lint"' in _system_texts(first)
    assert "Review every change twice." in _system_texts(second)
    assert '"name": "lint"' not in _system_texts(second)  # step scope: cleared after one model step
    after = await client_a.context(sid)
    assert after.capability_tokens == 0  # task scope: cleared when the task ended
    assert not {task_skill.item_id, step_tool.item_id} & {i.id for i in after.items}


async def _recall_session(client: AsyncLanesClient, model: str) -> tuple[str, str]:
    """A hosted session with the recall tool and no LLM compaction, and the observation address
    its first message will have (the system prompt is stored first)."""
    sid = (await client.create_session(model=model, budget_tokens=4_000, tools="recall",
                                       compaction={"enabled": False})).session_id
    status = await client.status(sid)
    while status.next_seq == 0:
        await asyncio.sleep(0.1)
        status = await client.status(sid)
    return sid, ids.observation_id(sid, ids.MAIN_LANE, status.next_seq)


async def test_an_exhaustive_task_refuses_to_end_with_unread_ranges(client_a, scripted):
    model = "surfaces-exhaustive"
    sid, obs = await _recall_session(client_a, model)
    text = _text(9_000, "the document")
    chunk = 1_500

    def recalls(start: int, stop: int) -> list[dict]:
        return [{"content": "", "tool_calls": [tool_call(f"r{o}", "recall_observation",
                                                         address=f"observation://{obs}?offset={o}&limit={chunk}")]}
                for o in range(start, stop, chunk)]

    scripted.add(model, [{"content": "done early"}, *recalls(0, 4_500), {"content": "done halfway"},
                         *recalls(4_500, 9_000), {"content": "read it all"}], sequential=True)
    done = await client_a.send_message(sid, text, wait=60, exhaustive=True)
    assert done.task is not None and done.task.state == "completed", done.task
    assert done.task.answer is not None and done.task.answer.text == "read it all"
    refusals = await _events(client_a, sid, "task.end.refused")
    assert [r.payload["unread_chars"] for r in refusals] == [9_000, 4_500]
    assert obs in refusals[0].payload["unread"]
    # the refusal reached the model as a message naming the ranges to read
    second = _requests_of(scripted, model)[1]
    assert any("cannot end" in str(m.get("content")) and obs in str(m.get("content")) for m in second["messages"])

    # a model that keeps answering without reading fails the task after three refusals in a row
    stubborn = model + "-stubborn"
    scripted.add(stubborn, [{"content": f"done, really ({n})"} for n in range(6)], sequential=True)
    stuck = (await client_a.create_session(model=stubborn, budget_tokens=4_000, tools="recall",
                                           compaction={"enabled": False})).session_id
    failed = await client_a.send_message(stuck, text, wait=60, exhaustive=True)
    assert failed.task is not None and failed.task.state == "failed", failed.task
    assert failed.task.error_type == "IncompleteCoverage" and "without reading anything new" in failed.task.error
    assert failed.task.turns == 4
    idle = [r.payload["idle_refusals"] for r in await _events(client_a, stuck, "task.end.refused")]
    assert idle == [1, 2, 3]
    for _ in range(100):  # written right after the status says the task failed
        failed_events = await _events(client_a, stuck, "task.failed")
        if failed_events:
            break
        await asyncio.sleep(0.1)
    assert [e.payload["error_type"] for e in failed_events] == ["IncompleteCoverage"]

    # a task that is not exhaustive ends at its first answer
    scripted.add(model + "-plain", [{"content": "short answer"}])
    plain = (await client_a.create_session(model=model + "-plain", budget_tokens=4_000, tools="recall")).session_id
    quick = await client_a.send_message(plain, text, wait=60)
    assert quick.task is not None and quick.task.state == "completed" and quick.task.turns == 1


async def test_a_capped_recall_covers_only_what_it_showed(client_a, scripted):
    # a recall asking for the whole document gets what fits the preview; coverage must not
    # count the rest as read, so the exhaustive task is still refused with the remainder
    model = "surfaces-capped-recall"
    sid, obs = await _recall_session(client_a, model)
    scripted.add(model, [{"content": "", "tool_calls": [tool_call(
        "all", "recall_observation", address=f"observation://{obs}?offset=0&limit=9000")]},
        *({"content": f"done ({n})"} for n in range(4))], sequential=True)
    done = await client_a.send_message(sid, _text(9_000, "the document"), wait=60, exhaustive=True)
    assert done.task is not None and done.task.state == "failed", done.task
    shown_text = next(m["content"] for m in _requests_of(scripted, model)[1]["messages"]
                      if m.get("tool_call_id") == "all")
    header = shown_text.split("\n", 1)[0]
    assert "characters per call fit the context" in header, header
    shown = int(header.split("characters 0 to ", 1)[1].split(" ", 1)[0])
    assert 0 < shown < 9_000
    refusals = await _events(client_a, sid, "task.end.refused")
    assert refusals[0].payload["unread_chars"] == 9_000 - shown


async def test_episode_tools_and_pin_note_offered_to_a_hosted_model(client_a, scripted):
    model = "surfaces-episodes"
    scripted.add(model, [
        {"content": "", "tool_calls": [tool_call("e1", "begin_episode", episode_id="look", kind="exploration",
                                                 goal="find the config")]},
        {"content": "", "tool_calls": [tool_call("p1", "pin_note", text="The config lives in settings.py.")]},
        {"content": "", "tool_calls": [tool_call("p2", "pin_note", text=_text(15_000))]},
        {"content": "", "tool_calls": [tool_call("e2", "end_episode", episode_id="look",
                                                 conclusion="settings.py holds it")]},
        {"content": "found it"},
    ], sequential=True)
    created = await client_a.create_session(model=model, budget_tokens=4_000, tools="recall",
                                            context_tools=["begin_episode", "end_episode", "pin_note"])
    sid = created.session_id
    done = await client_a.send_message(sid, "where is the config?", wait=60)
    assert done.task is not None and done.task.state == "completed", done.task

    offered = {t["function"]["name"] for t in _requests_of(scripted, model)[0]["tools"]}
    assert offered == {"recall_observation", "begin_episode", "end_episode", "pin_note"}
    kinds = [e.kind for e in await _events(client_a, sid, "") if e.kind.startswith(("episode.", "note."))]
    assert kinds == ["episode.begun", "note.pinned", "note.refused", "episode.ended"]
    episodes = await client_a.episodes(sid)
    assert [(e.id, e.conclusion) for e in episodes.episodes if e.id == "look"] == [("look", "settings.py holds it")]
    items = [i async for i in client_a.iter_items(sid)]
    answers = {i.tool_call_id: i.text for i in items if i.kind == "tool_result"}
    assert answers["p1"].startswith("pin_note: note pinned")
    assert answers["p2"].startswith("pin_note note refused") and "budget" in answers["p2"]
    notes = [i for i in (await client_a.context(sid)).items if i.kind == "note"]
    assert len(notes) == 1 and notes[0].lifecycle == "pinned"


async def test_pin_note_through_the_api_is_budget_checked(client_a, api_stack, scripted):
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000)).session_id
    pinned = await client_a.pin_note(sid, "Never touch the production database.")
    assert pinned.status == "pinned" and pinned.item_id and pinned.need > 0
    # pinned content stays within the compaction target: 30 % of the 75 % a session without LLM
    # compaction compacts at (workflows.context.config.FALLBACK_PROFILE)
    assert pinned.allowance == int(int(pinned.budget * 0.75) * 0.3)
    refused = await client_a.pin_note(sid, _text(6_000))
    assert refused.status == "refused" and refused.item_id is None and str(refused.need) in refused.message
    async with _raw(client_a, api_stack) as raw:
        for body in ({"text": ""}, {"text": " \n\t "}, {"text": "x" * 20_001}, {"note": "x"}):
            answer = await raw.post(f"/v1/sessions/{sid}/notes", json=body)
            assert answer.status_code == 422, answer.text
    notes = [i for i in (await client_a.context(sid)).items if i.kind == "note"]
    assert [n.id for n in notes] == [pinned.item_id] and notes[0].lifecycle == "pinned"
    kinds = [e.kind for e in await _events(client_a, sid, "note.")]
    assert kinds == ["note.pinned", "note.refused"]


async def test_a_note_an_external_agent_appends_is_budget_checked_before_anything_is_stored(client_a, api_stack,
                                                                                           scripted):
    sid = (await client_a.create_session(mode="external", budget_tokens=2_000)).session_id
    await client_a.append_items(sid, [user_item("go")])
    async with _raw(client_a, api_stack) as raw:
        too_big = await raw.post(f"/v1/sessions/{sid}/items", json={"items": [
            {"kind": "user", "text": "next"}, {"kind": "note", "text": _text(6_000)}]})
        assert too_big.status_code == 400 and "items[1]" in too_big.text and "note refused" in too_big.text, too_big.text
        two = [{"kind": "note", "text": _text(1_000, "one")}, {"kind": "note", "text": _text(1_000, "two")}]
        together = await raw.post(f"/v1/sessions/{sid}/items", json={"items": two})
        assert together.status_code == 400 and "items[0] and items[1] together" in together.text, together.text
        longest = await raw.post(f"/v1/sessions/{sid}/items", json={"items": [{"kind": "note", "text": "x" * 20_001}]})
        assert longest.status_code == 422 and "20,000 characters" in longest.text, longest.text
    assert [i.kind for i in (await client_a.list_items(sid, limit=50)).items] == ["user"]  # nothing refused stored
    kept = await client_a.append_items(sid, [ItemIn(kind="note", text="Never touch the production database.")])
    notes = [i for i in (await client_a.context(sid)).items if i.kind == "note"]
    assert [n.id for n in notes] == kept.item_ids and notes[0].lifecycle == "pinned"


async def test_a_blank_note_an_external_agent_appends_is_refused(client_a, api_stack, scripted):
    sid = (await client_a.create_session(mode="external")).session_id
    await client_a.append_items(sid, [user_item("go")])
    async with _raw(client_a, api_stack) as raw:
        for text in ("", "   ", "\n\t"):
            blank = await raw.post(f"/v1/sessions/{sid}/items",
                                   json={"items": [{"kind": "user", "text": "next"}, {"kind": "note", "text": text}]})
            assert blank.status_code in (400, 422) and "items[1]" in blank.text and "note" in blank.text, blank.text
    assert [i.kind for i in (await client_a.list_items(sid, limit=50)).items] == ["user"]  # nothing refused stored
