"""Request formats: Responses items in, Chat / Responses / Anthropic requests out.

Pure conversions on hand-built items: round trips, the pairing invariant in every format,
reasoning kept and dropped with its turn, merged Anthropic turns and cache breakpoints.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.context.content import ItemContent
from workflows.context.formats.anthropic_request import (
    FIRST_TURN_NOTE,
    anthropic_request,
    anthropic_tools,
    breakpoint_messages,
)
from workflows.context.formats.request_formats import format_request
from workflows.context.formats.responses_input import FormatError, from_responses_items
from workflows.context.formats.responses_request import responses_input, responses_tools
from workflows.context.items import Item, Projection
from workflows.context.render import render_turns

ROLE = {"user": "user", "system": "system", "assistant": "assistant", "tool_result": "tool"}
PREVIEW = 2_000


def _store(responses: list[dict], system: str | None = "Be brief.") -> tuple[dict, dict, list[str]]:
    """Items and contents as ingest stores them (a system prompt first), and their ids in order."""
    items: dict[str, Item] = {}
    contents: dict[str, ItemContent] = {}
    order = []
    if system is not None:
        items["sys"] = Item(id="sys", seq=0, kind="system", role="system")
        contents["sys"] = ItemContent(text=system)
        order.append("sys")
    for n, turn in enumerate(from_responses_items(responses), start=1):
        item_id = f"i{n}"
        items[item_id] = Item(id=item_id, seq=n, kind=turn.kind, role=ROLE[turn.kind],
                              tool_call_ids=[c.id for c in turn.tool_calls] or ([turn.tool_call_id] if turn.tool_call_id else []),
                              tool_name=turn.tool_name, observation_id=f"obs-{n}" if turn.kind == "tool_result" else None)
        contents[item_id] = ItemContent(text=turn.text, tool_calls=turn.tool_calls, tool_call_id=turn.tool_call_id,
                                        tool_name=turn.tool_name, responses_items=turn.source)
        order.append(item_id)
    return items, contents, order


def _render(items, contents, order, projections: dict[str, Projection] | None = None):
    entries = [(i, (projections or {}).get(i, Projection.FULL)) for i in order]
    return render_turns(entries, items, contents, PREVIEW)


def _user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _reasoning(n: int) -> dict:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": f"thought {n}"}],
            "encrypted_content": f"gAAAA{n}" * 20}


def _call(call_id: str, name: str = "read_file", path: str = "a.py") -> dict:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": json.dumps({"path": path}), "status": "completed"}


def _output(call_id: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _answer(text: str, n: int = 1) -> dict:
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


CONVERSATION = [
    _user("fix the bug"),
    _reasoning(1), _call("c1"), _call("c2", path="b.py"),
    _output("c1", "print(1)\n"), _output("c2", "print(2)\n"),
    _reasoning(2), _answer("Fixed.", 2),
]


# --- Responses items in ----------------------------------------------------------------------


def test_a_run_of_assistant_side_items_is_one_turn_that_keeps_them_verbatim():
    turns = from_responses_items(CONVERSATION)
    assert [t.kind for t in turns] == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    first = turns[1]
    assert first.source == CONVERSATION[1:4]  # the reasoning belongs to the turn it precedes
    assert [(c.id, c.name) for c in first.tool_calls] == [("c1", "read_file"), ("c2", "read_file")]
    assert first.text == ""
    assert (turns[2].tool_call_id, turns[2].tool_name, turns[2].text) == ("c1", "read_file", "print(1)\n")
    assert turns[4].text == "Fixed." and turns[4].source == CONVERSATION[6:]


def test_easy_messages_developer_messages_and_text_parts():
    turns = from_responses_items([
        {"role": "developer", "content": "Use tabs."},
        {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"role": "assistant", "content": "first"}, {"role": "assistant", "content": "second"},
    ])
    assert [(t.kind, t.text) for t in turns] == [("system", "Use tabs."), ("user", "ab"),
                                                ("assistant", "first\n\nsecond")]


@pytest.mark.parametrize("bad,index,words", [
    ([_user("x"), {"type": "web_search_call", "id": "ws_1"}], 1, "'web_search_call' are not supported"),
    ([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}], 0, "'input_image' is not supported"),
])
def test_what_cannot_be_stored_is_refused_naming_the_item(bad, index, words):
    with pytest.raises(FormatError, match=rf"responses_items\[{index}\]") as raised:
        from_responses_items(bad)
    assert words in str(raised.value)


# --- Responses out ---------------------------------------------------------------------------


def test_kept_turns_pass_back_exactly_what_came_in_with_instructions_from_the_system_prompt():
    items, contents, order = _store(CONVERSATION)
    instructions, out = responses_input(_render(items, contents, order), contents)
    assert instructions == "Be brief."
    assert out == CONVERSATION


def test_a_compacted_or_omitted_turn_drops_its_reasoning_and_ids():
    items, contents, order = _store(CONVERSATION)
    # the first assistant turn compacted: its calls stay (results still sent), reasoning and ids go
    _, out = responses_input(_render(items, contents, order, {"i2": Projection.REFERENCE}), contents)
    assert [i["type"] for i in out[:5]] == ["message", "function_call", "function_call", "function_call_output",
                                            "function_call_output"]
    assert "id" not in out[1] and out[1]["call_id"] == "c1"
    assert out[-2:] == CONVERSATION[-2:]  # the later turn is still whole, its reasoning with it
    # a turn whose results are omitted loses its calls, and with them the whole turn and its reasoning
    _, out = responses_input(_render(items, contents, order, {"i3": Projection.OMITTED, "i4": Projection.OMITTED}),
                             contents)
    assert _reasoning(1) not in out and not any(i["type"] == "function_call" for i in out)
    assert _reasoning(2) in out


def test_a_call_dropped_by_pairing_leaves_the_rest_of_the_kept_turn_verbatim():
    items, contents, order = _store(CONVERSATION)
    _, out = responses_input(_render(items, contents, order, {"i4": Projection.OMITTED}), contents)
    assert out[1:3] == [_reasoning(1), _call("c1")]  # c2 has no result sent: its call is not sent either
    assert [i.get("call_id") for i in out if i["type"].startswith("function_call")] == ["c1", "c1"]


def test_reasoning_before_a_dropped_call_is_dropped_with_it():
    # found by the property test below: a turn whose text is kept while its one call goes
    # (its result is omitted) would pass back the call's reasoning with nothing after it
    conversation = [_user("go"), _answer("looking", 1), _reasoning(1), _call("c1"), _output("c1", "a = 1")]
    items, contents, order = _store(conversation)
    _, out = responses_input(_render(items, contents, order, {order[-1]: Projection.OMITTED}), contents)
    assert [i["type"] for i in out] == ["message", "message"] and _reasoning(1) not in out
    # the reasoning of a kept call stays, right before it, though the text before them is kept too
    _, out = responses_input(_render(items, contents, order), contents)
    assert out == conversation


def _conversations():
    """Random conversations: user messages, assistant turns with or without reasoning, text
    and calls, each call answered before the next turn."""
    @st.composite
    def build(draw):
        items, n = [], 0
        for _ in range(draw(st.integers(1, 6))):
            items.append(_user(draw(st.text(min_size=1, max_size=20))))
            for _ in range(draw(st.integers(0, 3))):
                n += 1
                if draw(st.booleans()):
                    items.append(_reasoning(n))
                calls = [f"c{n}-{k}" for k in range(draw(st.integers(0, 3)))]
                if draw(st.booleans()) or not calls:
                    items.append(_answer(draw(st.text(min_size=1, max_size=20)), n))
                items += [_call(c) for c in calls] + [_output(c, draw(st.text(max_size=30))) for c in calls]
        return items
    return build()


@settings(max_examples=150, deadline=None)
@given(conversation=_conversations(), data=st.data())
def test_every_format_keeps_calls_and_results_paired_and_reasoning_with_its_kept_turn(conversation, data):
    items, contents, order = _store(conversation)
    projections = {i: data.draw(st.sampled_from(list(Projection))) for i in order[1:]}
    turns = _render(items, contents, order, projections)
    full = {i: p for i, p in projections.items() if p == Projection.FULL}
    if len(full) == len(projections):
        assert responses_input(turns, contents)[1] == conversation  # round trip
    _, out = responses_input(turns, contents)
    # responses: every call answered right after its turn's calls, every output after its call
    open_calls: list[str] = []
    for entry in out:
        if entry["type"] == "function_call":
            open_calls.append(entry["call_id"])
        elif entry["type"] == "function_call_output":
            assert entry["call_id"] in open_calls
            open_calls.remove(entry["call_id"])
        else:
            assert not open_calls, "a call without its output"
    assert not open_calls
    # reasoning passes back only inside a kept turn, right before what it accompanies: the
    # stored output it preceded (the nearest one after it), when that output is sent
    sent = [e for e in out if e["type"] == "reasoning"]
    kept = [s for i, p in full.items() if any(t.item_id == i for t in turns)
            for k, s in enumerate(contents[i].responses_items) if s["type"] == "reasoning"
            and next((o for o in contents[i].responses_items[k:] if o["type"] != "reasoning"), None) in out]
    assert sent == kept
    for index, entry in enumerate(out):
        if entry["type"] == "reasoning":
            assert index + 1 < len(out) and out[index + 1]["type"] in ("reasoning", "message", "function_call")
    # anthropic: alternating turns, each tool_use answered in the very next user turn
    request = anthropic_request([t.message for t in turns], data.draw(st.integers(0, len(turns))))
    _check_anthropic(request.messages)


def _check_anthropic(messages: list[dict]) -> None:
    assert all(a["role"] != b["role"] for a, b in zip(messages, messages[1:], strict=False))
    if messages:
        assert messages[0]["role"] == "user"
    for index, message in enumerate(messages):
        assert message["content"], "an empty turn"
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if results:
            previous = messages[index - 1]["content"] if index else []
            assert results == [b["id"] for b in previous if b["type"] == "tool_use"]
            kinds = [b["type"] for b in message["content"]]
            assert kinds[: len(results)] == ["tool_result"] * len(results)  # results first
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            assert uses == [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
        assert all(b.get("text") != "" for b in message["content"])


# --- chat ------------------------------------------------------------------------------------


def test_chat_passes_reasoning_content_back_only_while_the_turn_is_whole():
    items = {"a": Item(id="a", seq=1, kind="assistant", role="assistant"),
             "u": Item(id="u", seq=0, kind="user", role="user")}
    contents = {"a": ItemContent(text="42", reasoning_content="6 times 7"), "u": ItemContent(text="6*7?")}
    full = render_turns([("u", Projection.FULL), ("a", Projection.FULL)], items, contents, PREVIEW)
    assert full[1].message == {"role": "assistant", "content": "42", "reasoning_content": "6 times 7"}
    reference = render_turns([("u", Projection.FULL), ("a", Projection.REFERENCE)], items, contents, PREVIEW)
    assert "reasoning_content" not in reference[1].message
    # no other format has a place for chat-style reasoning
    out = format_request("responses", full, contents, [], 0)
    assert "6 times 7" not in json.dumps(out.input)
    assert "6 times 7" not in json.dumps(format_request("anthropic", full, contents, [], 0).messages)


# --- anthropic -------------------------------------------------------------------------------


def _chat() -> list[dict]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "pinned: use tabs"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "user", "content": "also this"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks"},
    ]


def test_anthropic_merges_same_role_turns_and_renders_tool_blocks():
    request = anthropic_request(_chat(), stable_prefix_messages=2)
    assert request.system == [{"type": "text", "text": "Be brief."}]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user", "assistant", "user"]
    first, call, results = request.messages[0], request.messages[1], request.messages[2]
    assert [b["text"] for b in first["content"]] == ["pinned: use tabs", "fix it"]
    assert call["content"][1] == {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}}
    assert call["content"][2]["input"] == {"arguments": "not json"}  # kept, as an object
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "text"]
    assert "content" not in results["content"][1]  # no empty text is sent
    _check_anthropic(request.messages)


def test_cache_breakpoints_end_the_stable_segment_the_unchanged_history_and_the_request():
    chat = _chat()
    request = anthropic_request(chat, stable_prefix_messages=2)
    # stable: messages 0-1; newest turn: the last answer (7) and after, so history ends at 6
    assert request.breakpoints == breakpoint_messages(chat, 2) == [1, 6, 8]
    marked = [b for m in request.messages for b in m["content"] if "cache_control" in b]
    assert [b.get("text") for b in marked] == ["pinned: use tabs", "also this", "thanks"]
    assert all(b["cache_control"] == {"type": "ephemeral"} for b in marked)
    # a stable segment that is the system prompt alone is cached on the system block
    only_system = anthropic_request(chat, stable_prefix_messages=1)
    assert only_system.system[-1]["cache_control"] == {"type": "ephemeral"}
    # the unchanged prefix is the previous request: it is where the previous request ended
    previous = anthropic_request(chat[:7], stable_prefix_messages=2)
    assert previous.breakpoints[-1] == 6
    # coinciding points are one breakpoint; never more than Anthropic's 4
    assert breakpoint_messages(chat[:2], 2) == [1]
    assert anthropic_request([], 0).breakpoints == []


def test_the_checkpoint_and_other_engine_texts_are_system_blocks_never_a_user_turn():
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "pinned: use tabs"},
        {"role": "system", "content": "[checkpoint] earlier: read a.py"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Done."},
        {"role": "system", "content": "[episode ended] fixed a.py"},
        {"role": "user", "content": "thanks"},
    ]
    request = anthropic_request(chat, stable_prefix_messages=3)
    assert [b["text"] for b in request.system] == ["Be brief.", "[checkpoint] earlier: read a.py",
                                                   "[episode ended] fixed a.py"]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]
    assert [b["text"] for b in request.messages[0]["content"]] == ["pinned: use tabs", "fix it"]
    assert "[checkpoint]" not in json.dumps(request.messages)
    # the stable segment ends on the checkpoint: its system block carries the breakpoint
    assert request.system[1]["cache_control"] == {"type": "ephemeral"}
    _check_anthropic(request.messages)


def test_a_request_starting_with_an_answer_gets_a_user_turn_first():
    request = anthropic_request([{"role": "system", "content": "s"}, {"role": "assistant", "content": "hi"}], 1)
    assert request.messages[0] == {"role": "user", "content": [{"type": "text", "text": FIRST_TURN_NOTE}]}


def test_tools_in_each_format():
    chat = [{"type": "function", "function": {"name": "bash", "description": "run",
                                              "parameters": {"type": "object", "properties": {}}}}]
    assert responses_tools(chat) == [{"type": "function", "name": "bash", "description": "run",
                                      "parameters": {"type": "object", "properties": {}}, "strict": False}]
    assert anthropic_tools(chat) == [{"name": "bash", "description": "run",
                                      "input_schema": {"type": "object", "properties": {}}}]
