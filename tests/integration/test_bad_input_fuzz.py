"""Bad input never wedges a session (issue 13): random sequences of updates, most of them
wrong, against one external session on real Temporal and PostgreSQL.

Every refused call fails that update only, with a typed error, and changes nothing stored
(items, observations) nor the context the engine holds; queries keep answering; the valid
calls in between keep working.
"""

from __future__ import annotations

import json
import random

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from worker import sessions
from workflows.contract import rejections
from workflows.contract.session import (
    AppendItemsRequest,
    CondenseRequest,
    EpisodeBegin,
    EpisodeEnd,
    ExternalItem,
    SessionConfig,
    SubmitRequest,
)
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.usefixtures("worker")

OPERATIONS = 45


class Fuzzer:
    def __init__(self, handle: WorkflowHandle, store, rng: random.Random) -> None:
        self.handle, self.store, self.rng = handle, store, rng
        self.calls = 0
        self.active: str | None = None  # the active episode and its kind
        self.active_kind = ""
        self.concluded: list[str] = []  # completed explorations
        self.episodes = 0

    # --- what a call may change ------------------------------------------------------
    async def snapshot(self) -> tuple:
        sid = self.handle.id
        rows = await self.store.list_items(sid, lane="main", limit=10_000)
        report = await sessions.context(self.handle)
        return ([(r.item_id, r.kind, json.dumps(r.content, sort_keys=True)) for r in rows],
                await self.store.count_observations(sid),
                [(i.id, i.lifecycle, i.projection, i.episode, i.task) for i in report.items],
                report.live_memory_id)

    # --- valid calls -------------------------------------------------------------------
    async def valid(self) -> None:
        choice = self.rng.choice(["user", "exchange", "exchange", "episode", "request"])
        if choice == "user":
            await self.append(ExternalItem(kind="user", text=f"task {self.calls}: do the next thing"))
            self.active = None  # a user message begins the next task: the open episode was abandoned
        elif choice == "exchange":
            self.calls += 1
            call = {"id": f"call-{self.calls}", "name": "bash", "arguments": json.dumps({"command": "ls"})}
            await self.append(ExternalItem(kind="assistant", text="", tool_calls=[call]),
                              ExternalItem(kind="tool_result", text=f"file{self.calls}.py\n",
                                           tool_call_id=call["id"], tool_name="bash", exit_code=0))
        elif choice == "episode" and self.active is None:
            self.episodes += 1
            episode_id = f"ep-{self.episodes}"
            kind = "action" if self.concluded and self.rng.random() < 0.5 else "exploration"
            deps = self.concluded[-1:] if kind == "action" else []
            await self.handle.execute_update(SessionWorkflow.begin_episode,
                                             EpisodeBegin(episode_id=episode_id, kind=kind, goal="look around",
                                                          depends_on=deps))
            self.active, self.active_kind = episode_id, kind
        elif choice == "episode":
            conclusion = "found it" if self.active_kind == "exploration" else None
            await self.handle.execute_update(SessionWorkflow.end_episode,
                                             EpisodeEnd(episode_id=self.active, conclusion=conclusion))
            if self.active_kind == "exploration":
                self.concluded.append(self.active)
            self.active = None
        else:
            prepared = await self.handle.execute_update(SessionWorkflow.prepare_request)
            assert prepared.fits

    async def append(self, *items: ExternalItem) -> None:
        await self.handle.execute_update(SessionWorkflow.append_items, AppendItemsRequest(items=list(items)))

    # --- refused calls -----------------------------------------------------------------
    def bad(self):
        """(name, coroutine making a call the session must refuse)."""
        rng = self.rng
        user = ExternalItem(kind="user", text="a user message before the bad one")
        choices = {
            "reserved kind": lambda: self.append(ExternalItem(
                kind=rng.choice(["episodes", "memory", "checkpoint", "summary", "capability"]), text="x")),
            "no content": lambda: self.append(user, ExternalItem(kind="note")),
            "text and content_ref": lambda: self.append(ExternalItem(kind="note", text="x", content_ref="obs-a")),
            "result without call id": lambda: self.append(ExternalItem(kind="tool_result", text="out")),
            "empty call id": lambda: self.append(ExternalItem(
                kind="assistant", text="", tool_calls=[{"id": "", "name": "bash", "arguments": "{}"}])),
            "content_ref not stored": lambda: self.append(
                *rng.sample([user, ExternalItem(kind="tool_result", content_ref="obs-never-stored",
                                                tool_call_id="c", tool_name="bash")], 2)),
            "unknown episode kind": lambda: self.begin("investigation", []),
            "exploration with dependencies": lambda: self.begin("exploration", self.concluded[-1:] or ["ep-x"]),
            "action without dependencies": lambda: self.begin("action", []),
            "action on unknown episode": lambda: self.begin("action", ["no-such-episode"]),
            "empty goal": lambda: self.begin("exploration", [], goal="   "),
            "end unknown episode": lambda: self.end("no-such-episode", "x"),
            "submit in external mode": lambda: self.handle.execute_update(SessionWorkflow.submit,
                                                                          SubmitRequest(text="hi")),
        }
        if self.active is not None:
            choices["nested episode"] = lambda: self.begin("exploration", [])
            if self.active_kind == "exploration":
                choices["exploration without conclusion"] = lambda: self.end(self.active, None)
            else:
                choices["action with a conclusion"] = lambda: self.end(self.active, "a conclusion")
        name = rng.choice(sorted(choices))
        return name, choices[name]()

    def begin(self, kind: str, deps: list[str], goal: str = "look") -> object:
        self.episodes += 1
        return self.handle.execute_update(SessionWorkflow.begin_episode, EpisodeBegin(
            episode_id=f"bad-{self.episodes}", kind=kind, goal=goal, depends_on=deps))

    def end(self, episode_id: str, conclusion: str | None) -> object:
        return self.handle.execute_update(SessionWorkflow.end_episode,
                                          EpisodeEnd(episode_id=episode_id, conclusion=conclusion))


