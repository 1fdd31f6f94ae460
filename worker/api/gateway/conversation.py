"""The conversation an agent sends through the gateway, protocol-neutral: one turn per chat
message (an Anthropic message with tool results is one turn per result, then its text), and
a chain of digests, one per turn, each naming the whole conversation up to that turn.

The chain is how the gateway recognises a conversation it has seen: the longest prefix of a
call's chain that a session stored is where the call continues. Digests cover what the agent
sent, canonically (JSON arguments parsed and dumped with sorted keys, so whitespace an SDK
adds does not make a new conversation).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from lanes_client.schemas import MAX_ITEM_CHARS, ItemIn, ToolCallIn

CHAIN_SEED = "lanes-gateway-1"


class GatewayInputError(ValueError):
    """A request the gateway refuses, with the HTTP status and the provider's error type."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Call:
    """A tool call the model made: its id, the tool's name, the arguments as a JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Turn:
    """One message of the conversation, as the session stores it (``ExternalItem`` fields).
    Not changed once parsed. Not frozen: a call parses every message of its conversation, and a
    frozen dataclass's ``__init__`` (a guarded ``object.__setattr__`` per field) took 1 us of the
    2 us a message cost in the parser, 20 ms of a call carrying 20,000 messages."""

    kind: str  # system / user / assistant / tool_result
    text: str = ""
    tool_calls: tuple[Call, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    # Verbatim provider items the turn is stored with (Responses: the assistant turn's own items,
    # reasoning included); content, not identity: left out of the chain and of equality.
    extras: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def images(self) -> list[dict[str, Any]]:
        return list((self.extras or {}).get("images") or ())

    def canonical(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text}
        if self.images:  # an image is part of what was said: another image, another conversation
            out["images"] = [hashlib.sha256(json.dumps(i, sort_keys=True).encode()).hexdigest() for i in self.images]
        if self.tool_calls:
            out["tool_calls"] = [[c.id, c.name, canonical_arguments(c.arguments)] for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass
class Conversation:
    """What one call carries: its turns (the system prompt first, when there is one)."""

    turns: list[Turn] = field(default_factory=list)
    # What sets conversations apart besides their turns: the protocol, and the agent's own id of
    # the conversation or user when it sends one (X-Lanes-Conversation, OpenAI ``user``,
    # Anthropic ``metadata.user_id``). Without one, two byte-identical conversations of a tenant
    # are one conversation: the second is answered as a retry of the first.
    salt: str = ""

    @property
    def system(self) -> str | None:
        return self.turns[0].text if self.turns and self.turns[0].kind == "system" else None

    def chains(self) -> list[str]:
        """One digest per turn: of that turn and every turn before it."""
        out, previous = [], hashlib.sha256(f"{CHAIN_SEED}|{self.salt}".encode()).hexdigest()
        for turn in self.turns:
            previous = next_chain(previous, turn)
            out.append(previous)
        return out

    def check(self) -> None:
        """Refuse what no session can hold: no turn but system prompts, a tool result for no
        call of the assistant turn before it. (A system message later in the conversation is
        kept as a system item: agents send reminders that way.)"""
        if not self.turns or all(t.kind == "system" for t in self.turns):
            raise GatewayInputError("messages: at least one user message is needed")
        open_calls: set[str] = set()
        for index, turn in enumerate(self.turns):
            if turn.kind == "tool_result":
                if turn.tool_call_id not in open_calls:
                    raise GatewayInputError(f"messages[{index}]: tool result {turn.tool_call_id!r} answers no "
                                            "tool call of the assistant turn before it")
                open_calls.discard(turn.tool_call_id)
            elif turn.kind == "assistant":
                open_calls = {c.id for c in turn.tool_calls}


def item_in(turn: Turn, chain: str | None) -> ItemIn:
    """``turn`` as the session stores it; ``chain``: its digest, which names the item (the
    client id a retry is recognised by); None for an answer (its row holds it)."""
    if len(turn.text) > MAX_ITEM_CHARS:
        raise GatewayInputError(f"a {turn.kind} message of {len(turn.text):,} characters is larger than a session "
                                f"stores in one item ({MAX_ITEM_CHARS:,}); cut it before sending it", 413,
                                "request_too_large")
    return ItemIn(kind=turn.kind, text=turn.text, tool_call_id=turn.tool_call_id, tool_name=turn.tool_name,
                  tool_calls=[ToolCallIn(id=c.id, name=c.name, arguments=c.arguments) for c in turn.tool_calls],
                  item_id=None if chain is None else f"gw-{chain[:40]}")


def next_chain(previous: str, turn: Turn) -> str:
    """The chain digest of ``turn`` after a conversation whose last digest is ``previous``."""
    return hashlib.sha256((previous + canonical_text(turn)).encode()).hexdigest()


def canonical_text(turn: Turn) -> str:
    """``turn.canonical()`` dumped with sorted keys. Every call digests its whole conversation,
    so a plain turn (no tool calls, no images: most of a long one) is written out directly, the
    same text ``json.dumps`` gives (``encode_basestring`` is its string encoder), about three
    times faster."""
    if turn.tool_calls or (turn.extras and turn.extras.get("images")):
        return json.dumps(turn.canonical(), sort_keys=True, ensure_ascii=False)
    text = '{"kind": ' + encode_basestring(turn.kind) + ', "text": ' + encode_basestring(turn.text)
    if turn.tool_call_id is not None:
        text += ', "tool_call_id": ' + encode_basestring(turn.tool_call_id)
    return text + "}"


def canonical_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


def joined_text(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts (an image or
    another part the gateway cannot store is refused, naming where)."""
    return text_and_images(content, where, images=False)[0]


