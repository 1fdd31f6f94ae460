"""The tool catalog: every tool a session can offer its model, by name, in OpenAI
function-calling form. Pure data, defined once: the workflows choose the tools, the
activities render and run them, the API lists them.
"""

from __future__ import annotations

from workflows.context import SECTIONS

RECALL_TOOL = "recall_observation"
BASH_TOOL = "bash"
READ_FILE_TOOL = "read_file"
WRITE_FILE_TOOL = "write_file"
LIST_FILES_TOOL = "list_files"
CONDENSE_TOOL = "condense_context"
SPAWN_TOOL = "spawn_subagent"
BEGIN_EPISODE_TOOL = "begin_episode"
END_EPISODE_TOOL = "end_episode"
EPISODE_TOOLS = (BEGIN_EPISODE_TOOL, END_EPISODE_TOOL)
PIN_NOTE_TOOL = "pin_note"
# The context-management tools a session may offer on top of its mode's (the API's context_tools).
CONTEXT_TOOLS = (BEGIN_EPISODE_TOOL, END_EPISODE_TOOL, CONDENSE_TOOL, PIN_NOTE_TOOL)

# A session's default tools, by mode: a replay answers with recorded shell output.
REPLAY_TOOLS = (BASH_TOOL, RECALL_TOOL)
WORKSPACE_TOOLS = (READ_FILE_TOOL, WRITE_FILE_TOOL, LIST_FILES_TOOL, BASH_TOOL, RECALL_TOOL, CONDENSE_TOOL)
# Tools the workflow runs itself, deterministically: their arguments travel in the model
# activity's result (bounded by ids.MAX_WORKFLOW_TOOL_ARGUMENTS).
WORKFLOW_TOOLS = frozenset({CONDENSE_TOOL, SPAWN_TOOL, PIN_NOTE_TOOL, *EPISODE_TOOLS})


def _function(name: str, description: str, properties: dict, required: list[str] | None = None) -> dict:
    parameters: dict = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


_STRINGS = {"type": "array", "items": {"type": "string"}}
# condense_context takes the memory document itself; its sections come from the engine.
_MEMORY_PROPERTIES = {field: dict(_STRINGS) for field, _ in SECTIONS}
_MEMORY_PROPERTIES["references"]["description"] = "observation://obs-... or workspace-relative paths"

TOOL_SPECS: dict[str, dict] = {spec["function"]["name"]: spec for spec in (
    _function(
        RECALL_TOOL,
        "Read an exact slice of an archived tool output. Pass its observation:// address "
        "(optionally with ?offset=&limit=), or offset and limit in characters.",
        {
            "address": {"type": "string", "description": "observation://obs-..."},
            "offset": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1},
        },
        ["address"],
    ),
    _function(BASH_TOOL, "Run a shell command in the session workspace and return its output.",
              {"command": {"type": "string"}}, ["command"]),
    _function(READ_FILE_TOOL, "Read a text file of the workspace.", {"path": {"type": "string"}}, ["path"]),
    _function(WRITE_FILE_TOOL, "Write (create or replace) a text file of the workspace.",
              {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    _function(LIST_FILES_TOOL, "List the files under a workspace directory.", {"path": {"type": "string"}}, []),
    _function(
        CONDENSE_TOOL,
        "At a natural milestone, replace old completed work in your context with a bounded memory "
        "(at most 2,000 tokens). Exact tool output stays recallable by its observation:// address. "
        "Rejected while an episode is active or for references that do not exist.",
        _MEMORY_PROPERTIES,
    ),
    _function(
        SPAWN_TOOL,
        "Delegate a self-contained piece of work to a subagent. It starts from this conversation, "
        "works with its own context budget and returns only a structured handoff (status, findings, "
        "decisions, changed files, verification, unresolved issues, artifacts). Several calls in one "
        "answer run concurrently.",
        {
            "brief": {"type": "string", "description": "the task, with what done looks like"},
            "tools": {"type": "array", "items": {"type": "string"},
                      "description": "optional: the only tools the subagent may use"},
        },
        ["brief"],
    ),
    _function(
        BEGIN_EPISODE_TOOL,
        "Mark the start of a multi-step piece of work. An exploration gathers information and must "
        "end with a conclusion; an action changes the environment and names the completed explorations "
        "it depends on. Finished episodes can leave your context; their conclusions stay.",
        {
            "episode_id": {"type": "string"},
            "kind": {"type": "string", "enum": ["exploration", "action"]},
            "goal": {"type": "string"},
            "depends_on": {"type": "array", "items": {"type": "string"}},
        },
        ["episode_id", "kind", "goal"],
    ),
    _function(END_EPISODE_TOOL, "Mark the end of an episode; an exploration needs a concise conclusion.",
              {"episode_id": {"type": "string"}, "conclusion": {"type": "string"}}, ["episode_id"]),
    _function(
        PIN_NOTE_TOOL,
        "Pin a short note (a decision, a constraint, a fact to keep) so it stays in your context for the rest "
        "of the session. Refused, with the figures, when pinned content would exceed its share of the budget.",
        {"text": {"type": "string"}},
        ["text"],
    ),
)}


def unknown_tools(names: list[str] | tuple[str, ...]) -> list[str]:
    return [n for n in names if n not in TOOL_SPECS]


def tool_specs(names: list[str] | tuple[str, ...]) -> list[dict]:
    """The definitions of ``names``, in order; a name the catalog lacks is a ValueError."""
    if unknown := unknown_tools(names):
        raise ValueError(f"unknown tools {unknown}; known: {sorted(TOOL_SPECS)}")
    return [TOOL_SPECS[n] for n in names]


def offered_tools(tools: list[str] | None, *, replay: bool, subagents: bool) -> list[str]:
    """The tools a session offers its model: the configured list, else the default of its kind
    (a replay's or a live workspace's); plus spawn_subagent when subagents are enabled. The API
    and the workflow both ask this (the API before any session exists)."""
    defaults = REPLAY_TOOLS if replay else WORKSPACE_TOOLS
    offered = list(tools if tools is not None else defaults)  # a copy: never the module's tuple
    if subagents and SPAWN_TOOL not in offered:
        offered.append(SPAWN_TOOL)
    return offered
