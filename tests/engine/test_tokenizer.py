"""Token counting per model family, and costs that count what the request sends."""

from __future__ import annotations

import hashlib

import pytest

from activities import tokens
from activities.items import measure
from workflows.context.content import ItemContent
from workflows.context.items import Item, Projection


@pytest.mark.parametrize("model,encoding,own", [
    ("gpt-4o-mini", "o200k_base", True),
    ("gpt-4o-2024-08-06", "o200k_base", True),
    ("o3-mini", "o200k_base", True),
    ("gpt-4.1", "o200k_base", True),
    ("gpt-5-codex-latest", "o200k_base", True),  # a name tiktoken does not know: the family table
    ("openai/gpt-4o", "o200k_base", True),  # routers put the vendor first
    ("gpt-4-turbo", "cl100k_base", True),
    ("gpt-3.5-turbo", "cl100k_base", True),
    ("claude-sonnet-4-5", tokens.DEFAULT_ENCODING, False),
    ("deepseek-reasoner", tokens.DEFAULT_ENCODING, False),
    ("Qwen/Qwen3-32B", tokens.DEFAULT_ENCODING, False),
    (None, tokens.DEFAULT_ENCODING, False),
])
def test_each_family_has_its_encoding(model, encoding, own):
    assert tokens.model_encoding(model) == (encoding, own)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty tiktoken cache of our own, with the tokenizer caches cleared around the test."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.tokenizer_for.cache_clear()
    yield tmp_path
    tokens.tokenizer_for.cache_clear()


def test_an_encoding_not_available_offline_falls_back_to_the_bundled_one_and_says_so(fresh_cache):
    gpt4o = tokens.tokenizer_for("gpt-4o")
    assert (gpt4o.encoding, gpt4o.loaded, gpt4o.exact) == ("o200k_base", "cl100k_base", False)
    assert "estimate" in gpt4o.describe() and "o200k_base" in gpt4o.describe()
    assert tokens.tokenizer_for("gpt-4").exact and tokens.tokenizer_for("gpt-4").describe() == "cl100k_base"
    claude = tokens.tokenizer_for("claude-opus-4").describe()
    assert "estimate" in claude and "tiktoken does not ship" in claude
    assert tokens.count_tokens("hello world", "gpt-4o") == tokens.count_tokens("hello world", "gpt-4") == 2


def test_an_encoding_is_used_only_when_its_intact_file_is_in_the_cache(fresh_cache, monkeypatch):
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    cached = fresh_cache / hashlib.sha1(url.encode()).hexdigest()
    cached.write_bytes(b"not the encoding")
    assert tokens._offline_name("o200k_base") is None  # tiktoken would delete it and download
    monkeypatch.setitem(tokens._BLOBS, "o200k_base", hashlib.sha256(b"not the encoding").hexdigest())
    assert tokens._offline_name("o200k_base") == "o200k_base"
    assert tokens.tokenizer_for("gpt-4o").exact
    assert tokens._offline_name("p50k_base") is None  # not cached: would download


def test_reasoning_passed_back_is_counted_in_the_turns_full_cost_only():
    item = Item(id="a", seq=1, kind="assistant", role="assistant")
    plain = measure(item, ItemContent(text="The answer is 42."), 2_000, "gpt-4o")
    with_reasoning = measure(item, ItemContent(text="The answer is 42.", reasoning_content="six times seven " * 20),
                             2_000, "gpt-4o")
    assert with_reasoning[Projection.FULL] == plain[Projection.FULL] + tokens.count_tokens("six times seven " * 20)
    assert with_reasoning[Projection.REFERENCE] == plain[Projection.REFERENCE]
    # Responses reasoning items are opaque and not billed as context by their provider: not counted
    verbatim = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x" * 5_000}]
    assert measure(item, ItemContent(text="The answer is 42.", responses_items=verbatim), 2_000, "gpt-4o") == plain
