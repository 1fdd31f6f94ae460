"""Subagent lanes: a child's requests start with its parent's prefix, byte for byte."""

from __future__ import annotations

from workflows.context import engine as E
from workflows.context.items import Projection

from .sim import Sim, big, make_config


def _parent() -> Sim:
    parent = Sim()
    parent.system()
    parent.user("Fix the failing auth tests.")
    for n in range(4):
        parent.exchange(f"cat src/auth_{n}.py", big(1_500, f"auth{n}"))
    return parent


def _child(parent: Sim, shared: list[E.SharedEntry], **overrides) -> Sim:
    child = Sim(make_config(id_prefix="sub-0001-", **overrides))
    child.state = E.new_state(child.state.config, shared)
    child.seq = 10_000  # the child's ids never collide with the parent's
    child.contents.update(parent.contents)
    return child


def _messages(child: Sim, parent: Sim, plan: E.RequestPlan) -> list[dict]:
    items = {**parent.state.items, **child.state.items}
    return E.render_messages(plan.pairs, items, child.contents, parent.preview)


def test_child_request_starts_with_the_parent_request_byte_for_byte():
    parent = _parent()
    sent = parent.request()
    shared = E.fork_prefix(parent.state, sent, max_tokens=10_000)
    assert shared is not None and [e.item_id for e in shared] == [e.item_id for e in sent.entries]
    child = _child(parent, shared, preview_chars=parent.preview)
    child.user("Subagent brief: find why test_login fails.")
    child.exchange("pytest tests/test_login.py", big(800, "pytest"))
    plan = child.request()
    parent_messages = parent.messages(sent)
    assert _messages(child, parent, plan)[: len(parent_messages)] == parent_messages
    assert plan.stable_prefix_entries >= len(shared)


def test_the_shared_prefix_is_charged_against_the_childs_budget():
    parent = _parent()
    shared = E.fork_prefix(parent.state, parent.request(), max_tokens=10_000)
    child = _child(parent, shared)
    alone = Sim(make_config(id_prefix="sub-0001-"))
    assert E.prefix_tokens(shared) > 0
    assert E.budget(child.state) == E.budget(alone.state) - E.prefix_tokens(shared)
    assert E.build_report(child.state).shared_prefix_tokens == E.prefix_tokens(shared)


def test_child_compaction_keeps_the_shared_prefix_and_prefixes_generated_ids():
    parent = _parent()
    sent = parent.request()
    shared = E.fork_prefix(parent.state, sent, max_tokens=10_000)
    child = _child(parent, shared, preview_chars=parent.preview)
    child.user("Subagent brief: read every module.")
    for n in range(80):
        child.compact_if_needed()
        plan = child.request()
        assert plan.fits, plan.reason
        assert [(e.item_id, e.projection) for e in plan.entries[: len(shared)]] == \
            [(e.item_id, e.projection) for e in shared]
        child.exchange(f"cat lib/module_{n}.py", big(2_500, f"mod{n}"))
    assert child.applied, "the branch outgrew the child's budget, so the child compacted"
    created = [ref.item_id for ref in child.state.generated.values()]
    assert created and all(i.startswith("sub-0001-") for i in created)


def test_fork_falls_back_to_the_stable_segments_then_refuses():
    parent = _parent()
    sent = parent.request()
    whole = sum(e.tokens for e in sent.entries)
    segments = sent.entries[: sent.stable_entries + sent.memory_entries]
    segment_tokens = sum(e.tokens for e in segments)
    assert segment_tokens < whole
    fallback = E.fork_prefix(parent.state, sent, max_tokens=whole - 1)
    assert [e.item_id for e in fallback] == [e.item_id for e in segments]
    assert E.fork_prefix(parent.state, sent, max_tokens=segment_tokens - 1) is None


def test_a_prefix_that_cuts_a_call_from_its_result_is_not_shared():
    parent = _parent()
    sent = parent.request()
    # a stable segment ending right after an assistant turn, before its result
    cut = next(n for n, e in enumerate(sent.entries) if parent.state.items[e.item_id].role == "assistant") + 1
    plan = sent.model_copy(update={"stable_entries": cut, "memory_entries": 0})
    whole = sum(e.tokens for e in sent.entries)
    assert E.fork_prefix(parent.state, plan, max_tokens=whole - 1) is None


def test_fork_leaves_step_scoped_capabilities_out():
    parent = _parent()
    assert parent.capability("skill-step", 50, scope="step").admitted
    sent = parent.request()
    assert sent.step_entries == 1
    shared = E.fork_prefix(parent.state, sent, max_tokens=10_000)
    assert "skill-step" not in {e.item_id for e in shared}
    assert len(shared) == len(sent.entries) - 1


def test_overflow_ladder_leaves_the_shared_prefix_as_the_parent_sent_it():
    parent = _parent()
    sent = parent.request()
    shared = E.fork_prefix(parent.state, sent, max_tokens=10_000)
    child = _child(parent, shared, preview_chars=parent.preview)
    child.user("brief")
    child.exchange("cat a.py", big(3_000, "a"))
    child.exchange("cat b.py", big(3_000, "b"))
    for ladder in (Projection.REFERENCE, Projection.MINIMAL_REFERENCE):
        plan = child.request(ladder)
        assert [(e.item_id, e.projection) for e in plan.entries[: len(shared)]] == \
            [(e.item_id, e.projection) for e in shared]
