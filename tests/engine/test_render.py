"""Observation addresses, projection text and chat-message rendering."""

import json

import pytest

from tests.engine.sim import Sim, big
from workflows.context import engine as E
from workflows.context.items import Item, Projection


def test_observation_address_is_canonical():
    assert E.observation_address("obs-7c2f") == "observation://obs-7c2f"
    assert E.observation_address("7c2f") == "observation://obs-7c2f"


def test_observation_uri_accepts_offset_and_limit():
    ref = E.parse_observation_uri("observation://obs-7c2f?offset=12000&limit=4000")
    assert (ref.obs_id, ref.offset, ref.limit) == ("obs-7c2f", 12000, 4000)
    assert E.parse_observation_uri("observation://obs-7c2f").offset is None


@pytest.mark.parametrize("uri,complaint", [
    ("http://obs-1", "must start with"),
    ("observation://", "no observation id"),
    ("observation://7c2f", "must look like"),
    ("observation://obs-1?offset=-3", "offset must be a non-negative integer"),
    ("observation://obs-1?limit=abc", "limit must be a non-negative integer"),
    ("observation://obs-1?limit=0", "limit must be at least 1"),
    ("observation://obs-1?offset=1&offset=2", "given twice"),
    ("observation://obs-1?page=2", "unknown query parameter 'page'"),
])
def test_observation_uri_errors_name_what_is_wrong(uri, complaint):
    with pytest.raises(ValueError, match=complaint):
        E.parse_observation_uri(uri)


def _tool_item(size: int, obs: str = "obs-abc") -> tuple[Item, E.ItemContent]:
    text = big(size)
    item = Item(id="t", seq=1, kind="tool_result", role="tool", tool_name="read", observation_id=obs,
                size_chars=len(text), tool_call_ids=["c1"])
    return item, E.ItemContent(text=text, tool_call_id="c1", tool_name="read")


def test_full_projection_is_the_exact_text():
    item, content = _tool_item(5000)
    assert E.projection_text(item, content, Projection.FULL, 1000) == content.text


def test_large_result_shows_beginning_and_end_with_the_address_between():
    item, content = _tool_item(5000)
    text = E.projection_text(item, content, Projection.COMPACT, 1000)
    head, marker, tail = text.split("\n[", 1)[0], text.split("\n[", 1)[1].split("]\n", 1)[0], text.rsplit("]\n", 1)[1]
    assert content.text.startswith(head) and content.text.endswith(tail)
    assert len(head) + len(tail) <= 1000
    assert "4000 characters omitted" in marker
    assert "observation://obs-abc" in marker and "recall_observation" in marker


def test_reference_projection_names_the_tool_and_address():
    item, content = _tool_item(5000)
    assert E.projection_text(item, content, Projection.REFERENCE, 1000) == (
        "Earlier read output was compacted.\nFull output: observation://obs-abc")
    assert E.projection_text(item, content, Projection.MINIMAL_REFERENCE, 1000) == "Full output: observation://obs-abc"
    assert E.projection_text(item, content, Projection.OMITTED, 1000) == ""


def test_oversized_user_input_is_a_bounded_authoritative_source_reference():
    text = big(100_000, "spec")
    item = Item(id="u", seq=1, kind="user", role="user", observation_id="obs-u1", size_chars=len(text))
    rendered = E.projection_text(item, E.ItemContent(text=text), Projection.REFERENCE, 16000)
    assert rendered.startswith("Authoritative source: observation://obs-u1 (100000 characters")
    assert "recall_observation" in rendered and "offset=" in rendered
    assert len(rendered) < 2600
    head, tail = rendered.split("Beginning:\n", 1)[1].split("\nEnd (from offset ", 1)
    offset, tail = tail.split("):\n", 1)
    # the beginning and the end, each exact, the end's offset in the stored text
    assert text.startswith(head) and text.endswith(tail) and text[int(offset):] == tail
    assert len(head) > len(tail) > 0


def _entries(sim: Sim) -> list[tuple[str, E.Projection]]:
    return sim.request().pairs


def test_assistant_tool_calls_render_as_openai_function_calls():
    sim = Sim()
    sim.user("go")
    a, _ = sim.exchange("ls", "a.py\nb.py")
    messages = sim.messages(sim.request())
    assistant = messages[1]
    assert assistant["tool_calls"] == [{"id": a.tool_call_ids[0], "type": "function",
                                        "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]
    assert messages[2] == {"role": "tool", "tool_call_id": a.tool_call_ids[0], "content": "a.py\nb.py"}


def test_text_protocol_observations_render_with_their_own_role():
    sim = Sim()
    sim.user("go")
    sim.assistant("```bash\nls\n```")
    sim.tool("", "<returncode>0</returncode>\n<output>a.py</output>", role="user", arguments="ls")
    messages = sim.messages(sim.request())
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert "tool_calls" not in messages[1]


def test_omitted_tool_results_drop_the_calls_and_empty_assistant_messages():
    sim = Sim()
    sim.user("go")
    a1 = sim.assistant("I will look.", [("bash", '{"command": "ls"}')])
    t1 = sim.tool(a1.tool_call_ids[0], "a.py")
    a2 = sim.assistant("", [("bash", '{"command": "cat a.py"}')])
    t2 = sim.tool(a2.tool_call_ids[0], "print(1)")
    entries = [e for e in _entries(sim) if e[0] not in (t1.id, t2.id)]
    messages = E.render_messages(entries, sim.state.items, sim.contents, sim.preview)
    assert messages == [{"role": "user", "content": "go"}, {"role": "assistant", "content": "I will look."}]


def test_tool_message_without_its_call_becomes_a_user_message():
    sim = Sim()
    sim.user("go")
    a1, t1 = sim.exchange("ls", "a.py")
    entries = [e for e in _entries(sim) if e[0] != a1.id]
    messages = E.render_messages(entries, sim.state.items, sim.contents, sim.preview)
    assert all(m["role"] != "tool" for m in messages)
    assert messages[-1]["role"] == "user" and "a.py" in messages[-1]["content"]


def test_messages_between_a_call_and_its_result_are_deferred_after_the_result():
    sim = Sim()
    sim.user("go")
    a1 = sim.assistant("", [("load_skill", "{}")])
    note = sim.note("remember the style guide")
    t1 = sim.tool(a1.tool_call_ids[0], "skill loaded", name="load_skill")
    messages = sim.messages(sim.request())
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[3]["content"] == "remember the style guide"
    assert sim.state.order[-3:] == [a1.id, note.id, t1.id]


def test_rendering_is_deterministic_and_byte_stable():
    def build() -> str:
        sim = Sim()
        sim.system()
        sim.user("fix it")
        for n in range(5):
            sim.exchange(f"cat f{n}.py", big(20_000 + n, f"f{n}"), text=f"step {n}")
        return json.dumps(sim.messages(sim.request()), ensure_ascii=False)

    assert build() == build()


def test_large_tool_call_arguments_stay_valid_json_when_bounded():
    sim = Sim()
    sim.user("go")
    arguments = json.dumps({"command": "cat > f.py <<EOF\n" + big(5000) + "\nEOF"})
    a = sim.assistant("", [("bash", arguments)])
    message = E.item_message(a, sim.contents[a.id], Projection.REFERENCE, sim.preview)
    bounded = message["tool_calls"][0]["function"]["arguments"]
    assert len(bounded) < 500
    assert json.loads(bounded)["omitted_chars"] > 4000