def _typed(error: BaseException) -> str | None:
    """The rejection type at the bottom of a failed update."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type in rejections.REJECTION_TYPES:
            return cause.type
        cause = cause.__cause__ or getattr(cause, "cause", None)
    return None


@pytest.mark.parametrize("seed", [1, 2])
async def test_random_bad_updates_are_refused_typed_and_change_nothing(temporal_client, settings, store, seed):
    session_id = sessions.new_session_id(f"fuzz{seed}")
    handle = await sessions.start_session(temporal_client, SessionConfig(session_id=session_id, mode="external"),
                                          settings.task_queue)
    fuzz = Fuzzer(handle, store, random.Random(seed))
    await fuzz.append(ExternalItem(kind="user", text="start"))
    refused: dict[str, int] = {}
    for _ in range(OPERATIONS):
        if fuzz.rng.random() < 0.35:
            await fuzz.valid()
            continue
        before = await fuzz.snapshot()
        name, call = fuzz.bad()
        try:
            await call
        except WorkflowUpdateFailedError as failed:
            assert _typed(failed) is not None, (name, failed)
        else:
            pytest.fail(f"{name} was accepted")
        assert await fuzz.snapshot() == before, f"{name} changed the session"
        refused[name] = refused.get(name, 0) + 1
    # a garbage memory is answered (not raised) and changes nothing either
    before = await fuzz.snapshot()
    garbage = CondenseRequest(memory={"completed_work": "one string", "mood": []})
    result = await handle.execute_update(SessionWorkflow.condense_context, garbage)
    assert result.status == "rejected" and await fuzz.snapshot() == before
    assert len(refused) >= 6, refused  # the sequence exercised many kinds of bad input
    # still alive: a valid call after all that is taken and shows in the context
    await fuzz.append(ExternalItem(kind="user", text="the last word"))
    report = await sessions.context(handle)
    assert max(report.items, key=lambda i: i.seq).kind == "user"
    await handle.signal(SessionWorkflow.close)


@pytest.mark.parametrize("kind", ["episodes", "memory", "checkpoint", "summary", "capability"])
async def test_an_item_of_a_reserved_kind_is_refused_at_the_door(temporal_client, settings, store, kind):
    # the measured case: kind "episodes" passed the validator, then the engine raised inside
    # the handler after the row was stored, and every later workflow task failed
    handle = await sessions.start_session(temporal_client, SessionConfig(
        session_id=sessions.new_session_id("reserved"), mode="external"), settings.task_queue)
    fuzz = Fuzzer(handle, store, random.Random(0))
    await fuzz.append(ExternalItem(kind="user", text="start"))
    before = await fuzz.snapshot()
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await fuzz.append(ExternalItem(kind=kind, text="x"))
    assert _typed(refused.value) == rejections.INVALID_INPUT
    assert kind in str(refused.value.cause)  # the message names what was wrong
    assert await fuzz.snapshot() == before
    await fuzz.append(ExternalItem(kind="user", text="still answering"))
    assert max((await sessions.context(handle)).items, key=lambda i: i.seq).kind == "user"
    await handle.signal(SessionWorkflow.close)
