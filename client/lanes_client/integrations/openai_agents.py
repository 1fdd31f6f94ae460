"""OpenAI Agents SDK integration: a Lanes external session as the SDK's ``Session``, and a
per-call model input filter so that compaction also happens inside one run.

    lanes = await LanesSession.create(client, system_prompt=agent.instructions, budget_tokens=8_000)
    result = await Runner.run(agent, "task", session=lanes, run_config=lanes.run_config())

- ``add_items`` appends the SDK's items (Responses API items) as they are; the session
  stores them verbatim, reasoning included (``responses_items``).
- ``get_items`` returns that raw history as the SDK gave it, every item, compacted or not.
- ``input_filter`` (``RunConfig.call_model_input_filter``) replaces the input of every model
  call with the session's compacted request in Responses format, so a long run stays within
  the session's budget. The SDK saves each turn before the next call, so the session holds
  everything the call would have sent. The agent's own instructions are kept.
- The store is append-only: ``pop_item`` and ``clear_session`` do what the protocol says
  (the history no longer holds the item, or anything) by moving to a new Lanes session with
  the same configuration, re-appending the history minus the popped item (none, for a
  clear). The previous Lanes session is left as it was, stored and inspectable.
  ``session_id`` stays the name the SDK knows; ``lanes_session_id`` is the session in use.
  A pop costs a copy of the history: the SDK pops only to roll back a failed retry.
"""

from __future__ import annotations

import json
from typing import Any

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


class LanesSession:
    """The Agents SDK ``Session`` protocol over a Lanes external session."""

    session_settings: SessionSettings | None = None

    def __init__(self, client: AsyncLanesClient, session_id: str, *, config: dict[str, Any] | None = None) -> None:
        self.client = client
        self.session_id = session_id  # the name the SDK knows; stays when pop/clear move on
        self.lanes_session_id = session_id
        self._config = config

    @classmethod
    async def create(cls, client: AsyncLanesClient, **config: Any) -> LanesSession:
        """A new external session (``tools`` defaults to ``none``: the SDK runs its own tools)."""
        config.setdefault("tools", "none")
        created = await client.create_session(mode="external", **config)
        return cls(client, created.session_id, config=config)

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
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        plain = [_plain(item) for item in items]
        for start in range(0, len(plain), BATCH):
            await self.client.append_items(self.lanes_session_id, responses_items=plain[start:start + BATCH])

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
        await self.add_items(keep)

    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``call_model_input_filter``: the session's compacted request instead of the whole history."""
        request = await self.client.next_request(self.lanes_session_id, format="responses")
        return ModelInputData(input=list(request.input), instructions=data.model_data.instructions)  # type: ignore[arg-type]

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` (other options passed through)."""
        return RunConfig(call_model_input_filter=self.input_filter, **options)


# What a session's stored config may pass back to create_session (SessionCreate's fields).
_CREATE_FIELDS = ("model", "context_window", "max_output_tokens", "budget_tokens", "system_prompt",
                  "max_turns_per_task", "updates_per_run")
