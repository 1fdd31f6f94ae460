"""The tool definitions sent to the model, in OpenAI function-calling form."""

from __future__ import annotations

RECALL = {
    "type": "function",
    "function": {
        "name": "recall_observation",
        "description": (
            "Read an exact slice of an archived tool output. Pass its observation:// address "
            "(optionally with ?offset=&limit=), or offset and limit in characters."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "address": {"type": "string", "description": "observation://obs-..."},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1},
            },
            "required": ["address"],
        },
    },
}

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command in the session workspace and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def _file_tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


READ_FILE = _file_tool(
    "read_file", "Read a text file of the workspace.", {"path": {"type": "string"}}, ["path"]
)
WRITE_FILE = _file_tool(
    "write_file",
    "Write (create or replace) a text file of the workspace.",
    {"path": {"type": "string"}, "content": {"type": "string"}},
    ["path", "content"],
)
LIST_FILES = _file_tool(
    "list_files", "List the files under a workspace directory.", {"path": {"type": "string"}}, []
)

_MEMORY_LIST = {"type": "array", "items": {"type": "string"}}
CONDENSE = {
    "type": "function",
    "function": {
        "name": "condense_context",
        "description": (
            "At a natural milestone, replace old completed work in your context with a bounded memory "
            "(at most 2,000 tokens). Exact tool output stays recallable by its observation:// address. "
            "Rejected while an episode is active or for references that do not exist."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "completed_work": _MEMORY_LIST,
                "strategies_and_outcomes": _MEMORY_LIST,
                "environment_changes": _MEMORY_LIST,
                "constraints": _MEMORY_LIST,
                "open_questions": _MEMORY_LIST,
                "references": {**_MEMORY_LIST, "description": "observation://obs-... or workspace-relative paths"},
            },
        },
    },
}

TOOL_SPECS: dict[str, dict] = {
    spec["function"]["name"]: spec for spec in (RECALL, BASH, READ_FILE, WRITE_FILE, LIST_FILES, CONDENSE)
}
REPLAY_TOOLS = ["bash", "recall_observation"]
WORKSPACE_TOOLS = ["read_file", "write_file", "list_files", "bash", "recall_observation", "condense_context"]
# Tools the workflow runs itself, deterministically (their arguments travel in the model result).
WORKFLOW_TOOLS = frozenset({"condense_context"})
MAX_WORKFLOW_TOOL_ARGUMENTS = 32_000


def tool_specs(names: list[str]) -> list[dict]:
    unknown = [n for n in names if n not in TOOL_SPECS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOL_SPECS)}")
    return [TOOL_SPECS[n] for n in names]
