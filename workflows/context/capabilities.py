"""Task capability context: loaded tool schemas and activated skill bodies.

They do not follow the conversation lifecycle: they are admitted against a ceiling derived
from the usable input budget (usable − 512; 8,000 only for an unknown model), charged
against the same budget as the conversation, never evicted automatically, and cleared by
scope: step-scoped items after one model step, task-scoped ones when the task ends.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .budget import capability_tokens, cost
from .errors import EngineError
from .items import Item, Kind, Lifecycle
from .layout import remove_from_order
from .ledger import ContextState, copy_item

Scope = Literal["step", "task"]


class Admission(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item_id: str
    admitted: bool
    scope: str
    need: int  # estimated tokens of the item
    margin: int  # safety margin below the usable input budget
    ceiling: int
    available: int  # ceiling − tool definitions − capability context already admitted
    message: str


class SkillStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["admitted", "skipped"]
    message: str
    admission: Admission


def admit_capability(state: ContextState, item: Item, scope: Scope) -> Admission:
    """Admit ``item`` (kind capability) if it fits under the ceiling; a refusal changes nothing."""
    if item.kind != Kind.CAPABILITY.value:
        raise EngineError(f"item {item.id!r} has kind {item.kind!r}; only capability items are admitted")
    if scope not in ("step", "task"):
        raise EngineError(f"capability scope must be 'step' or 'task', got {scope!r}")
    config = state.config
    need = cost(state, item)
    ceiling = config.capability_ceiling
    margin = config.capability_margin
    existing = state.items.get(item.id)
    if existing is not None:
        if existing.kind != Kind.CAPABILITY.value:
            raise EngineError(f"item id {item.id!r} is already used by a {existing.kind} item")
        return Admission(item_id=item.id, admitted=True, scope=existing.scope or scope, need=need, margin=margin,
                         ceiling=ceiling, available=_available(state), message=f"{item.id} is already admitted")
    available = _available(state)
    if need > available:
        message = (
            f"capability {item.id!r} does not fit: estimated need {need} tokens, safety margin {margin}, "
            f"ceiling {ceiling} ({_ceiling_basis(state)}); {available} tokens available after tool "
            f"definitions ({config.tool_definition_tokens}) and admitted capability context "
            f"({capability_tokens(state)})"
        )
        return Admission(item_id=item.id, admitted=False, scope=scope, need=need, margin=margin, ceiling=ceiling,
                         available=available, message=message)
    stored = copy_item(item)
    stored.scope, stored.task = scope, state.current_task
    stored.lifecycle, stored.reason = Lifecycle.PINNED, f"capability:admitted({scope})"
    state.items[stored.id] = stored
    if scope == "task":  # step-scoped context is placed after everything by the planner
        state.order.append(stored.id)
    state.generation += 1
    return Admission(item_id=item.id, admitted=True, scope=scope, need=need, margin=margin, ceiling=ceiling,
                     available=available - need, message=f"admitted {item.id} ({need} tokens, {scope} scope)")


def _available(state: ContextState) -> int:
    return state.config.capability_ceiling - state.config.tool_definition_tokens - capability_tokens(state)


def _ceiling_basis(state: ContextState) -> str:
    config = state.config
    if not config.model_known:
        return "model unknown: the fixed fallback ceiling"
    return f"usable input {config.usable_input} − margin {config.capability_margin}"


def admit_manual_skill(state: ContextState, item: Item) -> SkillStatus:
    """A slash-skill the user asked for: skipped with a status message when it does not fit."""
    admission = admit_capability(state, item, "task")
    if admission.admitted:
        return SkillStatus(status="admitted", message=f"Skill {item.id} activated.", admission=admission)
    return SkillStatus(status="skipped", message=f"Skill {item.id} skipped: {admission.message}", admission=admission)


def clear_capabilities(state: ContextState, scope: Scope) -> list[str]:
    """Remove every capability item of ``scope``; returns their ids (in admission order)."""
    cleared = [i.id for i in state.items.values() if i.kind == Kind.CAPABILITY.value and i.scope == scope]
    if not cleared:
        return []
    for item_id in cleared:
        del state.items[item_id]
    remove_from_order(state, set(cleared))
    state.generation += 1
    state.layout_epoch += 1
    return cleared
