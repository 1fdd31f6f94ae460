"""workflows/contract/handoff.py: reading a subagent's final answer, and what the parent reads."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from workflows.contract.handoff import (
    BRIEF_INSTRUCTIONS,
    MAX_ENTRIES,
    MAX_ENTRY_CHARS,
    MAX_UNSTRUCTURED_CHARS,
    Handoff,
    brief_message,
    failed_handoff,
    handoff_text,
    parse_handoff,
)

FULL = {
    "status": "completed",
    "findings": ["the bug is in writer.py"],
    "decisions": ["kept the public API"],
    "changed_files": ["src/writer.py"],
    "verification": ["pytest tests/test_writer.py: 12 passed"],
    "unresolved": [],
    "artifacts": ["observation://obs-s-000012"],
}


# --- valid answers -----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    json.dumps(FULL),
    f"  \n{json.dumps(FULL, indent=2)}\n",
    f"Done.\n```json\n{json.dumps(FULL, indent=2)}\n```\nThanks.",
    f"```\n{json.dumps(FULL)}\n```",
    f"Here is my handoff: {json.dumps(FULL)} -- end",  # bare object inside prose
])
def test_valid_handoff_is_read_wherever_it_sits(text: str) -> None:
    handoff, problems = parse_handoff(text)
    assert problems == []
    assert handoff == Handoff(**FULL)


def test_fenced_object_wins_over_other_braces_in_prose() -> None:
    text = 'I looked at {the config} first.\n```json\n{"status": "blocked", "unresolved": ["need the API key"]}\n```'
    handoff, problems = parse_handoff(text)
    assert problems == [] and handoff.status == "blocked" and handoff.unresolved == ["need the API key"]


def test_missing_lists_default_to_empty_and_status_is_normalised() -> None:
    handoff, problems = parse_handoff('{"status": " Failed "}')
    assert problems == []
    assert handoff == Handoff(status="failed")


def test_single_string_and_non_string_entries_are_accepted() -> None:
    handoff, problems = parse_handoff(json.dumps({"status": "completed", "findings": "one finding",
                                                  "verification": [{"cmd": "pytest", "ok": True}, 3]}))
    assert problems == []
    assert handoff.findings == ["one finding"]
    assert handoff.verification == ['{"cmd": "pytest", "ok": true}', "3"]


def test_oversized_lists_are_bounded_not_refused() -> None:
    raw = {"status": "completed", "findings": [f"f{i}" for i in range(MAX_ENTRIES + 7)],
           "artifacts": ["x" * (MAX_ENTRY_CHARS + 10)]}
    handoff, problems = parse_handoff(json.dumps(raw))
    assert handoff.findings == raw["findings"][:MAX_ENTRIES]
    assert handoff.artifacts == ["x" * MAX_ENTRY_CHARS]
    assert len(problems) == 2  # reported, yet the structured handoff is kept
    assert any("findings" in p for p in problems) and any("artifacts" in p for p in problems)


# --- answers that are not a handoff --------------------------------------------------------

@pytest.mark.parametrize("text", [
    "I fixed it; tests pass.",  # prose
    '{"status": "done", "findings": ["x"]}',  # unknown status
    '{"status": "completed", "summary": "x"}',  # unknown field
    '{"findings": ["x"]}',  # no status
    '["completed"]',  # JSON, not an object
    '{"status": "completed", "findings": {"a": 1}}',  # a mapping where a list belongs
])
def test_an_invalid_answer_keeps_its_text_as_findings(text: str) -> None:
    handoff, problems = parse_handoff(text)
    assert problems
    assert handoff.findings == [text.strip()]
    assert len(handoff.unresolved) == 1 and "not a structured handoff" in handoff.unresolved[0]
    assert handoff.status == "completed"  # the parent decides; nothing is dropped
    assert handoff.decisions == handoff.changed_files == handoff.artifacts == []


def test_an_empty_answer_has_no_findings() -> None:
    handoff, problems = parse_handoff("   ")
    assert problems == ["the final answer is not a JSON handoff object"]
    assert handoff.findings == []


def test_a_huge_unstructured_answer_is_cut_with_a_marker() -> None:
    text = "y" * (MAX_UNSTRUCTURED_CHARS + 1234)
    handoff, _ = parse_handoff(text)
    (finding,) = handoff.findings
    assert finding.startswith("y" * MAX_UNSTRUCTURED_CHARS)
    assert finding.endswith(" [... 1234 characters cut]")


def test_the_problem_note_is_bounded_however_many_cuts_there_were() -> None:
    # invalid (no status) and every list over-long: one problem per cut entry
    raw = {field: ["z" * (MAX_ENTRY_CHARS + 1)] * MAX_ENTRIES
           for field in ("findings", "decisions", "changed_files", "verification", "unresolved", "artifacts")}
    handoff, problems = parse_handoff(json.dumps(raw))
    assert len(problems) > 6 * MAX_ENTRIES - 1
    (note,) = handoff.unresolved
    assert len(note) <= MAX_ENTRY_CHARS and note.endswith("...)")
    Handoff.model_validate_json(handoff.model_dump_json())  # still round-trips


# --- building and showing -------------------------------------------------------------------

def test_failed_handoff() -> None:
    assert failed_handoff("timed out") == Handoff(status="failed", unresolved=["timed out"])
    findings = ["partial answer"]
    handoff = failed_handoff("killed", findings)
    assert handoff.findings == ["partial answer"] and handoff.unresolved == ["killed"]
    findings.append("later")  # the handoff does not share the caller's list
    assert handoff.findings == ["partial answer"]


def test_handoff_round_trips_as_json_and_forbids_extras() -> None:
    handoff = Handoff(**FULL)
    assert Handoff.model_validate_json(handoff.model_dump_json()) == handoff
    with pytest.raises(ValidationError):
        Handoff.model_validate({"status": "completed", "notes": ["x"]})
    with pytest.raises(ValidationError):
        Handoff(status="finished")


def test_handoff_text_names_the_lane_and_carries_the_exact_json() -> None:
    handoff = Handoff(status="blocked", findings=["naïve — ünïcode"], unresolved=["need credentials"])
    text = handoff_text("sub-0003", handoff)
    header, body = text.split("\n", 1)
    assert "sub-0003" in header and "status: blocked" in header
    assert "naïve — ünïcode" in body  # not \u-escaped: the model reads it as written
    assert Handoff.model_validate(json.loads(body)) == handoff
    assert handoff_text("sub-0003", handoff) == text  # byte-stable for the prompt cache


def test_brief_message_puts_the_task_after_the_instructions() -> None:
    message = brief_message("Find the flaky test.")
    assert message == BRIEF_INSTRUCTIONS + "Find the flaky test."
    assert '"status"' in message and "blocked" in message
