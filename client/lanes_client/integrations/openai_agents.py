"""OpenAI Agents SDK integration: a Lanes external session as the SDK's ``Session``, and a
per-call model input filter so that compaction also happens inside one run.

    lanes = await LanesSession.create(client, agent=agent, budget_tokens=8_000)
    result = await Runner.run(agent, "task", session=lanes, run_config=lanes.run_config())

- ``create(agent=...)`` declares the agent's instructions and function tools on the session,
  so the budget is charged for the tools the SDK sends with every call, and names the agent's
  model as the session's (its window, tokenizer, prices and calibration). It also gives the
  agent a ``recall_observation`` tool (``recall_tool=False`` leaves the agent as it is): a
  compacted request shows older output as an ``observation://`` address, and this tool reads
  the exact text there back from the session (``LanesSession.recall_tool``).

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
import weakref
from typing import Any

from agents import Agent, FunctionTool, function_tool
from agents.memory.session_settings import SessionSettings
from agents.run_config import CallModelData, ModelInputData, RunConfig

from lanes_client.client import AsyncLanesClient
from lanes_client.integrations import RECALL_TOOL, read_recall
from lanes_client.schemas import session_budget

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


def agent_model_name(agent: Agent[Any]) -> str | None:
    """The model the agent calls, by name (a name, or a model object's ``model``); None: the SDK's default."""
    model = agent.model
    if isinstance(model, str):
        return model or None
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _recall_tool(session: LanesSession) -> FunctionTool:
    @function_tool(name_override=RECALL_TOOL)
    async def recall_observation(address: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read archived output back exactly: older tool output in your context may show only an
        observation:// address; this returns the exact text stored there.

        Args:
            address: the observation://obs-... address (it may carry ?offset=&limit=).
            offset: the first character to read (default: the address's, else 0).
            limit: how many characters to read (default: the address's, else as many as one read returns).
        """
        return await read_recall(session.client, session.lanes_session_id, address, offset, limit,
                                 session.recall_chars)

    _OURS.add(id(recall_observation))
    weakref.finalize(recall_observation, _OURS.discard, id(recall_observation))
    return recall_observation


# ids of the recall tools this module made (while they live): create() replaces its own, never an agent's own tool
_OURS: set[int] = set()


class LanesSession:
    """The Agents SDK ``Session`` protocol over a Lanes external session."""

    session_settings: SessionSettings | None = None

    def __init__(self, client: AsyncLanesClient, session_id: str, *, config: dict[str, Any] | None = None) -> None:
        self.client = client
        self.session_id = session_id  # the name the SDK knows; stays when pop/clear move on
        self.lanes_session_id = session_id
        self._config = config
        self.recall_chars: int | None = None  # of the last request: what one recall may read (recall_limit)
        self._added = 0  # items added through this object: part of each append's idempotency key
        # The SDK items the session holds, when known (a new session, or after get_items): the
        # input filter stores what a call's input holds beyond them. A streamed run saves its
        # turn only after its calls, so the filter stores it first (``_ahead``) and add_items
        # skips it when the SDK saves it.
        self._stored: int | None = None
        self._ahead: list[dict[str, Any]] = []
        # the working-set budget in tokens, when create() made the session: without budget_tokens
        # the model's usable window, which compacts only near it (pass budget_tokens for cost)
        self.budget: int | None = None

    @classmethod
    async def create(cls, client: AsyncLanesClient, agent: Agent[Any] | None = None, *, recall_tool: bool = True,
                     **config: Any) -> LanesSession:
        """A new external session (``tools`` defaults to ``none``: the SDK runs its own tools);
        ``agent``: its instructions (when text), model and function tools are the session's, and
        it is given this session's recall tool (unless ``recall_tool`` is False or it has a
        ``recall_observation`` tool of its own)."""
        config.setdefault("tools", "none")
        session = cls(client, "", config=config)
        if agent is not None:
            if isinstance(agent.instructions, str):
                config.setdefault("system_prompt", agent.instructions)
            if (model := agent_model_name(agent)) is not None:
                config.setdefault("model", model)
            if recall_tool:
                session._give_recall_tool(agent)
            if definitions := agent_tool_definitions(agent):
                config.setdefault("tool_definitions", definitions)
            if any(tool.name == RECALL_TOOL for tool in agent.tools if isinstance(tool, FunctionTool)):
                config.setdefault("recall", "tool")
        created = await client.create_session(mode="external", **config)
        session.session_id = session.lanes_session_id = created.session_id
        session._stored = 0
        session.budget = session_budget(created.config)
        return session

    def recall_tool(self) -> FunctionTool:
        """A ``recall_observation`` function tool reading this session's archived output (for an
        agent made after the session, or one given to ``create`` with ``recall_tool=False``)."""
        return _recall_tool(self)

    def _give_recall_tool(self, agent: Agent[Any]) -> None:
        """Add this session's recall tool to ``agent``, in place of one this module gave it for
        another session; an agent's own tool of that name is left as it is."""
        tools = list(agent.tools)
        if any(getattr(t, "name", None) == RECALL_TOOL and id(t) not in _OURS for t in tools):
            return
        agent.tools = [t for t in tools if id(t) not in _OURS] + [_recall_tool(self)]

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
        self.recall_chars = request.recall_chars
        return ModelInputData(input=list(request.input), instructions=data.model_data.instructions)  # type: ignore[arg-type]

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` (other options passed through)."""
        return RunConfig(call_model_input_filter=self.input_filter, **options)


# What a session's stored config may pass back to create_session (SessionCreate's fields).
_CREATE_FIELDS = ("model", "context_window", "max_output_tokens", "budget_tokens", "system_prompt",
                  "max_turns_per_task", "updates_per_run")
