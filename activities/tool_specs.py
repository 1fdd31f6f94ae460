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

SPAWN_SUBAGENT = {
    "type": "function",
    "function": {
        "name": "spawn_subagent",
        "description": (
            "Delegate a self-contained piece of work to a subagent. It starts from this conversation, "
            "works with its own context budget and returns only a structured handoff (status, findings, "
            "decisions, changed files, verification, unresolved issues, artifacts). Several calls in one "
            "answer run concurrently."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "brief": {"type": "string", "description": "the task, with what done looks like"},
                "tools": {"type": "array", "items": {"type": "string"},
                          "description": "optional: the only tools the subagent may use"},
            },
            "required": ["brief"],
        },
    },
}
BEGIN_EPISODE = {
    "type": "function",
    "function": {
        "name": "begin_episode",
        "description": (
            "Mark the start of a multi-step piece of work. An exploration gathers information and must "
            "end with a conclusion; an action changes the environment and names the completed explorations "
            "it depends on. Finished episodes can leave your context; their conclusions stay."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "episode_id": {"type": "string"},
                "kind": {"type": "string", "enum": ["exploration", "action"]},
                "goal": {"type": "string"},
                "depends_on": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["episode_id", "kind", "goal"],
        },
    },
}
END_EPISODE = {
    "type": "function",
    "function": {
        "name": "end_episode",
        "description": "Mark the end of an episode; an exploration needs a concise conclusion.",
        "parameters": {
            "type": "object",
            "properties": {"episode_id": {"type": "string"}, "conclusion": {"type": "string"}},
            "required": ["episode_id"],
        },
    },
}

TOOL_SPECS: dict[str, dict] = {
    spec["function"]["name"]: spec
    for spec in (RECALL, BASH, READ_FILE, WRITE_FILE, LIST_FILES, CONDENSE, SPAWN_SUBAGENT, BEGIN_EPISODE, END_EPISODE)
}
REPLAY_TOOLS = ["bash", "recall_observation"]
WORKSPACE_TOOLS = ["read_file", "write_file", "list_files", "bash", "recall_observation", "condense_context"]
EPISODE_TOOLS = ["begin_episode", "end_episode"]
SPAWN_TOOL = "spawn_subagent"
# Tools the workflow runs itself, deterministically (their arguments travel in the model result).
WORKFLOW_TOOLS = frozenset({"condense_context", SPAWN_TOOL, *EPISODE_TOOLS})
MAX_WORKFLOW_TOOL_ARGUMENTS = 32_000


def tool_specs(names: list[str]) -> list[dict]:
    unknown = [n for n in names if n not in TOOL_SPECS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOL_SPECS)}")
    return [TOOL_SPECS[n] for n in names]
