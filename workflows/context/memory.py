"""The long-term memory document: its JSON schema, its text and its validation.

Both explicit condensation (the ``condense_context`` tool, deterministic) and automatic
LLM condensation produce this document. It is bounded (2,000 estimated tokens) and may
reference only observations of the session or workspace-relative paths.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from .observations import SCHEME, parse_observation_uri

SECTIONS = (
    ("completed_work", "Completed work"),
    ("strategies_and_outcomes", "Strategies and outcomes"),
    ("environment_changes", "Environment changes"),
    ("constraints", "Constraints"),
    ("open_questions", "Open questions"),
    ("references", "References"),
)
# Schema bounds of one section: they keep a bad document from becoming a large payload
# before it is measured (the 2,000-token total bounds a valid memory far below them).
MAX_ENTRIES = 100
MAX_ENTRY_CHARS = 8_000
# The memory contract (EngineConfig.rules_version >= 2): at most this many entries per
# section and characters per entry, after trimming and dropping empty and repeated entries.
SECTION_ENTRIES = 20
ENTRY_CHARS = 1_000
Entries = Annotated[list[Annotated[str, StringConstraints(max_length=MAX_ENTRY_CHARS)]], Field(max_length=MAX_ENTRIES)]
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_BARE_SCHEMES = re.compile(r"^(file|data|javascript|mailto|about|blob|ftp|ssh|git):", re.IGNORECASE)
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


class MemoryDoc(BaseModel):
    """The memory JSON (``SECTIONS`` in order); ``references`` are observation:// addresses
    or workspace-relative paths."""

    model_config = ConfigDict(extra="forbid")

    completed_work: Entries = Field(default_factory=list)
    strategies_and_outcomes: Entries = Field(default_factory=list)
    environment_changes: Entries = Field(default_factory=list)
    constraints: Entries = Field(default_factory=list)
    open_questions: Entries = Field(default_factory=list)
    references: Entries = Field(default_factory=list)


def memory_text(doc: MemoryDoc) -> str:
    """The memory message; deterministic, empty sections left out."""
    lines = ["[Long-term memory] Condensed record of earlier work in this session:"]
    for field, title in SECTIONS:
        entries = [e.strip() for e in getattr(doc, field) if e.strip()]
        if entries:
            lines.append(f"{title}:")
            lines.extend(f"- {entry}" for entry in entries)
    return "\n".join(lines)


def parse_memory(raw: str | dict) -> tuple[MemoryDoc | None, list[str]]:
    """Parse model output (JSON text or a dict) into a document, or say what is wrong."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as error:
            return None, [f"memory is not valid JSON: {error}"]
    if not isinstance(raw, dict):
        return None, [f"memory must be a JSON object, got {type(raw).__name__}"]
    try:
        return MemoryDoc.model_validate(raw), []
    except ValidationError as error:
        return None, [f"{'.'.join(map(str, e['loc'])) or 'memory'}: {e['msg']}" for e in error.errors()]


def normalized(doc: MemoryDoc) -> MemoryDoc:
    """Entries trimmed, empty ones dropped, and of repeated entries the newest (last) kept."""
    sections = {}
    for field, _ in SECTIONS:
        trimmed = [e.strip() for e in getattr(doc, field)]
        newest = {entry: index for index, entry in enumerate(trimmed) if entry}
        sections[field] = [entry for index, entry in enumerate(trimmed) if entry and newest[entry] == index]
    return MemoryDoc(**sections)


def bound_errors(doc: MemoryDoc) -> list[str]:
    """Where a (normalized) document exceeds the per-section bounds of the memory contract."""
    errors = []
    for field, _ in SECTIONS:
        entries = getattr(doc, field)
        if len(entries) > SECTION_ENTRIES:
            errors.append(f"{field}: {len(entries)} entries; at most {SECTION_ENTRIES}")
        long = [e for e in entries if len(e) > ENTRY_CHARS]
        if long:
            errors.append(f"{field}: an entry of {len(long[0])} characters; at most {ENTRY_CHARS}")
    return errors


def check_reference(reference: str, known_observation_ids: Iterable[str] | set[str]) -> str | None:
    """None when ``reference`` is a known observation address or a workspace-relative path."""
    ref = reference.strip()
    if not ref:
        return "a reference is empty"
    if ref.startswith(SCHEME):
        try:
            obs_id = parse_observation_uri(ref).obs_id
        except ValueError as error:
            return str(error)
        if obs_id not in known_observation_ids:
            return f"reference {ref!r} names an observation this session does not have"
        return None
    if _URL.match(ref) or _BARE_SCHEMES.match(ref):
        return f"reference {ref!r}: only observation:// addresses or workspace-relative paths are allowed"
    if ref.startswith(("/", "\\", "~")) or _WINDOWS_DRIVE.match(ref):
        return f"reference {ref!r} is an absolute path; use a workspace-relative path"
    if ".." in re.split(r"[\\/]", ref):
        return f"reference {ref!r} leaves the workspace ('..')"
    return None


def validate_memory(
    doc: MemoryDoc, known_observation_ids: Iterable[str], estimated_tokens: int, max_tokens: int = 2000,
    bounded: bool = True,
) -> list[str]:
    """Everything wrong with ``doc`` (empty list: valid); ``bounded``: the per-section bounds
    apply too (pass the ``normalized`` document)."""
    known = set(known_observation_ids)
    errors = bound_errors(doc) if bounded else []
    if not any(e.strip() for field, _ in SECTIONS for e in getattr(doc, field)):
        errors.append("memory records nothing")
    if estimated_tokens > max_tokens:
        errors.append(f"memory needs about {estimated_tokens} tokens; at most {max_tokens} are allowed")
    errors.extend(e for e in (check_reference(r, known) for r in doc.references) if e)
    return errors
