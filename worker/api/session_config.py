"""``POST /v1/sessions``: the body -> the workflow's ``SessionConfig``, and what the sessions
table keeps of it.

Defaults decided here apply to sessions created from now on (a running session keeps the
config it started with): the model's context window from the table of known windows
(``workflows/context/model_windows.py``; an unknown model keeps ``LANES_CONTEXT_WINDOW``
and the engine's 8,000 fallback ceiling for capability context), LLM compaction on for
hosted sessions that call a live model (not replays), with the session's own model as the
condenser unless ``LANES_CONDENSER_MODEL`` or the body names one, and on for external
agents' sessions when ``LANES_CONDENSER_MODEL`` and a model endpoint are configured.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import ValidationError

from lanes_client.schemas import SessionCreate
from worker.api.agent_world import recall_style, tool_set_id
from worker.api.errors import ApiError
from worker.api.replays import check_replay
from worker.settings import Settings
from workflows.context import known_window
from workflows.contract.session import ReplaySpec, SessionConfig, budget_notice_on
from workflows.contract.tools import offered_tools

# The tools mode of POST /sessions -> SessionConfig.tools ("workspace": the mode's default).
TOOLS_OF_MODE: dict[str, list[str]] = {"recall": ["recall_observation"], "none": []}


def catalog_tools(body: SessionCreate) -> list[str]:
    """Our catalog tools the body names outside the workspace default (the agent's own
    definitions must not clash with them)."""
    return TOOLS_OF_MODE.get(body.tools or "", []) + list(body.context_tools or [])


def model_window(body: SessionCreate, settings: Settings, model: str) -> tuple[int, bool]:
    """(context window, whether the model is resolved): the body's window, else the known
    window of the model's family, else LANES_CONTEXT_WINDOW. A model counts as resolved when
    its window is known: given, in the table, or LANES_CONTEXT_WINDOW set for the worker's model."""
    if body.context_window is not None:
        return body.context_window, True
    known = known_window(model)
    if known is not None:
        return known, True
    declared = "context_window" in settings.model_fields_set and model == settings.model
    return settings.context_window, declared


def compaction_config(body: SessionCreate, settings: Settings, model: str) -> dict[str, Any]:
    given = body.compaction.model_dump(exclude_none=True) if body.compaction is not None else {}
    explicit = "condenser_model" in settings.model_fields_set and settings.condenser_model
    # On by default for hosted sessions calling a live model; a replay's recording has no
    # condenser answers. An external agent's own model may not be one the workers reach: its
    # sessions condense by default only with a condenser the operator named and an endpoint.
    external_default = bool(explicit) and settings.model_endpoint() is not None
    enabled = given.get("enabled", body.replay is None and (body.mode == "hosted" or external_default))
    values = {**given, "enabled": enabled}
    if enabled and "condenser_model" not in values:
        values["condenser_model"] = settings.condenser_model if explicit else model
    return values


def _tools(body: SessionCreate) -> list[str] | None:
    """SessionConfig.tools: None keeps the mode's default (when nothing is added to it)."""
    if body.tools is not None and body.tools != "workspace":
        tools: list[str] | None = list(TOOLS_OF_MODE[body.tools])
    elif body.mode == "external" and body.tools is None:
        tools = []  # the agent runs its own tools: none of ours unless asked for
    else:
        tools = None
    if body.context_tools:
        base = offered_tools(tools, replay=body.replay is not None, subagents=False)
        tools = base + [t for t in body.context_tools if t not in base]
    return tools


