"""Where a gateway call's time went: the answer's ``Server-Timing`` header (W3C), one entry per
phase in milliseconds, so an agent's operator (and ``bench/gateway.py``) can tell the time Lanes
adds from the upstream model's own.

Phases, in the order a call takes them (a phase a call skips is left out):

- ``read``: the body read and parsed (the agent's whole conversation);
- ``find``: which session holds the conversation (the turns table), the new turns claimed, and an
  earlier answer's write waited for when it had not finished;
- ``open``: a new session started (the conversation's first call, or a branch);
- ``step``: the new turns stored and the bounded request planned (one workflow update);
- ``render``: the planned request read from the store and laid out in the upstream's protocol;
- ``upstream``: the upstream model, the whole answer (each round of it), or until its stream opens;
- ``recall``: the gateway answering the model's recall calls between rounds;
- ``keep``: the answer written beside the conversation before the agent gets it;
- ``total``: from the call's first byte read to its answer ready to send.

What it cannot see: time in the HTTP server before the handler runs and while the answer is
written out, and for a streamed answer everything after the upstream's stream opened.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

HEADER = "Server-Timing"


class CallTiming:
    """Phase durations of one call: ``lap`` charges the time since the last lap (or the end of
    the last timed wait) to a phase; ``timed`` charges one awaited call to its phase (the code
    between a lap and it is charged to no phase: it shows in the total only)."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self._add(phase, now - self._last)
        self._last = now

    async def timed(self, phase: str, awaitable: Awaitable[T]) -> T:
        began = time.perf_counter()
        try:
            return await awaitable
        finally:
            self._last = time.perf_counter()
            self._add(phase, self._last - began)

    def _add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def header(self) -> str:
        """The ``Server-Timing`` value: each phase, then the total so far."""
        total = time.perf_counter() - self.started
        return ", ".join(f"{name};dur={seconds * 1000:.2f}"
                         for name, seconds in [*self.phases.items(), ("total", total)])


def parse_header(value: str) -> dict[str, float]:
    """A ``Server-Timing`` value as {phase: milliseconds} (entries without a duration left out)."""
    phases: dict[str, float] = {}
    for entry in value.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        for param in params:
            key, _, number = param.partition("=")
            if key == "dur" and name:
                try:
                    phases[name] = float(number)
                except ValueError:
                    pass
    return phases