def text_and_images(content: Any, where: str, images: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """A message's text parts joined, and its images as stored parts (``images``: accepted;
    any other part is refused, naming where). Images are kept after the text: the session
    stores one text per item, and the order of text and images within it is not kept."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise GatewayInputError(f"{where}: content must be a string or a list of parts")
    texts: list[str] = []
    found: list[dict[str, Any]] = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        if kind in ("text", "input_text", "output_text"):
            texts.append(str(part.get("text", "")))
        elif images and kind in ("image_url", "image"):
            found.append(stored_image(part, f"{where}[{n}]"))
        else:
            allowed = "text and images" if images else "text only"
            raise GatewayInputError(f"{where}[{n}]: a {kind!r} part cannot pass the gateway ({allowed})")
    return "\n".join(texts), found


def stored_image(part: dict[str, Any], where: str) -> dict[str, Any]:
    """An image part as the session stores it: ``{"media_type", "data"}`` (inline, base64) or
    ``{"url"}``, with ``detail`` when the client set one. Chat Completions sends
    ``{"type": "image_url", "image_url": {"url": <https or data: URL>, "detail"}}``; Anthropic
    ``{"type": "image", "source": {"type": "base64" | "url", ...}}``."""
    if part.get("type") == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        if not isinstance(url, str) or not url:
            raise GatewayInputError(f"{where}.image_url.url: an image needs a URL (https: or data:)")
        out = _from_url(url, where)
        if isinstance(spec, dict) and spec.get("detail") in ("low", "high", "auto"):
            out["detail"] = spec["detail"]
        return out
    source = part.get("source")
    if not isinstance(source, dict):
        raise GatewayInputError(f"{where}.source: an image needs a source")
    if source.get("type") == "base64":
        media, data = source.get("media_type"), source.get("data")
        if not isinstance(media, str) or not media.startswith("image/") or not isinstance(data, str) or not data:
            raise GatewayInputError(f"{where}.source: a base64 image needs media_type (image/...) and data")
        return {"media_type": media, "data": data}
    if source.get("type") == "url" and isinstance(source.get("url"), str) and source["url"]:
        return {"url": source["url"]}
    raise GatewayInputError(f"{where}.source.type: must be base64 or url")


def _from_url(url: str, where: str) -> dict[str, Any]:
    if not url.startswith("data:"):
        return {"url": url}
    header, sep, data = url[5:].partition(",")
    media, _, encoding = header.partition(";")
    if not sep or encoding != "base64" or not media.startswith("image/") or not data:
        raise GatewayInputError(f"{where}: a data: URL image must be data:image/...;base64,<data>")
    return {"media_type": media, "data": data}