def session_config(body: SessionCreate, session_id: str, tenant: str, request: Request,
                   definitions: list[dict[str, Any]]) -> SessionConfig:
    settings: Settings = request.app.state.settings
    model = body.model or settings.model
    window, model_known = model_window(body, settings, model)
    values: dict[str, Any] = {
        "session_id": session_id,
        "tenant": tenant,
        "mode": body.mode,
        "model": model,
        "context_window": window,
        "model_known": model_known,
        "max_output_tokens": body.max_output_tokens or settings.max_output_tokens,
        "budget_tokens": body.budget_tokens,
    }
    if body.system_prompt is not None:
        values["system_prompt"] = body.system_prompt
    if body.max_turns_per_task is not None:
        values["max_turns_per_task"] = body.max_turns_per_task
    if body.give_up_seconds is not None:
        values["give_up_seconds"] = body.give_up_seconds
    if body.updates_per_run is not None:
        values["updates_per_run"] = body.updates_per_run
    if (tools := _tools(body)) is not None:
        values["tools"] = tools
    if body.mode == "external" and body.system_prompt is None:
        values["system_prompt"] = None  # the agent's prompt, or none: never ours
    catalog = offered_tools(values.get("tools"), replay=body.replay is not None, subagents=False)
    values["recall"] = recall_style(body, catalog + [d["function"]["name"] for d in definitions])
    if definitions:
        values["tool_set"] = tool_set_id(definitions)
    if body.generated_role is not None:
        values["generated_role"] = body.generated_role
    if body.budget_notice is not None:
        values["budget_notice"] = body.budget_notice
    if body.tasks is not None:
        if body.mode != "external":
            raise ApiError(400, "rejected", "tasks: only external sessions choose what begins a task "
                                            "(a hosted session's task is each message sent to it)")
        values["tasks"] = body.tasks
    if body.subagents is not None:
        values["subagents"] = body.subagents.model_dump(exclude_none=True)
    values["compaction"] = compaction_config(body, settings, model)
    if body.prices is not None:
        values["prices"] = {name: price.model_dump() for name, price in body.prices.items()}
    if body.replay is not None:
        if not request.app.state.allow_replay:
            raise ApiError(400, "replay_disabled", "replay sessions are disabled on this server "
                                                   "(a development setting: LANES_API_ALLOW_REPLAY=1)")
        if body.mode != "hosted":
            raise ApiError(400, "rejected", "a replay drives the hosted agent loop: use mode 'hosted'")
        check_replay(body.replay, settings)
        values["replay"] = ReplaySpec(**body.replay.model_dump())
    elif body.mode == "hosted" and settings.model_endpoint() is None:
        raise ApiError(400, "model_not_configured", "hosted sessions call a model, and none is configured: set "
                       "OPENAI_BASE_URL (an OpenAI-compatible endpoint) and/or OPENAI_API_KEY for the API and "
                       "the workers, or create an external session (mode 'external')")
    try:
        return SessionConfig(**values)
    except ValidationError as exc:  # the schema above should have caught it; say what, never 500
        raise ApiError(422, "invalid", f"session configuration rejected: {exc.errors()[0]['msg']}") from None


def row_config(body: SessionCreate, config: SessionConfig) -> dict[str, Any]:
    """What the sessions table keeps about the session (small; never the whole prompt)."""
    return {
        "mode": body.mode,
        "model": config.model,
        "context_window": config.context_window,
        "model_known": config.model_known,
        "max_output_tokens": config.max_output_tokens,
        "budget_tokens": config.budget_tokens,
        "tools": body.tools or ("workspace" if body.mode == "hosted" else "none"),
        "context_tools": list(body.context_tools or []),
        "tool_definitions": len(body.tool_definitions or []),
        "recall": config.recall,
        "generated_role": config.generated_role,
        "budget_notice": budget_notice_on(config),
        "tasks": config.tasks,
        "max_turns_per_task": config.max_turns_per_task,
        "give_up_seconds": config.give_up_seconds,
        "llm_compaction": config.compaction.enabled,
        "condenser_model": config.compaction.condenser_model,
        "subagents": config.subagents.enabled,
        "replay": config.replay is not None,
        "system_prompt_preview": (config.system_prompt or "")[:200],
        "system_prompt_chars": len(config.system_prompt or ""),
        "created_by": "api",
    }
