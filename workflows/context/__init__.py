"""The context engine's front door: everything code outside the engine uses, from one place.

Pure (no I/O, clock or randomness); the modules behind it are the engine's own business,
and only the engine's tests reach into them. ``engine`` is the planning API (state, plans,
compaction); ``ids`` derives every id and size threshold.
"""

from __future__ import annotations

from workflows.context import continuation, engine, ids
from workflows.context.budget import scan_capability_tokens, scan_working_set_tokens
from workflows.context.checkpoint import CALL_CHARS, NAMES_HEADER
from workflows.context.classify import classify_tool, git_subcommand
from workflows.context.compaction_plan import ApplyResult, CompactionPlan, Rejection
from workflows.context.config import (
    CHECKPOINT_PROFILE,
    FALLBACK_PROFILE,
    LINES_PROFILE,
    NAMES_INDEX_PROFILE,
    PREVIEW_LINES_PROFILE,
    EngineConfig,
    GeneratedRole,
    cost_profile,
)
from workflows.context.content import ItemContent, ToolCall
from workflows.context.continuation import ContinuationFacts
from workflows.context.errors import EngineError, IncompleteCoverageError
from workflows.context.formats.anthropic_request import anthropic_tools
from workflows.context.formats.request_formats import FormattedRequest, RequestFormat, format_request
from workflows.context.formats.responses_input import FormatError, from_responses_items
from workflows.context.formats.responses_request import responses_tools
from workflows.context.ids import (
    INLINE_TEXT_LIMIT,
    MAIN_LANE,
    MAX_SUBMIT_CHARS,
    MAX_WORKFLOW_TOOL_ARGUMENTS,
    external_observation_id,
    observation_id,
)
from workflows.context.items import Item, Kind, Projection, ToolClass, is_tool_output, item_from_json, item_to_json, item_with
from workflows.context.ledger import GENERATED_KINDS, SharedEntry
from workflows.context.memory import (
    ENTRY_CHARS,
    SECTION_ENTRIES,
    SECTIONS,
    MemoryDoc,
    memory_text,
    normalized,
    parse_memory,
    validate_memory,
)
from workflows.context.model_windows import known_window
from workflows.context.observations import SCHEME, RecallStyle, observation_address, parse_observation_uri, range_address
from workflows.context.pins import check_pin
from workflows.context.render import Entries, Rendered, item_message, render_messages, render_turns
from workflows.context.render_cache import RequestRenderer
from workflows.context.report import ContextReport, ItemReport
from workflows.context.request_plan import plan_request_reference
from workflows.context.text import clip
from workflows.context.usage import (
    RATIO_MAX,
    CallUsage,
    ModelPrice,
    UsageCounts,
    UsageTotals,
    add_counts,
    budget_ratio,
    cost_units,
    counts_of,
    price_for,
    record_call,
    sanitized,
)

__all__ = [
    "ContinuationFacts", "continuation",
    "ApplyResult", "anthropic_tools", "responses_tools", "CallUsage", "CompactionPlan", "ContextReport",
    "CALL_CHARS", "CHECKPOINT_PROFILE", "ENTRY_CHARS", "EngineConfig",
    "EngineError", "Entries", "FALLBACK_PROFILE", "FormatError", "FormattedRequest", "GENERATED_KINDS",
    "GeneratedRole", "INLINE_TEXT_LIMIT", "IncompleteCoverageError", "Item", "ItemContent", "ItemReport",
    "Kind", "MAIN_LANE", "MAX_SUBMIT_CHARS", "MAX_WORKFLOW_TOOL_ARGUMENTS", "MemoryDoc", "ModelPrice",
    "NAMES_HEADER", "LINES_PROFILE", "PREVIEW_LINES_PROFILE",
    "NAMES_INDEX_PROFILE", "Projection", "RATIO_MAX", "RecallStyle", "Rejection", "Rendered", "RequestFormat",
    "RequestRenderer", "SCHEME", "SECTIONS", "SECTION_ENTRIES", "SharedEntry", "ToolCall", "ToolClass",
    "UsageCounts", "UsageTotals", "add_counts", "budget_ratio", "check_pin", "classify_tool", "clip", "cost_profile",
    "cost_units", "counts_of", "engine", "external_observation_id", "format_request", "from_responses_items",
    "git_subcommand", "ids", "is_tool_output", "item_from_json", "item_message",
    "item_to_json", "item_with", "known_window", "memory_text", "normalized",
    "observation_address", "observation_id", "parse_memory", "parse_observation_uri",
    "plan_request_reference", "price_for", "range_address", "record_call", "render_messages", "render_turns",
    "sanitized", "scan_capability_tokens", "scan_working_set_tokens", "validate_memory",
]
