"""The façade of the pure context engine: the operations the workflow (and the offline
replay) call. Every function takes the ``ContextState`` and either mutates it atomically
or returns a plan without mutating it; nothing here does I/O, reads a clock or logs.

A model step, as the workflow drives it::

    add_item(state, item, arguments)            # for each new user/assistant/tool item
    if needs_compaction(state):
        # optional LLM route: condensation_source -> activity -> plan_condense(mode="llm",
        #   expected_generation=source.generation) -> Rejection(stale/invalid) => fallback
        plan = plan_fallback(state)
        measured = activity_measures(plan.generated)       # tiktoken, outside the engine
        result = apply_plan(state, plan, measured)         # result.stale => replan
    request = plan_request(state)                          # entries -> model activity
    # provider overflow: plan_request(state, ladder) down OVERFLOW_LADDER, then terminal
    end_step(state)
"""

from __future__ import annotations

from .assembly import plan_assembly
from .budget import budget, pressure, working_set_tokens
from .capabilities import Admission, SkillStatus, admit_capability, admit_manual_skill
from .classify import classify_command, classify_tool
from .compaction import apply_plan, needs_compaction, over_target, plan_fallback
from .compaction_plan import ApplyResult, CompactionPlan, Rejection
from .condense import CondensationSource, condensation_source, known_observation_ids, plan_condense
from .config import EngineConfig
from .content import ItemContent, ToolCall
from .coverage import record_recall, require_observation, unread_ranges
from .episodes import Episode, begin_episode, check_begin, check_end, end_episode
from .errors import EngineError, EpisodeError, IncompleteCoverageError, TaskError
from .fork import fork_prefix, prefix_tokens
from .items import Item, Kind, Lifecycle, Projection, ToolClass
from .ledger import ContextState, SharedEntry, add_item, kind_problem, new_state
from .memory import MemoryDoc, memory_text, normalized, parse_memory, validate_memory
from .observations import ObservationRef, observation_address, parse_observation_uri
from .render import item_message, projection_text, render_messages
from .report import ContextReport, build_report
from .request_plan import OVERFLOW_LADDER, PlanEntry, RequestPlan, plan_fitting, plan_request
from .tasks import TaskEnd, begin_task, end_step, end_task
from .text import estimate_tokens

__all__ = [
    "Admission", "ApplyResult", "CompactionPlan", "CondensationSource", "ContextReport", "ContextState",
    "EngineConfig", "EngineError", "Episode", "EpisodeError", "IncompleteCoverageError", "Item", "ItemContent",
    "Kind", "Lifecycle", "MemoryDoc", "OVERFLOW_LADDER", "ObservationRef", "PlanEntry", "Projection", "Rejection",
    "RequestPlan", "SharedEntry", "SkillStatus", "TaskEnd", "TaskError", "ToolCall", "ToolClass", "add_item",
    "admit_capability", "admit_manual_skill", "apply_plan", "begin_episode", "begin_task", "budget", "build_report",
    "check_begin", "check_end", "classify_command", "classify_tool", "condensation_source", "end_episode",
    "end_step", "end_task", "estimate_tokens", "fork_prefix", "item_message", "kind_problem",
    "known_observation_ids", "memory_text", "needs_compaction", "new_state", "normalized", "observation_address",
    "over_target", "parse_memory", "parse_observation_uri", "plan_assembly", "plan_condense", "plan_fallback",
    "plan_fitting", "plan_request", "prefix_tokens", "pressure", "projection_text", "record_recall", "render_messages",
    "require_observation", "unread_ranges", "validate_memory", "working_set_tokens",
]
