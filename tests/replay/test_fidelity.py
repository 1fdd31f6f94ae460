"""The fidelity counter (worker/replay/fidelity.py) on hand-made sessions."""

from __future__ import annotations

from recordings import FORMAT_SYNTHETIC, ToolResultRec, Trajectory, Turn
from worker.replay.fidelity import (
    SessionHistory,
    count_step,
    named_things,
    request_text,
    session_fidelity,
    split_index,
)
from workflows.context import NAMES_HEADER, Item, ItemContent, Kind, Projection, ToolCall, item_message

OBS_BIG = "obs-replay-000003"
OBS_OLD = "obs-replay-000005"
OBS_UNLISTED = "obs-replay-000007"
PREVIEW = 400
# a long tool output: `head_marker` in its head, `middle_symbol` deep in the omitted middle
BIG_OUTPUT = "head_marker found\n" + "x" * 2000 + "\nmiddle_symbol = 4711\n" + "y" * 2000 + "\ntail_marker end"


def _tool_item(seq: int, obs: str, text: str) -> tuple[Item, ItemContent]:
    item = Item(id=f"itm-{seq}", seq=seq, kind=Kind.TOOL_RESULT, role="tool", tool_name="bash",
                tool_call_ids=[f"call-{seq}"], observation_id=obs, size_chars=len(text))
    return item, ItemContent(text=text, tool_call_id=f"call-{seq}", tool_name="bash")


def _session() -> tuple[SessionHistory, list[dict]]:
    """A session of four tool outputs and the request a compacting policy sends after them:
    one output in full, one as a preview (head and tail), one as a reference placeholder
    (address only) and one archived with its address nowhere in the request."""
    history = SessionHistory(system="You are an agent. Use shared_helper when stuck.")
    history.add("Fix parse_config in src/app/config.py", None)  # the task
    outputs = {
        OBS_BIG: BIG_OUTPUT,
        OBS_OLD: "old_function raised KeyError: 'missing section' at line 1234",
        OBS_UNLISTED: "unlisted_name lives in lib/hidden.py",
        "obs-replay-000009": "visible_name is defined in src/app/visible.py; shared_helper too",
    }
    for obs, text in outputs.items():
        history.add(text, obs)
    big, big_content = _tool_item(3, OBS_BIG, BIG_OUTPUT)
    old, old_content = _tool_item(5, OBS_OLD, outputs[OBS_OLD])
    new, new_content = _tool_item(9, "obs-replay-000009", outputs["obs-replay-000009"])
    rendered = [item_message(big, big_content, Projection.COMPACT, PREVIEW),
                item_message(old, old_content, Projection.REFERENCE, PREVIEW),
                item_message(new, new_content, Projection.FULL, PREVIEW)]
    messages = [{"role": "system", "content": history.system},
                {"role": "user", "content": "Fix parse_config in src/app/config.py"},
                *(m for m in rendered if m is not None)]
    return history, messages


def test_named_things_kinds() -> None:
    action = ("THOUGHT: `parse_config` raises ValueError in src/app/config.py (see setup.cfg, line 1234); "
              'grep for "invalid literal for int" and os.path.join; it\'s fine, don\'t worry.\n'
              "cat observation://obs-replay-000003 and check 42")
    names = named_things(action)
    assert names["parse_config"] == "symbol"
    assert names["ValueError"] == "symbol"
    assert names["os.path.join"] == "symbol"
    assert names["src/app/config.py"] == "path"
    assert names["setup.cfg"] == "path"
    assert names["1234"] == "number"
    assert names["invalid literal for int"] == "string"
    assert "42" not in names  # fewer than 3 digits
    assert "THOUGHT" not in names and "worry" not in names  # plain words are not names
    assert not any("obs-" in n or "observation" in n for n in names)  # addresses are not names
    assert not any("fine, don" in n for n in names)  # apostrophes of prose are not quotes


def test_names_count_only_when_seen_earlier_and_not_in_the_system_prompt() -> None:
    history, _ = _session()
    candidates = history.candidates("use shared_helper, never_seen_name and parse_config")
    assert set(candidates) == {"parse_config"}


def test_visible_in_full_text_preview_head_and_task() -> None:
    history, messages = _session()
    action = "visible_name in src/app/visible.py; head_marker and tail_marker; parse_config"
    result = count_step(history.candidates(action), request_text(messages), history.stored)
    assert (result.named, result.visible, result.missed) == (5, 5, 0)


