"""What one upstream call answered, protocol-neutral, and how the gateway's own recall calls
are split from the calls the agent must see.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from worker.api.gateway.conversation import Turn
from workflows.contract.tools import RECALL_TOOL


@dataclass(frozen=True)
class Usage:
    """The provider's counts of one or more calls (prompt includes cached input)."""

    prompt: int = 0
    cached: int = 0
    completion: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt + other.prompt, self.cached + other.cached, self.completion + other.completion)


def count(value: Any) -> int:
    """A provider's token count: 0 when it is missing, negative or not an integer."""
    return value if isinstance(value, int) and value >= 0 else 0


@dataclass(frozen=True)
class Answer:
    """The model's message (``turn``), why it stopped, its usage and the upstream's own JSON."""

    turn: Turn
    stop: str | None
    usage: Usage
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def recall_calls(self) -> list[str]:
        return [c.id for c in self.turn.tool_calls if c.name == RECALL_TOOL]

    def for_agent(self) -> Turn:
        """The message as the agent sees it: without the gateway's recall calls (answered by it)."""
        return replace(self.turn, tool_calls=tuple(c for c in self.turn.tool_calls if c.name != RECALL_TOOL))


def stored_answer(rounds: list[Answer], asked: str) -> dict[str, Any]:
    """The answer row the gateway keeps for a call (replayed when the call is retried);
    ``asked``: the model the agent asked for (the upstream may name it otherwise)."""
    final = rounds[-1]
    agent = final.for_agent()
    total = Usage()
    for answer in rounds:
        total = total + answer.usage
    return {
        "text": agent.text, "tool_calls": [[c.id, c.name, c.arguments] for c in agent.tool_calls],
        "stop": final.stop, "usage": [total.prompt, total.cached, total.completion], "raw": final.raw,
        "stripped": len(agent.tool_calls) != len(final.turn.tool_calls), "asked": asked,
    }
