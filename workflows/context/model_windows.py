"""Known context windows of model families: how a session's model is resolved.

A model the table knows gets its window (when the session did not set one) and counts as
resolved, so its capability ceiling derives from its usable input; an unknown model keeps
the configured window and the engine's fixed 8,000-token fallback ceiling for capability
context (``EngineConfig.model_known``; the spec's "Task capability context").

Matching: the name is lower-cased, a provider prefix (``openai/``, ``anthropic/``...) is
dropped, and the longest family prefix that starts it wins (``gpt-4o-mini-2024-07-18``
matches ``gpt-4o-mini``). Pure data and string work: safe in workflow code.
"""

from __future__ import annotations

# family prefix -> context window in tokens (input + output, as the vendors publish it)
KNOWN_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-2": 100_000,
    "claude-3": 200_000,
    "claude-haiku": 200_000,
    "claude-sonnet": 200_000,
    "claude-opus": 200_000,
    "claude-instant": 100_000,
    # DeepSeek
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "deepseek-coder": 128_000,
    "deepseek-v3": 128_000,
    "deepseek-r1": 128_000,
    # Qwen (native windows; longer ones need YaRN, which a provider may or may not enable)
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    "qwen2.5-coder": 32_768,
    "qwen3": 32_768,
    "qwen3-coder": 262_144,
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 1_000_000,
    # Llama
    "llama-2": 4_096,
    "llama-3": 8_192,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama-4": 131_072,
    "llama2": 4_096,
    "llama3": 8_192,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama4": 131_072,
}

_SEPARATORS = ("-", ".", ":", "_", "@")


def _normalised(model: str) -> str:
    name = model.strip().lower()
    return name.rsplit("/", 1)[-1]  # "openai/gpt-4o", "meta-llama/llama-3.1-8b" -> the model's own name


def known_window(model: str) -> int | None:
    """The context window of ``model``'s family, or None when the table does not know it."""
    name = _normalised(model)
    matching = [family for family in KNOWN_WINDOWS
                if name == family or (name.startswith(family) and name[len(family)] in _SEPARATORS)]
    return KNOWN_WINDOWS[max(matching, key=len)] if matching else None


def is_known(model: str) -> bool:
    return known_window(model) is not None
