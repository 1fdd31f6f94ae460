"""Item builders: the shapes an OpenAI-style agent loop produces, as the API appends them."""

from __future__ import annotations

from typing import Any

from lanes_client.schemas import ItemIn, ToolCallIn


def user_item(text: str) -> ItemIn:
    return ItemIn(kind="user", text=text)


def note_item(text: str, kind: str = "note") -> ItemIn:
    return ItemIn(kind=kind, text=text)


def assistant_item(message: Any) -> ItemIn:
    """An assistant answer: an OpenAI ``ChatCompletionMessage`` or a plain dict."""
    data = message.model_dump() if hasattr(message, "model_dump") else dict(message)
    calls = []
    for call in data.get("tool_calls") or ():
        fn = call.get("function") or {}
        calls.append(ToolCallIn(id=call["id"], name=fn.get("name", ""), arguments=fn.get("arguments") or "{}"))
    return ItemIn(kind="assistant", text=data.get("content") or "", tool_calls=calls)


def tool_result_item(call_id: str, name: str, output: str, exit_code: int | None = None,
                     role: str | None = None) -> ItemIn:
    return ItemIn(kind="tool_result", role=role, text=output, tool_call_id=call_id, tool_name=name,
                  exit_code=exit_code)
