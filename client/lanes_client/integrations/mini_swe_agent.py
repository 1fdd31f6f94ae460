"""mini-swe-agent (2.4.x) on a Context Lanes session: a model wrapper, so the agent keeps its
own loop, environment and message list, and every model call sends Lanes' compacted request::

    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    model = LanesModel(LitellmModel(model_name="openai/gpt-4.1"), LanesClient(), budget_tokens=32_000)
    DefaultAgent(model, LocalEnvironment(), **agent_config).run("Fix the failing test")

On each ``query(messages)`` the messages not stored yet go to the session in one ``step``
call, the inner model is called with the request Lanes returns (the system prompt, the task,
recent turns in full, older tool output compacted or archived behind an address) and its
answer goes back to the agent unchanged. The agent's full list stays the agent's; the
session's raw history (``GET /items``) holds each of its messages once.

Each message is stored under a client item id made of its position in the agent's list, so
resending the whole list (a retried call, a new process resuming a saved trajectory) stores
nothing twice, and two equal messages at different positions stay two items. The step id is
derived from the step's content too: a step retried after a timeout answers the first call's
items. A session that continues as new on the server is invisible here. The provider's
counts of each answer (its ``usage``) go with the next step (the last answer's with
``store``), so the session's usage, cost and calibrated budget follow what the provider counted.

Archived output stays reachable: the session's placeholders tell the model to read an
``observation://`` address back with ``recall_observation``, and an answer whose every action
is that command (``recall_observation observation://obs-… [offset] [limit]``, as a shell
command or a call) is answered here: the exact text is read from the session, the round (the
answer and its results) is stored in the session, and the model is asked again with the new
request, at most ``MAX_RECALL_ROUNDS`` times. The agent never sees those rounds, nor a command
it cannot run. ``recall=False`` leaves every answer to the agent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from minisweagent.models.utils.actions_toolcall import BASH_TOOL
from minisweagent.utils.serialize import recursive_merge

from lanes_client.client import LanesClient
from lanes_client.errors import LanesAPIError
from lanes_client.integrations import recall_limit, recall_text
from lanes_client.schemas import ItemIn, PreparedRequestOut, ToolCallIn, UsageIn

__all__ = ["ITEM_ID_PREFIX", "LanesModel", "message_item", "recall_commands", "reported_usage"]

ITEM_ID_PREFIX = "msa-"
# What one call may carry (the API takes 100 items and a 2 MB body): a longer list, e.g. a
# resumed trajectory, goes first in appends of this size.
MAX_BATCH_ITEMS = 100
MAX_BATCH_CHARS = 1_000_000
SKIPPED_ROLES = frozenset({"exit"})  # the agent's own end marker: never sent to a model
MAX_RECALL_ROUNDS = 4  # model calls one query may make for recall commands it answers itself
# Declared on the session (charged to its budget) so that its placeholders name it; the inner
# model sends only its own tools, and the model writes it as a command LanesModel answers.
RECALL_DEFINITION: dict[str, Any] = {"type": "function", "function": {
    "name": "recall_observation",
    "description": "Read archived output back exactly: the command recall_observation observation://obs-... "
                   "[offset] [limit] prints the stored text (at most one read's worth from offset).",
    "parameters": {"type": "object", "properties": {
        "address": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
        "required": ["address"]}}}
# ``recall_observation observation://obs-… [offset] [limit]``, as a command or written as a call
_RECALL = re.compile(r"""\s*recall_observation\b[\s(]*["']?(observation://[^\s"',)]+)["']?"""
                     r"""(?:[\s,]+(?:offset\s*=\s*)?(\d+))?(?:[\s,]+(?:limit\s*=\s*)?(\d+))?\s*\)?\s*;?\s*""")


def _text(content: Any) -> str:
    """A message's content as text (multimodal parts: their text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
    return "\n".join(parts)


