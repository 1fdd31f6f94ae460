"""The rolling summary: pass 3 collapses pinned user messages and notes into one item.

The engine never sees content, so a rolled message is summarised by its digest (a short
preview the caller recorded) and, when it has one, its observation address. The summary
is capped at about ``summary_tokens``: beyond that, its oldest lines are counted, not kept.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .items import Item
from .observations import observation_address
from .text import clip, estimate_tokens

DIGEST_CHARS = 300
_HEADER = "[Rolling summary] Earlier user messages and notes, oldest first (exact text kept in the session log):"


class SummaryData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lines: list[str] = Field(default_factory=list)  # oldest first
    rolled: int = 0  # messages rolled in since the session began
    dropped: int = 0  # oldest lines no longer listed because of the cap
    first_seq: int | None = None
    last_seq: int | None = None

    def copy(self) -> SummaryData:  # type: ignore[override]  # the lists copied, unlike BaseModel.copy
        return self.model_copy(update={"lines": list(self.lines)})

    def covers(self, seq: int) -> bool:
        return self.first_seq is not None and self.first_seq <= seq <= (self.last_seq or seq)

    def roll(self, item: Item, cap_tokens: int) -> None:
        """Add one pinned message, then shed the oldest lines beyond the cap."""
        digest = clip(item.digest, DIGEST_CHARS) if item.digest else f"({item.size_chars} characters, no preview)"
        address = f" [{observation_address(item.observation_id)}]" if item.observation_id else ""
        self.lines.append(f"- seq {item.seq} {item.kind}: {digest}{address}")
        self.rolled += 1
        self.first_seq = item.seq if self.first_seq is None else min(self.first_seq, item.seq)
        self.last_seq = item.seq if self.last_seq is None else max(self.last_seq, item.seq)
        while len(self.lines) > 1 and estimate_tokens(summary_text(self)) > cap_tokens:
            self.lines.pop(0)
            self.dropped += 1


def summary_text(data: SummaryData) -> str:
    lines = [_HEADER]
    if data.dropped:
        lines.append(f"({data.dropped} older message(s) summarised away)")
    lines.extend(data.lines)
    return "\n".join(lines)
