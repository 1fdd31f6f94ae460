"""The structured result a subagent lane hands to its parent, and how it is read and shown.

A subagent ends by answering with a JSON handoff (the brief asks for it). The parent
records the handoff as one item instead of the subagent's trace. A final answer that is
not a valid handoff still reaches the parent: its text becomes the findings, and the
problem is listed among the unresolved issues, so nothing the subagent said is lost.

Pure functions (no I/O): the lane activities parse and render with them.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

HandoffStatus = Literal["completed", "blocked", "failed"]
MAX_ENTRIES = 50
MAX_ENTRY_CHARS = 4_000
MAX_UNSTRUCTURED_CHARS = 8_000  # a final answer that is not a handoff, kept as one finding

_Entries = list[str]

HANDOFF_FIELDS = ("findings", "decisions", "changed_files", "verification", "unresolved", "artifacts")


class Handoff(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: HandoffStatus
    findings: _Entries = Field(default_factory=list)
    decisions: _Entries = Field(default_factory=list)
    changed_files: _Entries = Field(default_factory=list)  # workspace-relative paths
    verification: _Entries = Field(default_factory=list)  # what was run or checked, with its outcome
    unresolved: _Entries = Field(default_factory=list)
    artifacts: _Entries = Field(default_factory=list)  # observation:// addresses, paths, URLs


BRIEF_INSTRUCTIONS = (
    "You are a subagent working for the agent whose conversation is above; it continues once "
    "you hand back your result. Do only the task below, with your tools. When you are done, "
    "answer (without a tool call) with one JSON object and nothing else:\n"
    '{"status": "completed" | "blocked" | "failed", "findings": [...], "decisions": [...], '
    '"changed_files": [...], "verification": [...], "unresolved": [...], "artifacts": [...]}\n'
    "Every list holds short strings; artifacts are observation:// addresses or workspace paths. "
    "Use \"blocked\" when you need something only the parent can provide.\n\nYour task:\n"
)


def brief_message(brief: str) -> str:
    """The first message of a child lane's own branch."""
    return BRIEF_INSTRUCTIONS + brief


def parse_handoff(text: str) -> tuple[Handoff, list[str]]:
    """The handoff in a subagent's final answer, and what was wrong with it (empty: valid).

    Accepts the JSON object alone or inside a fenced code block. Lists are bounded
    (entries cut to ``MAX_ENTRY_CHARS``, at most ``MAX_ENTRIES``) rather than refused.
    """
    raw = _json_object(text)
    problems: list[str] = []
    if raw is None:
        problems.append("the final answer is not a JSON handoff object")
    else:
        bounded, cut = _bounded(raw)
        problems.extend(cut)
        try:
            return Handoff.model_validate(bounded), problems
        except ValidationError as error:
            problems.extend(f"{'.'.join(map(str, e['loc'])) or 'handoff'}: {e['msg']}" for e in error.errors()[:5])
    kept = text.strip()
    if len(kept) > MAX_UNSTRUCTURED_CHARS:
        kept = kept[:MAX_UNSTRUCTURED_CHARS] + f" [... {len(kept) - MAX_UNSTRUCTURED_CHARS} characters cut]"
    findings = [kept] if kept else []
    # Many cut entries give many problems: the note is bounded like any other entry.
    note = f"the subagent's answer was not a structured handoff ({'; '.join(problems)})"
    if len(note) > MAX_ENTRY_CHARS:
        note = note[:MAX_ENTRY_CHARS - 5] + " ...)"
    return Handoff(status="completed", findings=findings, unresolved=[note]), problems


def failed_handoff(reason: str, findings: list[str] | None = None) -> Handoff:
    return Handoff(status="failed", findings=list(findings or []), unresolved=[reason])


def handoff_text(lane: str, handoff: Handoff) -> str:
    """What the parent's model reads: a header line, then the handoff as JSON."""
    body = json.dumps(handoff.model_dump(mode="json"), ensure_ascii=False, indent=1)
    return (f"Handoff from subagent lane {lane} (status: {handoff.status}). Its full trace stays in the "
            f"session's store under lane {lane}.\n{body}")


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _json_object(text: str) -> dict | None:
    candidates = [text.strip()]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _bounded(raw: dict) -> tuple[dict, list[str]]:
    """Lists cut to size; a single string where a list belongs is accepted as one entry."""
    out, problems = dict(raw), []
    for field in HANDOFF_FIELDS:
        value = out.get(field)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            continue
        if len(value) > MAX_ENTRIES:
            problems.append(f"{field}: {len(value)} entries, kept the first {MAX_ENTRIES}")
            value = value[:MAX_ENTRIES]
        entries = []
        for entry in value:
            entry = entry if isinstance(entry, str) else json.dumps(entry, ensure_ascii=False)
            if len(entry) > MAX_ENTRY_CHARS:
                problems.append(f"{field}: an entry of {len(entry)} characters was cut to {MAX_ENTRY_CHARS}")
                entry = entry[:MAX_ENTRY_CHARS]
            entries.append(entry)
        out[field] = entries
    if isinstance(out.get("status"), str):
        out["status"] = out["status"].strip().lower()
    return out, problems