def message_item(message: dict[str, Any], position: int, call_names: dict[str, str]) -> ItemIn | None:
    """The Lanes item of the agent's message at ``position`` (None for messages no model sees).

    Assistant turns keep their tool calls and tool results their call id, so Lanes pairs them
    (a result without its call, or a turn leaving one unanswered, is refused); ``call_names``
    (call id -> tool name) is filled from the assistant turns as they pass.
    """
    role = message.get("role")
    item_id = f"{ITEM_ID_PREFIX}{position}"
    text = _text(message.get("content"))
    if role in SKIPPED_ROLES:
        return None
    if role in ("system", "user"):
        return ItemIn(kind=role, role=role, text=text, item_id=item_id)
    if role == "assistant":
        calls = []
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            calls.append(ToolCallIn(id=call["id"], name=fn.get("name") or "", arguments=fn.get("arguments") or "{}"))
            call_names[call["id"]] = fn.get("name") or ""
        return ItemIn(kind="assistant", role="assistant", text=text, tool_calls=calls, item_id=item_id)
    if role == "tool":
        call_id = message["tool_call_id"]
        code = (message.get("extra") or {}).get("returncode")
        return ItemIn(kind="tool_result", role="tool", text=text, tool_call_id=call_id,
                      tool_name=call_names.get(call_id) or None, exit_code=code if isinstance(code, int) else None,
                      item_id=item_id)
    # e.g. the Responses API's function_call items: no chat message to map them to
    raise ValueError(f"message {position} has role {role!r}: LanesModel takes Chat Completions messages "
                     "(system, user, assistant with tool_calls, tool)")


def _digest(item: ItemIn | None) -> str:
    return "" if item is None else hashlib.sha256(item.model_dump_json(exclude={"item_id"}).encode()).hexdigest()


def default_tools(model: Any) -> list[dict[str, Any]]:
    """The tools the inner model sends with every call: mini-swe-agent's bash tool, except for
    its text-based models (their config has an ``action_regex``), which send none."""
    return [] if hasattr(getattr(model, "config", None), "action_regex") else [BASH_TOOL]


def _batches(items: list[ItemIn]) -> list[list[ItemIn]]:
    batches: list[list[ItemIn]] = [[]]
    size = 0
    for item in items:
        chars = len(item.text or "") + sum(len(c.arguments) for c in item.tool_calls)
        if batches[-1] and (len(batches[-1]) >= MAX_BATCH_ITEMS or size + chars > MAX_BATCH_CHARS):
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += chars
    return batches


def _key(kind: str, end: int, items: list[ItemIn]) -> str:
    """A call's idempotency key from what it carries: the same call retried has the same key."""
    digest = hashlib.sha256("\n".join(f"{i.item_id}:{_digest(i)}" for i in items).encode()).hexdigest()[:32]
    return f"{ITEM_ID_PREFIX}{kind}-{end}-{digest}"


