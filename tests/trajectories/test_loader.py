"""recordings against the real recorded sessions and against bad input."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from recordings import (
    FORMAT_CLAUDE_CODE,
    FORMAT_MSWEA_1,
    FORMAT_MSWEA_1_1,
    Trajectory,
    TrajectoryError,
    detect_format,
    iter_trajectories,
    load_trajectory,
    recorded_outputs,
    synthetic_trajectory,
    trajectory_files,
)

from .conftest import CLAUDE, DEEPSEEK, GEMINI, raw_json, raw_jsonl

BASH_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks"


def assert_calls_answered_once(traj: Trajectory) -> None:
    for k, turn in enumerate(traj.turns):
        call_ids = [c.id for c in turn.tool_calls]
        result_ids = [r.tool_call_id for r in turn.results]
        assert sorted(call_ids) == sorted(result_ids), (traj.id, k)
        assert len(set(call_ids)) == len(call_ids), (traj.id, k)
        names = {c.id: c.name for c in turn.tool_calls}
        for r in turn.results:
            assert r.tool_name == names[r.tool_call_id]


@pytest.fixture(scope="module")
def everything(data_root: Path) -> list[tuple[Path, Trajectory]]:
    files = [f for f, _ in trajectory_files([data_root])]
    return list(zip(files, iter_trajectories([data_root]), strict=True))


# ----------------------------------------------------------------- whole data set


def test_every_file_loads(everything: list[tuple[Path, Trajectory]]) -> None:
    by_folder: dict[str, list[Trajectory]] = {}
    for path, traj in everything:
        by_folder.setdefault(traj.id.split("/", 1)[0], []).append(traj)
        assert not path.name.lower().startswith(("license", "readme"))
    assert {k: len(v) for k, v in by_folder.items()} == {
        "claude-code": 4, "mini-swe-agent-deepseek": 61, "mini-swe-agent-gemini": 150}
    assert {t.source_format for t in by_folder["mini-swe-agent-gemini"]} == {FORMAT_MSWEA_1}
    assert {t.source_format for t in by_folder["mini-swe-agent-deepseek"]} == {FORMAT_MSWEA_1_1}
    assert {t.source_format for t in by_folder["claude-code"]} == {FORMAT_CLAUDE_CODE}
    ids = [t.id for _, t in everything]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # one root folder: sorted by relative path
    for _, traj in everything:
        assert traj.task
        assert_calls_answered_once(traj)
        assert traj.tool_protocol == ("text" if traj.source_format == FORMAT_MSWEA_1
                                      else "tool_calls")
        assert len(recorded_outputs(traj)) == sum(len(t.tool_calls) for t in traj.turns)


def test_ids_are_stable_relative_paths(data_root: Path, tmp_path: Path) -> None:
    f = DEEPSEEK / "deepseek_chat_dev" / "marshmallow-code__marshmallow-1343.traj.json.gz"
    expected = "mini-swe-agent-deepseek/deepseek_chat_dev/marshmallow-code__marshmallow-1343.traj"
    assert load_trajectory(f).id == expected
    assert next(iter_trajectories([DEEPSEEK / "deepseek_chat_dev"])).id.startswith(
        "mini-swe-agent-deepseek/deepseek_chat_dev/")
    # Outside the data root: relative to the folder given, or just the file name.
    (tmp_path / "sub").mkdir()
    shutil.copy(f, tmp_path / "sub" / f.name)
    (tmp_path / "LICENSE.md").write_text("MIT")
    (tmp_path / "sub" / "README.md").write_text("notes")
    assert [t.id for t in iter_trajectories([tmp_path])] == [
        "sub/marshmallow-code__marshmallow-1343.traj"]
    assert load_trajectory(tmp_path / "sub" / f.name).id == "marshmallow-code__marshmallow-1343.traj"
    assert load_trajectory(tmp_path / "sub" / f.name, root=tmp_path).id == \
        "sub/marshmallow-code__marshmallow-1343.traj"


# ----------------------------------------------------------------- mini-swe-agent-1


def test_mini_swe_agent_1_matches_raw_files(data_root: Path) -> None:
    format_errors = 0
    for f in sorted(GEMINI.glob("*.json.gz")):
        raw = raw_json(f)
        msgs = raw["messages"]
        traj = load_trajectory(f)
        assert traj.system == msgs[0]["content"]
        assert traj.task == msgs[1]["content"]
        assistants = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(traj.turns) == len(assistants)
        for k, (turn, i) in enumerate(zip(traj.turns, assistants, strict=True)):
            assert turn.assistant_text == msgs[i]["content"]
            blocks = BASH_RE.findall(msgs[i]["content"])
            follow = msgs[i + 1]["content"] if i + 1 < len(msgs) else None
            if len(blocks) == 1:
                (call,) = turn.tool_calls
                assert call.id == f"call-{k}" and call.name == "bash"
                assert json.loads(call.arguments) == {"command": blocks[0].strip()}
                (res,) = turn.results
                assert res.output == follow  # byte-identical to the raw observation
                assert res.render_role == "user"
                m = re.match(r"<returncode>(-?\d+)</returncode>", follow)
                assert res.exit_code == (int(m.group(1)) if m else None)
                assert turn.user_after == []
            else:  # rejected by mini-swe-agent: nothing ran, the format error is user text
                format_errors += 1
                assert turn.tool_calls == [] and turn.results == []
                assert turn.user_after == [follow] and follow.startswith(FORMAT_ERROR)
        # the submission is the last observation
        assert traj.turns[-1].results[-1].output == raw["info"]["submission"]
    assert format_errors == 177


def test_mini_swe_agent_1_concrete_file(data_root: Path) -> None:
    traj = load_trajectory(GEMINI / "astropy__astropy-13033.traj.json.gz")
    assert traj.id == "mini-swe-agent-gemini/astropy__astropy-13033.traj"
    first = traj.turns[0]
    assert json.loads(first.tool_calls[0].arguments) == {"command": "ls -R astropy/timeseries"}
    assert first.results[0].exit_code == 0
    assert first.results[0].output.startswith("<returncode>0</returncode>\n<output>\nastropy/")
    last = traj.turns[-1]
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in json.loads(last.tool_calls[0].arguments)[
        "command"]
    assert last.results[0].exit_code is None and last.results[0].output.startswith("diff --git")
    codes = {r.exit_code for t in traj.turns for r in t.results}
    assert 0 in codes


def test_mini_swe_agent_1_timeout_and_nonzero_codes(data_root: Path) -> None:
    traj = load_trajectory(GEMINI / "django__django-13809.traj.json.gz")
    timeouts = [r for t in traj.turns for r in t.results
                if r.output.startswith("The last command <command>")]
    assert timeouts and all(r.exit_code is None for r in timeouts)
    all_codes = {r.exit_code for f in sorted(GEMINI.glob("*.json.gz"))[:60]
                 for t in load_trajectory(f).turns for r in t.results}
    assert {0, 1, 2} <= all_codes


# ----------------------------------------------------------------- mini-swe-agent-1.1


def test_mini_swe_agent_1_1_matches_raw_files(data_root: Path) -> None:
    zero_turn = 0
    for f in sorted(DEEPSEEK.rglob("*.json.gz")):
        raw = raw_json(f)
        msgs = raw["messages"]
        traj = load_trajectory(f)
        assert traj.system == msgs[0]["content"] and traj.task == msgs[1]["content"]
        assistants = [m for m in msgs if m["role"] == "assistant"]
        assert len(traj.turns) == len(assistants)
        zero_turn += not traj.turns
        tool_msgs = {m["tool_call_id"]: m for m in msgs if m["role"] == "tool"}
        for turn, m in zip(traj.turns, assistants, strict=True):
            assert turn.assistant_text == m["content"]
            assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
                (tc["id"], tc["function"]["name"], tc["function"]["arguments"])
                for tc in m["tool_calls"]]
            for r in turn.results:
                assert r.render_role == "tool"
                if r.tool_call_id in tool_msgs:
                    tm = tool_msgs[r.tool_call_id]
                    assert r.output == tm["content"]  # byte-identical
                    # the provider metadata agrees with the code parsed from the content
                    assert r.exit_code == tm["extra"]["returncode"]
                else:  # the submit call: answered by the exit message (the submission)
                    assert msgs[-1]["role"] == "exit"
                    assert r.output == msgs[-1]["content"] == raw["info"]["submission"]
        if raw["info"]["exit_status"] == "Submitted":
            assert "COMPLETE_TASK_AND_SUBMIT" in traj.turns[-1].tool_calls[-1].arguments
    assert zero_turn == 5  # runs that died on provider errors before the first answer


def test_mini_swe_agent_1_1_edge_cases(data_root: Path) -> None:
    traj = load_trajectory(
        DEEPSEEK / "deepseek_lite_dev_noparallel" / "pvlib__pvlib-python-1606.traj.json.gz")
    after = [u for t in traj.turns for u in t.user_after]
    assert len(after) == 1 and after[0].startswith("Tool call error:")
    exc = load_trajectory(DEEPSEEK / "deepseek_chat_dev" / "pydicom__pydicom-1256.traj.json.gz")
    failed = [r for t in exc.turns for r in t.results if r.output.startswith("<exception>")]
    assert failed and all(r.exit_code == -1 for r in failed)
    empty = load_trajectory(DEEPSEEK / "deepseek_reasoner_dev" / "pvlib__pvlib-python-1154.traj.json.gz")
    assert empty.turns == [] and empty.task.startswith("<pr_description>")


# ----------------------------------------------------------------- claude code


def _main_chain(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("type") in ("user", "assistant") and not e.get("isSidechain")]


def test_claude_code_matches_raw_files(data_root: Path) -> None:
    for f in sorted(CLAUDE.glob("*.jsonl.gz")):
        events = _main_chain(raw_jsonl(f))
        traj = load_trajectory(f)
        msg_ids: list[str] = []
        for e in events:
            if e["type"] == "assistant" and (not msg_ids or msg_ids[-1] != e["message"]["id"]):
                msg_ids.append(e["message"]["id"])
        assert len(traj.turns) == len(msg_ids) == len(set(msg_ids)), f
        uses = [b for e in events if e["type"] == "assistant" for b in e["message"]["content"]
                if b.get("type") == "tool_use"]
        results = {b["tool_use_id"]: b for e in events if e["type"] == "user"
                   and isinstance(e["message"]["content"], list)
                   for b in e["message"]["content"] if b.get("type") == "tool_result"}
        calls = [c for t in traj.turns for c in t.tool_calls]
        assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
            (u["id"], u["name"], u["input"]) for u in uses]
        for r in (r for t in traj.turns for r in t.results):
            raw = results[r.tool_call_id]["content"]
            if isinstance(raw, str):
                assert r.output == raw  # byte-identical
            else:
                assert r.output == "\n\n".join(b["text"] for b in raw if b["type"] == "text")
        seen_text = [traj.task] + [u for t in traj.turns for u in t.user_after]
        for e in events:
            if e.get("isCompactSummary"):
                assert all(e["message"]["content"] not in s for s in seen_text)


def test_claude_code_long_session(data_root: Path) -> None:
    traj = load_trajectory(CLAUDE / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl.gz")
    assert len(traj.turns) == 217
    assert sum(len(t.tool_calls) for t in traj.turns) == 242
    assert traj.task.startswith("Work on bead spotter-4te.")
    after = [u for t in traj.turns for u in t.user_after]
    assert "continue implementation" in after
    assert not any(u.startswith("This session is being continued") for u in after)
    codes = [r.exit_code for t in traj.turns for r in t.results]
    assert codes.count(1) == 12 and 0 in codes and None in codes
    assert traj.turns[-1].tool_calls == [] and traj.turns[-1].assistant_text


def test_claude_code_merges_one_api_message_across_interleaved_results(data_root: Path) -> None:
    traj = load_trajectory(CLAUDE / "subagent.jsonl.gz")
    # msg_01FqB3…: Glob ran (and its result was logged) before WebSearch was streamed
    turn = traj.turns[1]
    assert [c.name for c in turn.tool_calls] == ["Glob", "WebSearch"]
    assert [r.tool_name for r in turn.results] == ["Glob", "WebSearch"]
    # results are kept in arrival order, which differs from call order in turn 0
    t0 = traj.turns[0]
    assert [c.name for c in t0.tool_calls] == ["WebFetch", "WebSearch", "WebSearch", "WebSearch"]
    assert [r.tool_call_id for r in t0.results] != [c.id for c in t0.tool_calls]
    # the expanded skill body (isMeta) is model-visible: it joins the task
    assert traj.task.startswith("<command-message>handgemacht:create-beads")
    assert "Create beads (epic + tasks + dependencies)" in traj.task
    task_result = [r for t in traj.turns for r in t.results if r.tool_name == "Task"]
    assert task_result and task_result[0].output.startswith("Excellent!")


def test_claude_code_rejected_tools_and_interrupts(data_root: Path) -> None:
    traj = load_trajectory(CLAUDE / "short.jsonl.gz")
    (turn,) = traj.turns
    assert turn.assistant_text == ("Let me check the project structure and try running the "
                                   "server to see the error.")
    assert [r.exit_code for r in turn.results] == [1, 1]
    assert turn.user_after == ["[Request interrupted by user for tool use]"]


def _write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return path


def test_claude_code_sidechain_meta_and_exit_codes(tmp_path: Path) -> None:
    def ev(type_: str, content, mid: str | None = None, **kw) -> dict:
        msg = {"role": type_, "content": content}
        if mid:
            msg["id"] = mid
        return {"type": type_, "uuid": f"u{len(kw)}", "sessionId": "s", "message": msg, **kw}

    events = [
        {"type": "summary", "summary": "old", "leafUuid": "x"},
        ev("user", "do it"),
        ev("assistant", [{"type": "thinking", "thinking": "hmm"},
                         {"type": "text", "text": "Running."},
                         {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "x"}}],
           "m1"),
        ev("assistant", [{"type": "text", "text": "sub"}], "s1", isSidechain=True),
        ev("user", [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                     "content": "Exit code 2\nboom"}]),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
         "uuid": "c"},
        ev("user", "SUMMARY", isCompactSummary=True, isVisibleInTranscriptOnly=True),
        ev("user", [{"type": "text", "text": "keep going"}, {"type": "image", "source": {}}]),
        ev("assistant", [{"type": "text", "text": "Done."}], "m2"),
    ]
    traj = load_trajectory(_write_jsonl(tmp_path / "session.jsonl", events))  # plain, not gzip
    assert traj.id == "session" and traj.source_format == FORMAT_CLAUDE_CODE
    assert traj.task == "do it" and len(traj.turns) == 2
    assert traj.turns[0].assistant_text == "Running."
    assert traj.turns[0].results[0].exit_code == 2
    assert traj.turns[0].user_after == ["keep going\n\n[image]"]
    assert traj.turns[1].assistant_text == "Done." and traj.turns[1].tool_calls == []


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"hello, not json", "not JSON"),
        (b"", "empty file"),
        (b'{"foo": 1, "bar": [2]}', "unknown trajectory format"),
        (b"[1, 2, 3]", "unknown trajectory format"),
        (b'{"messages": [{"content": "x"}]}', "missing field 'role'"),
        (b'{"messages": [{"role": "system", "content": "s"}]}', "no user message"),
        (b'{"messages": [{"role": "user", "content": "t"}, {"role": "tool", '
         b'"tool_call_id": "zz", "content": "x"}]}', "matches no call"),
        (b'{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "a"}}\n'
         b'{"type": "assistant", "message": {"content": [}\n', "invalid JSON on line 2"),
        (b'{"trajectory_format": "mini-swe-agent-9", "messages": []}', "unknown trajectory_format"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
    ],
)
def test_bad_input_names_the_file(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TrajectoryError) as info:
        load_trajectory(path)
    assert str(path) in str(info.value) and needle in str(info.value)
    assert info.value.source == str(path)


def test_truncated_gzip_names_the_file(data_root: Path, tmp_path: Path) -> None:
    data = (GEMINI / "astropy__astropy-13033.traj.json.gz").read_bytes()
    path = tmp_path / "cut.traj.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TrajectoryError, match="truncated or corrupt gzip") as info:
        load_trajectory(path)
    assert str(path) in str(info.value)
    with pytest.raises(TrajectoryError, match="truncated or corrupt gzip"):
        list(iter_trajectories([tmp_path]))


def test_gzip_and_plain_load_the_same(data_root: Path, tmp_path: Path) -> None:
    src = GEMINI / "astropy__astropy-13033.traj.json.gz"
    plain = tmp_path / "astropy__astropy-13033.traj.json.gz"  # misleading name, plain bytes
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = load_trajectory(src), load_trajectory(plain)
    assert a.turns == b.turns and a.task == b.task


def test_missing_path_and_detect_format() -> None:
    with pytest.raises(TrajectoryError, match="no such file"):
        list(iter_trajectories(["/nonexistent/trajectories"]))
    assert detect_format({"messages": [{"role": "user", "content": "x"}]}) == FORMAT_MSWEA_1
    assert detect_format({"messages": [{"role": "user", "content": "x"},
                                       {"role": "tool", "content": "y"}]}) == FORMAT_MSWEA_1_1
    assert detect_format({"trajectory_format": "mini-swe-agent-1.1", "messages": []}) == \
        FORMAT_MSWEA_1_1
    assert detect_format([{"type": "user", "message": {"content": "x"}, "uuid": "1"}]) == \
        FORMAT_CLAUDE_CODE
    with pytest.raises(TrajectoryError, match="<object>: unknown trajectory format"):
        detect_format({"hello": "world"})


# ----------------------------------------------------------------- synthetic


def test_synthetic_trajectory_is_deterministic_and_long() -> None:
    a = synthetic_trajectory(5000, seed=7)
    assert a == synthetic_trajectory(5000, seed=7)
    assert a != synthetic_trajectory(5000, seed=8)
    assert synthetic_trajectory(40, seed=7).turns[:10] != synthetic_trajectory(40, seed=8).turns[:10]
    assert len(a.turns) == 5000 and a.turns[-1].tool_calls == []
    assert a.tool_protocol == "tool_calls"
    assert_calls_answered_once(a)
    results = [r for t in a.turns for r in t.results]
    assert {r.tool_name for r in results} == {"read_file", "write_file", "edit_file", "bash"}
    assert sum(r.exit_code == 1 for r in results) > 200  # failing tests, failed edits
    assert sum(len(r.output) > 20_000 for r in results) > 30  # some large outputs
    assert max(len(r.output) for r in results) < 200_000
    assert any(len(t.tool_calls) > 1 for t in a.turns)
    assert any(t.user_after for t in a.turns)
    for r in results:
        if r.output.startswith("<returncode>"):
            assert r.exit_code == int(r.output[12:r.output.index("<", 12)])
    assert len(synthetic_trajectory(1).turns) == 1
    with pytest.raises(ValueError):
        synthetic_trajectory(0)
