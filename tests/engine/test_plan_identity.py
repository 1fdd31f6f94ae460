"""Compaction and request plans stay byte-identical to those of the engine before the
incremental fallback (issue 16, part 4): a fixed set of generated sessions is played and
every fallback plan, apply result, request plan, rendered request and state is hashed.

The digests below were recorded with the engine as it was before the fallback was made
incremental (commit b7c283c). A change that alters what the engine plans, on purpose,
updates them (``python -m tests.engine.test_plan_identity`` prints the new values); a
speed-up never should. Fixes made since, each behind an ``EngineConfig`` flag that replays
of older histories turn off, are played with their flag off (``AS_RECORDED``), so the
digests still pin the engine of b7c283c; the fixes have tests of their own.
"""

from __future__ import annotations

import hashlib
import json
import random

from tests.engine.test_properties import COMMANDS, Driver
from workflows.context import engine as E
from workflows.context.config import EngineConfig
from workflows.context.content import ItemContent, ToolCall
from workflows.context.items import Item, Kind, Projection, ToolClass
from workflows.context.render_cache import RequestRenderer

RECORDED = {
    "sessions": "930ec885eb95d8a127055af776fb842bd455a0e6120e1d8679f2d6006bbf9a68",
    "bench": "b7188c0a67a1e6a71c85d9660a406d3be034ae702e388ca95e4f864b26c3516b",
}


# EngineConfig flags of fixes made after the digests were recorded, and their value then
AS_RECORDED = {"sweep_keeps_markers": False, "bound_active_episodes": False, "roll_kept_when_unfit": False,
               "shrink_newest_group": False}
# Fields added since, left out of the hashed dumps: the sessions below leave them at their
# defaults (no item names, no calls shown; the cost profile's knobs as the engine had them), which
# ``_unchanged`` checks, so leaving them out hides nothing.
ADDED_CONFIG = ("checkpoint_names", "compact_at_ratio", "preview_share", "budget_notice", "checkpoint_calls",
                "checkpoint_lines", "checkpoint_brief_references", "keep_task_statement", "checkpoint_pool_lines",
                "preview_lines")
STATE_EXCLUDE = {"config": {*AS_RECORDED, *ADDED_CONFIG}, "items": {"__all__": {"names", "calls", "lines", "preview_lines"}},
                 "checkpoint": {"names": True, "lines": True, "observations": {"__all__": {"call"}}},
                 "counters": {"archived_observations"},  # a count added since, derived from the archived items
                 "notices": True, "notice_task": True}  # the budget notice's (off in these sessions)
PLAN_EXCLUDE = {"checkpoint": {"names": True, "lines": True, "observations": {"__all__": {"call"}}}}
RESULT_EXCLUDE = {"archived": {"__all__": {"names", "calls", "lines", "preview_lines"}}}


def plan_json(plan) -> str:
    """The plan's JSON as the engine of b7c283c wrote it: one transition per item where the
    plan now holds runs of them (the same transitions, in the same order)."""
    fields = plan.model_dump(mode="json", exclude=PLAN_EXCLUDE)
    legacy = {("transitions" if key == "runs" else key): value for key, value in fields.items()}
    legacy["transitions"] = [{"item_id": t.item_id, "lifecycle": t.lifecycle.value, "projection": t.projection.value,
                              "reason": t.reason} for t in plan.transitions]
    return json.dumps(legacy, separators=(",", ":"), ensure_ascii=False)


def state_json(state) -> str:
    """The state's JSON as the engine of b7c283c wrote it: the budget under its old name."""
    fields = state.model_dump(mode="json", exclude=STATE_EXCLUDE)
    fields["config"] = {("budget_override" if key == "budget_tokens" else key): value
                        for key, value in fields["config"].items()}
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def _unchanged(state) -> None:
    defaults = EngineConfig.model_fields
    assert all(getattr(state.config, f) == defaults[f].default for f in ADDED_CONFIG)
    assert not state.checkpoint.names and not any(item.names for item in state.items.values())
    assert not state.checkpoint.lines and not any(item.lines for item in state.items.values())
    assert not any(item.preview_lines for item in state.items.values())
    # items carry their calls (activities.items.finish_item), which checkpoint_calls (off) never shows
    assert not any(note.call for note in state.checkpoint.observations)


class Recorder(Driver):
    """Plays a script; hashes everything a compaction and the next request produce."""

    def __init__(self, budget: int, llm: bool, episodes: bool = True):
        super().__init__(budget, llm, episodes)
        self.state.config = self.state.config.model_copy(update=AS_RECORDED)
        self.renderer = RequestRenderer()
        self.digest = hashlib.sha256()

    def note_text(self, text: str) -> None:
        self.digest.update(text.encode())
        self.digest.update(b"\n")

    def compact(self) -> None:
        if E.needs_compaction(self.state):
            plan = E.plan_fallback(self.state)
            self.note_text(plan_json(plan))
            self.note_text(self.apply(plan).model_dump_json(exclude=RESULT_EXCLUDE))
        for ladder in (Projection.FULL, Projection.REFERENCE, Projection.MINIMAL_REFERENCE):
            self.note_text(E.plan_request(self.state, ladder).model_dump_json())
        request = E.plan_request(self.state)
        messages = self.renderer.render(request.entries, self.state.items, self.contents, self.preview)
        self.note_text(json.dumps(messages, sort_keys=True))
        _unchanged(self.state)
        self.note_text(state_json(self.state))