def test_preview_middle_is_a_miss_that_recall_of_its_address_finds() -> None:
    history, messages = _session()
    text = request_text(messages)
    assert "middle_symbol" not in text and f"observation://{OBS_BIG}" in text  # the preview hid it
    result = count_step(history.candidates("edit middle_symbol to 4711"), text, history.stored)
    assert (result.named, result.missed, result.recallable) == (2, 2, 2)
    assert result.by_kind == {"symbol": [1, 1, 1], "number": [1, 1, 1]}


def test_archived_behind_a_placeholder_is_recallable_unlisted_is_not() -> None:
    history, messages = _session()
    text = request_text(messages)
    result = count_step(history.candidates("old_function and 'missing section'"), text, history.stored)
    assert (result.named, result.missed, result.recallable) == (2, 2, 2)
    result = count_step(history.candidates("unlisted_name in lib/hidden.py"), text, history.stored)
    assert (result.named, result.missed, result.recallable) == (2, 2, 0)
    assert result.miss_rate == 1.0 and result.unrecovered_rate == 1.0


def test_call_arguments_in_the_request_count_as_visible() -> None:
    history = SessionHistory()
    history.add("look at pkg/mod_name.py", None)
    messages = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat pkg/mod_name.py"}'}},
    ]}]
    result = count_step(history.candidates("sed -i s/a/b/ pkg/mod_name.py"), request_text(messages), history.stored)
    assert (result.named, result.visible) == (1, 1)


def _trajectory(turns: int) -> Trajectory:
    """Each answer reads the next file, naming the symbol the previous output printed."""
    out = []
    for j in range(turns):
        call = ToolCall(id=f"call-{j}", name="bash", arguments=f'{{"command": "grep symbol_{j - 1} file_{j}.py"}}')
        result = ToolResultRec(tool_call_id=f"call-{j}", tool_name="bash", output=f"symbol_{j} defined\n" + "z" * 300,
                               exit_code=0, render_role="tool")
        out.append(Turn(assistant_text=f"Next: symbol_{j - 1}.", tool_calls=[call], results=[result]))
    return Trajectory(id="fidelity", source_format=FORMAT_SYNTHETIC, system="You are terse.", task="Find symbol_x.",
                      turns=out, tool_protocol="tool_calls")


def test_full_never_misses_masking_loses_older_outputs_for_good() -> None:
    traj = _trajectory(8)
    results = session_fidelity(traj, ["full", "masking-1", "lanes"], 16_000)
    full, masking, lanes = results["full"], results["masking-1"], results["lanes"]
    assert full.steps == 8 and full.named > 0 and full.missed == 0
    assert masking.named == full.named
    # step k names symbol_{k-1}, the newest output: masking-1 keeps it; but the action names
    # file_k.py only after it was called, so look at a masking that keeps nothing
    assert masking.missed == 0
    nothing = session_fidelity(traj, ["masking-0"], 16_000)["masking-0"]
    assert nothing.missed > 0 and nothing.recallable == 0  # masked output has no address
    assert lanes.missed == 0  # a small session never compacts: lanes sends everything


def test_stride_counts_every_nth_step_only() -> None:
    traj = _trajectory(9)
    every = session_fidelity(traj, ["full"], 16_000)["full"]
    third = session_fidelity(traj, ["full"], 16_000, stride=3)["full"]
    assert (every.steps, third.steps) == (9, 3)


def test_a_name_only_in_the_checkpoints_index_is_a_miss_counted_apart() -> None:
    """The checkpoint lists names archived items mentioned: a bare name is nothing the model can
    act on, so it is a miss (index-only), where the figure before counted it as visible."""
    history, messages = _session()
    messages.append({"role": "system", "content": "[Checkpoint] archived seq 1-9.\n"
                                                  f"{NAMES_HEADER}unlisted_name, lib/hidden.py, visible_name"})
    text = request_text(messages)
    content, index = split_index(text)
    assert "unlisted_name" in index and "unlisted_name" not in content and "archived seq 1-9" in content
    result = count_step(history.candidates("unlisted_name in lib/hidden.py; visible_name"), text, history.stored)
    assert (result.named, result.visible, result.missed, result.index_only) == (3, 1, 2, 2)
    assert result.miss_rate == 2 / 3 and result.index_counted_rate == 0.0  # the old figure: all "seen"
    assert result.as_dict()["miss_rate_index_counted"] == 0.0