class LanesModel:
    """A mini-swe-agent model whose input is a Lanes session's request.

    ``model``: the inner mini-swe-agent model (e.g. ``LitellmModel``), called with Lanes'
    messages; its answers, cost and format errors reach the agent unchanged. ``session_id``:
    an existing external session; without it one is created at the first call with
    ``session`` as its settings (``budget_tokens``, ``context_window``, ``compaction``...) and
    the agent's tools as its ``tool_definitions`` (``tools``: default mini-swe-agent's bash
    tool, none for text-based models), and a new one again when the agent starts another run.
    """

    def __init__(self, model: Any, client: LanesClient, *, session_id: str | None = None,
                 tools: list[dict[str, Any]] | None = None, recall: bool = True, **session: Any) -> None:
        self.model = model
        self.client = client
        self.recall = recall  # answer the model's recall_observation commands here
        self.recall_rounds = 0
        if recall:  # the placeholders name recall_observation, which this wrapper answers
            session.setdefault("recall", "tool")
        self.tools = default_tools(model) if tools is None else tools
        self.session_settings = session
        self.session_id = session_id
        self.session_ids: list[str] = [session_id] if session_id else []
        self._given_session = session_id is not None
        self._stored: list[tuple[dict[str, Any], str]] = []  # the agent's messages stored, with their digest
        self._call_names: dict[str, str] = {}
        self.n_steps = 0
        self.last_request: PreparedRequestOut | None = None
        self._usage: UsageIn | None = None  # the last answer's provider counts, for the next step
        self.max_request_tokens = 0

    @property
    def config(self) -> Any:
        return self.model.config

    def __getattr__(self, name: str) -> Any:
        # what else a caller reads of a model (abort_exceptions, ...) is the inner model's
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    # --- the Model protocol ---------------------------------------------------------------

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
        request = self.prepare(messages)
        for rounds in range(MAX_RECALL_ROUNDS + 1):
            answer = self._ask(request, **kwargs)
            recalls = recall_commands(answer) if self.recall and rounds < MAX_RECALL_ROUNDS else None
            if not recalls:
                return answer
            request = self._answer_recalls(answer, recalls)
        raise AssertionError("unreachable: the last round returns")

    def _ask(self, request: PreparedRequestOut, **kwargs: Any) -> dict:
        try:
            answer = self.model.query(request.messages, **kwargs)
        except Exception as error:  # a FormatError carries the answer it could not parse (the
            kept = getattr(error, "messages", None)  # provider counted it all the same)
            self._usage = reported_usage(kept[0]) if kept and isinstance(kept[0], dict) else None
            raise
        self._usage = reported_usage(answer)
        return answer

    def _answer_recalls(self, answer: dict, recalls: list[tuple[str, int | None, int | None]]) -> PreparedRequestOut:
        """Read each recalled range, store the round (the answer and its results) in the session
        and return the request that follows it."""
        assert self.session_id is not None
        outputs = [self._recall(*recall) for recall in recalls]
        round_messages = [answer, *self.model.format_observation_messages(answer, outputs)]
        self.recall_rounds += 1
        names = dict(self._call_names)
        items = []
        for n, message in enumerate(round_messages):
            item = message_item(message, 0, names)
            if item is not None:
                items.append(item.model_copy(update={"item_id": f"{ITEM_ID_PREFIX}recall-{self.recall_rounds}-{n}"}))
        key = _key(f"recall-{self.recall_rounds}", len(self._stored), items)
        request = self.client.step(self.session_id, items, step_id=key, usage=self._usage).request
        self._usage = None
        self.n_steps += 1
        self.last_request = request
        self.max_request_tokens = max(self.max_request_tokens, request.token_estimate)
        return request

    def _recall(self, address: str, offset: int | None, limit: int | None) -> dict[str, Any]:
        """One recall, as mini-swe-agent's environment reports a command's output."""
        assert self.session_id is not None
        try:
            cap = self.last_request.recall_chars if self.last_request is not None else None
            piece = self.client.read_observation(self.session_id, address, offset=offset, limit=recall_limit(limit, cap))
        except (ValueError, LanesAPIError) as error:
            return {"output": f"recall_observation failed: {error}", "returncode": 1, "exception_info": ""}
        return {"output": recall_text(piece), "returncode": 0, "exception_info": ""}

    def format_message(self, **kwargs: Any) -> dict:
        return self.model.format_message(**kwargs)

    def format_observation_messages(self, message: dict, outputs: list[dict],
                                    template_vars: dict | None = None) -> list[dict]:
        return self.model.format_observation_messages(message, outputs, template_vars)

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.model.get_template_vars(**kwargs), "lanes_session_id": self.session_id}

    def serialize(self) -> dict:
        lanes = {"session_id": self.session_id, "session_ids": self.session_ids, "steps": self.n_steps,
                 "max_request_tokens": self.max_request_tokens,
                 "budget": self.last_request.budget if self.last_request else None}
        return recursive_merge(self.model.serialize(), {"info": {"lanes": lanes, "config": {
            "model_wrapper": f"{type(self).__module__}.{type(self).__name__}"}}})

    # --- the session ----------------------------------------------------------------------

    def prepare(self, messages: Sequence[dict[str, Any]]) -> PreparedRequestOut:
        """Store the messages not stored yet and return the request to send instead of them."""
        request = self._send(messages, with_request=True)
        assert request is not None
        self.n_steps += 1
        self.last_request = request
        self.max_request_tokens = max(self.max_request_tokens, request.token_estimate)
        return request

    def store(self, messages: Sequence[dict[str, Any]]) -> None:
        """Store the messages not stored yet: the agent's last answer (it never goes to a model)
        after ``agent.run``, so the session's history is complete. When the provider counted
        that answer, the store is a step carrying its counts (the request it returns is not
        used), so the session's usage covers every call."""
        self._send(messages, with_request=self._usage is not None)

    def _send(self, messages: Sequence[dict[str, Any]], *, with_request: bool) -> PreparedRequestOut | None:
        if not self._continues(messages):
            self._start_over()
        if self.session_id is None:
            settings = {"model": getattr(self.model.config, "model_name", None), **self.session_settings}
            definitions = [*self.tools, *([RECALL_DEFINITION] if self.recall else [])]
            self.session_id = self.client.create_session(
                mode="external", tool_definitions=definitions or None, **settings).session_id
            self.session_ids.append(self.session_id)
        start = len(self._stored)
        new = [message_item(m, start + n, self._call_names) for n, m in enumerate(messages[start:])]
        batches = _batches([item for item in new if item is not None])
        *appends, last = batches if with_request else [*batches, []]
        for batch in appends:
            if batch:
                self.client.append_items(self.session_id, batch, idempotency_key=_key("append", len(messages), batch))
        request = None
        if with_request:
            request = self.client.step(self.session_id, last, step_id=_key("step", len(messages), last),
                                       usage=self._usage).request
            self._usage = None
        self._stored += [(m, _digest(item)) for m, item in zip(messages[start:], new, strict=True)]
        return request

    def _continues(self, messages: Sequence[dict[str, Any]]) -> bool:
        """Whether ``messages`` extends what was stored (the agent appends to its list; a new
        run starts a new list). Messages are compared by identity first, content otherwise."""
        if len(messages) < len(self._stored):
            return False
        names = dict(self._call_names)
        for position, (stored, digest) in enumerate(self._stored):
            message = messages[position]
            if message is not stored and _digest(message_item(message, position, names)) != digest:
                return False
        return True

    def _start_over(self) -> None:
        if self._given_session:
            raise ValueError(f"session {self.session_id} holds another message list than this one (a new run of "
                             "the agent?): give LanesModel no session_id to get a session per run")
        self.session_id = None
        self._stored = []
        self._call_names = {}
        self._usage = None  # counts of a call on the session left behind


def recall_commands(answer: dict) -> list[tuple[str, int | None, int | None]] | None:
    """(address, offset, limit) of each action of ``answer`` when every one is a recall command
    (None otherwise: the agent runs them, whatever they are)."""
    actions = (answer.get("extra") or {}).get("actions") or []
    found = []
    for action in actions:
        match = _RECALL.fullmatch(str(action.get("command", ""))) if isinstance(action, dict) else None
        if match is None:
            return None
        offset, limit = (int(g) if g is not None else None for g in match.group(2, 3))
        found.append((match.group(1), offset, limit))
    return found or None


def reported_usage(answer: dict) -> UsageIn | None:
    """The provider's counts in an answer of mini-swe-agent's litellm models (``extra.response
    .usage``, OpenAI's shape); None when it reported none or nothing usable."""
    response = (answer.get("extra") or {}).get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    try:
        return UsageIn(prompt_tokens=usage.get("prompt_tokens") or 0, cached_tokens=cached or 0,
                       completion_tokens=usage.get("completion_tokens") or 0)
    except ValueError:  # counts the API would refuse (negative, cached above prompt): not reported
        return None
