"""A 2,000-turn synthetic session: bounded requests, nothing lost, cache-friendly growth.

Token costs come from a simple deterministic formula on sizes (no tiktoken, no rendering),
as a replay with a fixed tokenizer would provide them.
"""

from __future__ import annotations

import pytest

from workflows.context import engine as E
from workflows.context.items import Item, Kind, Projection

TURNS = 2_000


def costs(size: int, preview: int, obs: bool) -> dict[Projection, int]:
    return {
        Projection.FULL: size // 4 + 4,
        Projection.COMPACT: min(size, preview) // 4 + 60,
        Projection.REFERENCE: 30 if obs else min(size, 200) // 4 + 20,
        Projection.MINIMAL_REFERENCE: 15 if obs else 8,
    }


class Session:
    def __init__(self, budget: int, llm: bool):
        self.state = E.new_state(E.EngineConfig(context_window=200_000, max_output_tokens=8_000,
                                                budget_tokens=budget, llm_condensation=llm))
        self.preview = self.state.config.effective_preview_chars
        self.seq = 0
        self.added: list[Item] = []
        self.archived: dict[str, E.Item] = {}
        self.compactions = 0

    def add(self, kind: str, role: str, size: int, obs: bool = False, **fields) -> Item:
        self.seq += 1
        item = Item(id=f"{kind}-{self.seq}", seq=self.seq, kind=kind, role=role, size_chars=size,
                    observation_id=f"obs-{self.seq}" if obs else None, tokens=costs(size, self.preview, obs),
                    digest=f"{kind} {self.seq}", **fields)
        stored = E.add_item(self.state, item, fields.get("tool_name") and '{"command": "cat x"}')
        self.added.append(stored)
        return stored

    def turn(self, n: int) -> None:
        prose = (n * 131) % 1_200
        output = (n * 7_919) % 9_000 + 50
        if n % 97 == 0:
            output = 200_000  # a huge log now and then
        text_protocol = n % 5 == 0
        call = f"call-{n}"
        self.add(Kind.ASSISTANT.value, "assistant", prose, tool_call_ids=[] if text_protocol else [call])
        self.add(Kind.TOOL_RESULT.value, "user" if text_protocol else "tool", output, obs=True,
                 tool_name="bash", tool_call_ids=[] if text_protocol else [call], exit_code=1 if n % 23 == 0 else 0)

    def script(self, n: int) -> None:
        """Tasks, user messages, notes and episodes at fixed intervals."""
        state = self.state
        if n % 150 == 0:
            if state.current_task:
                E.end_task(state, state.current_task)
            self.add(Kind.USER.value, "user", 600 + n % 500)
            E.begin_task(state, f"task-{n}")
        elif n % 41 == 0:
            self.add(Kind.USER.value, "user", 300)
        if n % 67 == 0:
            self.add(Kind.NOTE.value, "user", 200)
        if n % 30 == 3 and not state.active_episodes:
            E.begin_episode(state, f"x{n}", "exploration", f"explore {n}")
        elif n % 30 == 9 and state.active_episodes:
            E.end_episode(state, state.active_episodes[-1], f"finding {n}")
            E.begin_episode(state, f"a{n}", "action", f"act {n}", depends_on=[f"x{n - 6}"])
        elif n % 30 == 14 and state.active_episodes:
            E.end_episode(state, state.active_episodes[-1])

    def compact(self) -> None:
        if not E.needs_compaction(self.state):
            return
        plan = E.plan_fallback(self.state)
        measured = {g.key: {Projection.FULL: len(g.text) // 4 + 4} for g in plan.generated}
        result = E.apply_plan(self.state, plan, measured)
        assert result.applied
        self.compactions += 1
        self.archived.update({i.id: i for i in result.archived})


def covered(state: E.ContextState, item: Item) -> bool:
    """Nothing lost: the item is still recallable or summarised somewhere the model sees."""
    if item.observation_id and item.kind in (Kind.TOOL_RESULT.value, Kind.HANDOFF.value):
        return True
    if state.checkpoint.covers(item.seq) or state.summary.covers(item.seq):
        return True
    live = state.items.get(item.id)
    return live is not None and live.reason.startswith("task-ended:")


@pytest.mark.parametrize("budget", [16_000, 32_000])
@pytest.mark.parametrize("llm", [False, True], ids=["fallback-only", "llm-enabled"])
def test_two_thousand_turns_stay_within_budget_and_lose_nothing(budget, llm):
    session = Session(budget, llm)
    session.add(Kind.SYSTEM.value, "system", 4_000)
    previous: list[tuple[str, Projection, int]] = []
    epoch = -1
    extended = 0
    max_items = 0
    for n in range(TURNS):
        session.script(n)
        session.turn(n)
        session.compact()
        plan = E.plan_request(session.state)
        assert plan.fits, plan.reason
        assert plan.total_tokens <= budget
        entries = [(e.item_id, e.projection, e.tokens) for e in plan.entries]
        if plan.layout_epoch == epoch:
            assert entries[: len(previous)] == previous, f"turn {n}: the request did not extend the previous one"
            extended += 1
        previous, epoch = entries, plan.layout_epoch
        max_items = max(max_items, len(session.state.items))
        if n % 250 == 249 or n == TURNS - 1:
            in_request = {e.item_id for e in plan.entries}
            lost = [i.id for i in session.added if i.id not in in_request and not covered(session.state, i)]
            assert not lost, f"turn {n}: items neither in the request nor recallable: {lost[:10]}"
    assert session.compactions > 20
    assert extended > TURNS * 0.6  # most requests extend the previous one byte for byte
    assert max_items < 400  # the working set is bounded by the budget, not by the session length
    report = E.build_report(session.state)
    assert report.working_set_tokens <= budget and report.counters.archived_items > 1_000