def _script(rng: random.Random, swept: bool, steps: int) -> list[tuple]:
    """One script of the property tests' operations (moderate exchanges when ``swept``)."""
    kinds = ["exchange"] * 12 + ["user", "note", "explore", "act", "end_episode", "end_episode", "task"]
    if not swept:
        kinds += ["decision", "condense"]
    script: list[tuple] = []
    for _ in range(rng.randint(20, steps)):
        kind = rng.choice(kinds)
        if kind == "exchange":
            size, prose = (rng.randint(0, 3_000), rng.randint(0, 600)) if swept else (
                rng.randint(0, 16_000), rng.randint(0, 4_000))
            script.append((kind, rng.choice(COMMANDS), size, prose, rng.choice([0, 0, 0, 1]), rng.random() < 0.3))
        elif kind in ("user", "note", "decision"):
            script.append((kind, rng.randint(1, 1_000 if swept else 8_000)))
        else:
            script.append((kind,))
    return script


def sessions_digest(count: int = 45) -> str:
    """Tight budgets (mostly emergencies), and moderate exchanges under roomier budgets, where
    the fallback meets its target and the cache-aware sweep takes more."""
    rng = random.Random(16)
    total = hashlib.sha256()
    for n in range(count):
        swept = n % 3 != 0
        budget = rng.choice([4_000, 8_000, 16_000, 24_000] if swept else [1_500, 3_000, 6_000, 12_000])
        recorder = Recorder(budget, rng.random() < 0.3, episodes=n % 5 != 4)
        recorder.run(_script(rng, swept, 150 if budget > 8_000 else 80))
        total.update(recorder.digest.digest())
    return total.hexdigest()


def bench_digest(n: int = 600) -> str:
    """The compaction step of ``bench/plan_scaling.py`` (smaller): half the tokens over budget."""
    tokens = {Projection.FULL: 400, Projection.COMPACT: 400, Projection.REFERENCE: 24, Projection.MINIMAL_REFERENCE: 12}
    config = EngineConfig(context_window=128_000, max_output_tokens=4096, budget_tokens=n * 115,
                          llm_condensation=False, **AS_RECORDED)
    state = E.new_state(config)
    contents: dict[str, ItemContent] = {"itm-0": ItemContent(text="rules"), "itm-1": ItemContent(text="task")}
    E.add_item(state, Item(id="itm-0", seq=0, kind=Kind.SYSTEM, role="system", tokens={Projection.FULL: 200}))
    E.begin_task(state, "task-0")
    E.add_item(state, Item(id="itm-1", seq=1, kind=Kind.USER, role="user", tokens={Projection.FULL: 300}))
    classes = [ToolClass.READ, ToolClass.RUN, ToolClass.WRITE, ToolClass.ERROR]
    renderer, digest = RequestRenderer(), hashlib.sha256()
    for seq in range(2, n, 2):
        call = f"call-{seq}"
        E.add_item(state, Item(id=f"itm-{seq}", seq=seq, kind=Kind.ASSISTANT, role="assistant", tool_call_ids=[call],
                               tokens={Projection.FULL: 60}, size_chars=120, digest=f"step {seq}"))
        contents[f"itm-{seq}"] = ItemContent(text=f"Step {seq}.", tool_calls=[ToolCall(id=call, name="bash",
                                                                                        arguments="{}")])
        E.add_item(state, Item(id=f"itm-{seq + 1}", seq=seq + 1, kind=Kind.TOOL_RESULT, role="tool", tool_name="bash",
                               tool_call_ids=[call], tool_class=classes[seq % 4], exit_code=0,
                               observation_id=f"obs-{seq + 1:06d}", tokens=dict(tokens), size_chars=1600,
                               digest="passed"))
        contents[f"itm-{seq + 1}"] = ItemContent(text=f"{seq} passed", tool_call_id=call, tool_name="bash")
        if E.needs_compaction(state):
            plan = E.plan_fallback(state)
            digest.update(plan_json(plan).encode())
            result = E.apply_plan(state, plan)
            digest.update(result.model_dump_json(exclude=RESULT_EXCLUDE).encode())
            for created in result.created:
                contents[created.item_id] = ItemContent(text=created.text)
        request = E.plan_request(state)
        digest.update(request.model_dump_json().encode())
        digest.update(json.dumps(renderer.render(request.entries, state.items, contents,
                                                 state.config.effective_preview_chars)).encode())
    _unchanged(state)
    digest.update(state_json(state).encode())
    return digest.hexdigest()


def test_generated_sessions_plan_as_before():
    assert sessions_digest() == RECORDED["sessions"]


def test_the_bench_compaction_plans_as_before():
    assert bench_digest() == RECORDED["bench"]


if __name__ == "__main__":
    print(json.dumps({"sessions": sessions_digest(), "bench": bench_digest()}, indent=4))
