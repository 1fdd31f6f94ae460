"""OpenAI Agents SDK integration: a Lanes external session as the SDK's ``Session``, and a
per-call model input filter so that compaction also happens inside one run.

    lanes = await LanesSession.create(client, agent=agent, budget_tokens=8_000)
    result = await Runner.run(agent, "task", session=lanes, run_config=lanes.run_config())

- ``create(agent=...)`` declares the agent's instructions and function tools on the session,
  so the budget is charged for the tools the SDK sends with every call.

- ``add_items`` appends the SDK's items (Responses API items) as they are; the session
  stores them verbatim, reasoning included (``responses_items``).
- ``get_items`` returns that raw history as the SDK gave it, every item, compacted or not.
- ``input_filter`` (``RunConfig.call_model_input_filter``) replaces the input of every model
  call with the session's compacted request in Responses format, so a long run stays within
  the session's budget. What the call's input holds that the session does not yet (a
  streamed run saves its turn only after its calls) is stored first, and not again when the
  SDK saves it. The agent's own instructions are kept.
- The store is append-only: ``pop_item`` and ``clear_session`` do what the protocol says
  (the history no longer holds the item, or anything) by moving to a new Lanes session with
  the same configuration, re-appending the history minus the popped item (none, for a
  clear). The previous Lanes session is left as it was, stored and inspectable.
  ``session_id`` stays the name the SDK knows; ``lanes_session_id`` is the session in use.
  A pop costs a copy of the history: the SDK pops only to roll back a failed retry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agents import Agent, FunctionTool
from agents.memory.session_settings import SessionSettings
from agents.run_config import CallModelData, ModelInputData, RunConfig

from lanes_client.client import AsyncLanesClient

PAGE = 500
BATCH = 100  # items one append takes (it makes at most as many session items)


def _plain(item: Any) -> dict[str, Any]:
    """An SDK input item as JSON (they are TypedDicts; a model object is dumped)."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(mode="json", exclude_unset=True)
    return json.loads(json.dumps(item, default=str))


def agent_tool_definitions(agent: Agent[Any]) -> list[dict[str, Any]]:
    """The agent's function tools as the session declares them (Chat Completions form), so
    the budget counts what the SDK sends with every call. Hosted and MCP tools are not known
    until a run lists them: declare those yourself with ``tool_definitions``."""
    return [{"type": "function", "function": {"name": tool.name, "description": tool.description,
                                              "parameters": tool.params_json_schema}}
            for tool in agent.tools if isinstance(tool, FunctionTool)]


class LanesSession:
    """The Agents SDK ``Session`` protocol over a Lanes external session."""

    session_settings: SessionSettings | None = None

    def __init__(self, client: AsyncLanesClient, session_id: str, *, config: dict[str, Any] | None = None) -> None:
        self.client = client
        self.session_id = session_id  # the name the SDK knows; stays when pop/clear move on
        self.lanes_session_id = session_id
        self._config = config
        self._added = 0  # items added through this object: part of each append's idempotency key
        # The SDK items the session holds, when known (a new session, or after get_items): the
        # input filter stores what a call's input holds beyond them. A streamed run saves its
        # turn only after its calls, so the filter stores it first (``_ahead``) and add_items
        # skips it when the SDK saves it.
        self._stored: int | None = None
        self._ahead: list[dict[str, Any]] = []

    @classmethod
    async def create(cls, client: AsyncLanesClient, agent: Agent[Any] | None = None, **config: Any) -> LanesSession:
        """A new external session (``tools`` defaults to ``none``: the SDK runs its own tools);
        ``agent``: its instructions (when text) and function tools are the session's."""
        config.setdefault("tools", "none")
        if agent is not None:
            if isinstance(agent.instructions, str):
                config.setdefault("system_prompt", agent.instructions)
            if definitions := agent_tool_definitions(agent):
                config.setdefault("tool_definitions", definitions)
        created = await client.create_session(mode="external", **config)
        session = cls(client, created.session_id, config=config)
        session._stored = 0
        return session

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The history as the SDK added it, oldest first (the latest ``limit`` when given)."""
        items: list[dict[str, Any]] = []
        after = -1
        while True:
            page = await self.client.list_items(self.lanes_session_id, after_seq=after, limit=PAGE)
            for stored in page.items:
                items.extend(stored.responses_items)  # items appended in other forms are not the SDK's
            if page.next_after_seq is None:
                break
            after = page.next_after_seq
        self._stored, self._ahead = len(items), []
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        plain = [_plain(item) for item in items]
        stored_ahead = 0  # the leading items the input filter stored for this turn already
        while stored_ahead < min(len(plain), len(self._ahead)) and plain[stored_ahead] == self._ahead[stored_ahead]:
            stored_ahead += 1
        self._ahead = self._ahead[stored_ahead:] if stored_ahead else []
        await self._append(plain[stored_ahead:])

    async def _append(self, plain: list[dict[str, Any]]) -> None:
        for start in range(0, len(plain), BATCH):
            batch = plain[start:start + BATCH]
            # the same batch at the same place (the SDK calling again after a failed call) is
            # stored once; the same items later in the session are new items
            key = hashlib.sha256(json.dumps([self.lanes_session_id, self._added, batch], sort_keys=True)
                                 .encode()).hexdigest()[:40]
            await self.client.append_items(self.lanes_session_id, responses_items=batch, idempotency_key=f"sdk-{key}")
            self._added += len(batch)
            if self._stored is not None:
                self._stored += len(batch)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the newest item: the history minus it moves to a new session."""
        items = await self.get_items()
        if not items:
            return None
        await self._move_to_new_session(items[:-1])
        return items[-1]

    async def clear_session(self) -> None:
        """Forget every item: later calls use a new, empty session."""
        await self._move_to_new_session([])

    async def _move_to_new_session(self, keep: list[dict[str, Any]]) -> None:
        config = self._config
        if config is None:
            stored = (await self.client.get_session(self.lanes_session_id)).config
            config = {k: v for k, v in stored.items() if k in _CREATE_FIELDS and v is not None}
            config["tools"] = "none"
        created = await self.client.create_session(mode="external", **config)
        self.lanes_session_id = created.session_id
        self._config = config
        self._stored, self._ahead = 0, []
        await self.add_items(keep)

    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``call_model_input_filter``: the session's compacted request instead of the whole history
        (what the call's input holds that the session does not yet is stored first)."""
        if self._stored is not None and len(data.model_data.input) > self._stored:
            unsaved = [_plain(item) for item in data.model_data.input[self._stored:]]
            await self._append(unsaved)
            self._ahead.extend(unsaved)
        request = await self.client.next_request(self.lanes_session_id, format="responses")
        return ModelInputData(input=list(request.input), instructions=data.model_data.instructions)  # type: ignore[arg-type]

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` (other options passed through)."""
        return RunConfig(call_model_input_filter=self.input_filter, **options)


# What a session's stored config may pass back to create_session (SessionCreate's fields).
_CREATE_FIELDS = ("model", "context_window", "max_output_tokens", "budget_tokens", "system_prompt",
                  "max_turns_per_task", "updates_per_run")
