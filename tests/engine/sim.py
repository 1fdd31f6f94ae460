"""A small deterministic driver for engine tests: it plays the workflow and the activities.

Token costs come from a simple formula on the rendered message (no tiktoken), measured
for every projection exactly as the real token-counting activity does.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Literal

from activities.item_names import key_lines_of, names_of
from activities.items import call_lines
from workflows.context import engine as E
from workflows.context.items import Item, Kind, Projection

MEASURED = (Projection.FULL, Projection.COMPACT, Projection.REFERENCE, Projection.MINIMAL_REFERENCE)


def count_tokens(message: dict | None) -> int:
    """The test stand-in for tiktoken: about four characters per token."""
    return 0 if message is None else len(json.dumps(message, ensure_ascii=False, sort_keys=True)) // 4 + 3


def make_config(**overrides) -> E.EngineConfig:
    values = {"context_window": 20_000, "max_output_tokens": 4_000}  # usable input 16,000
    values.update(overrides)
    return E.EngineConfig(**values)


class Sim:
    def __init__(self, config: E.EngineConfig | None = None, **overrides):
        self.state = E.new_state(config or make_config(**overrides))
        self.seq = 0
        self.contents: dict[str, E.ItemContent] = {}
        self.added: dict[str, Item] = {}  # every lane item ever added (as added)
        self.archived: dict[str, Item] = {}
        self.calls = 0
        self.applied: list[E.CompactionPlan] = []

    @property
    def preview(self) -> int:
        return self.state.config.effective_preview_chars

    # --- adding items ------------------------------------------------------------------
    def _add(self, kind: str, role: str, content: E.ItemContent, arguments: str | None = None, **fields) -> Item:
        self.seq += 1
        item_id = fields.pop("id", f"{kind[:3]}-{self.seq}")
        config = self.state.config
        if (config.checkpoint_names or config.checkpoint_lines) and kind != Kind.CAPABILITY.value:
            fields.setdefault("names", names_of(content))  # as activities.items.finish_item
        if config.checkpoint_lines and kind != Kind.CAPABILITY.value:
            fields.setdefault("lines", key_lines_of(content))
        if kind == Kind.ASSISTANT.value:
            fields.setdefault("calls", call_lines(content))  # as activities.items.finish_item
        item = Item(id=item_id, seq=self.seq, kind=kind, role=role, size_chars=len(content.text), **fields)
        item.tokens = {p: count_tokens(E.item_message(item, content, p, self.preview)) for p in MEASURED}
        self.contents[item_id] = content
        stored = E.add_item(self.state, item, arguments)
        self.added[item_id] = copy.deepcopy(stored)
        return stored

    def system(self, text: str = "You are a careful coding agent.") -> Item:
        return self._add(Kind.SYSTEM.value, "system", E.ItemContent(text=text))

    def user(self, text: str, obs: bool = False, **fields) -> Item:
        fields.setdefault("digest", text[:120])
        if obs:
            fields["observation_id"] = f"obs-u{self.seq + 1}"
        return self._add(Kind.USER.value, "user", E.ItemContent(text=text), **fields)

    def note(self, text: str, **fields) -> Item:
        return self._add(Kind.NOTE.value, "user", E.ItemContent(text=text), digest=text[:120], **fields)

    def decision(self, text: str) -> Item:
        return self._add(Kind.DECISION.value, "user", E.ItemContent(text=text), digest=text[:120])

    def assistant(self, text: str = "", calls: Sequence[tuple[str, str]] = (), **fields) -> Item:
        tool_calls = [E.ToolCall(id=f"call-{self.seq + 1}-{n}", name=name, arguments=args)
                      for n, (name, args) in enumerate(calls)]
        content = E.ItemContent(text=text, tool_calls=tool_calls)
        fields.setdefault("digest", text[:120])
        return self._add(Kind.ASSISTANT.value, "assistant", content,
                         tool_call_ids=[c.id for c in tool_calls], **fields)

    def tool(self, call_id: str, output: str, name: str = "bash", arguments: str | None = None,
             exit_code: int | None = 0, role: str = "tool", **fields) -> Item:
        content = E.ItemContent(text=output, tool_call_id=call_id if role == "tool" else None, tool_name=name)
        obs = fields.pop("observation_id", f"obs-{self.seq + 1:05d}")
        return self._add(Kind.TOOL_RESULT.value, role, content, arguments, tool_name=name, exit_code=exit_code,
                         tool_call_ids=[call_id] if call_id else [], observation_id=obs,
                         digest=fields.pop("digest", (arguments or "")[:80]), **fields)

    def exchange(self, command: str, output: str, text: str = "", exit_code: int = 0, name: str = "bash") -> tuple[Item, Item]:
        """One assistant turn calling one shell command, and its result."""
        arguments = json.dumps({"command": command})
        assistant = self.assistant(text, [(name, arguments)])
        result = self.tool(assistant.tool_call_ids[0], output, name=name, arguments=arguments, exit_code=exit_code)
        return assistant, result

    def capability(self, item_id: str, tokens: int, scope: Literal["step", "task"] = "task") -> E.Admission:
        item = Item(id=item_id, seq=0, kind=Kind.CAPABILITY.value, role="system", tokens={Projection.FULL: tokens})
        self.contents[item_id] = E.ItemContent(text=f"skill {item_id} " + "s" * (tokens * 4))
        return E.admit_capability(self.state, item, scope)

    # --- compaction ----------------------------------------------------------------------
    def measure(self, plan: E.CompactionPlan) -> dict[str, dict[Projection, int]]:
        return {g.key: {Projection.FULL: count_tokens({"role": g.role, "content": g.text})} for g in plan.generated}

    def apply(self, plan: E.CompactionPlan) -> E.ApplyResult:
        result = E.apply_plan(self.state, plan, self.measure(plan))
        if result.applied:
            self.applied.append(plan)
            for created in result.created:
                self.contents[created.item_id] = E.ItemContent(text=created.text)
            for item in result.archived:
                self.archived[item.id] = item
        return result

    def compact_if_needed(self) -> E.ApplyResult | None:
        if not E.needs_compaction(self.state):
            return None
        return self.apply(E.plan_fallback(self.state))

    def request(self, ladder: Projection = Projection.FULL) -> E.RequestPlan:
        return E.plan_request(self.state, ladder)

    def messages(self, plan: E.RequestPlan) -> list[dict]:
        items = dict(self.state.items)
        return E.render_messages(plan.pairs, items, self.contents, self.preview)


def big(n: int, seed: str = "x") -> str:
    """Deterministic filler text of ``n`` characters."""
    line = f"{seed} line of output with some words and numbers 0123456789\n"
    return (line * (n // len(line) + 1))[:n]
