"""OpenAI Responses API input items as the HTTP API accepts them (``responses_items``).

The shapes a Responses request's ``input`` (or a response's ``output``) holds: messages
(``input_text``/``output_text``/``refusal`` parts, or the easy form ``{role, content: str}``),
``function_call``, ``function_call_output`` and ``reasoning``. Fields beyond the ones
checked here (ids, ``status``, ``annotations``...) are kept, so an item is stored verbatim:
``model_dump(mode="json", exclude_unset=True)`` gives back what was sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

MAX_ITEM_CHARS = 1_000_000  # as ItemIn: one item; the request body limit applies on top
CallId = Annotated[str, Field(min_length=1, max_length=200)]


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextPart(Loose):
    type: Literal["input_text", "output_text", "text"]
    text: str = Field(max_length=MAX_ITEM_CHARS)


class RefusalPart(Loose):
    type: Literal["refusal"]
    refusal: str = Field(max_length=MAX_ITEM_CHARS)


ContentPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]
Content = Annotated[str, Field(max_length=MAX_ITEM_CHARS)] | Annotated[list[ContentPart], Field(max_length=256)]


class MessageItem(Loose):
    type: Literal["message"] | None = None  # absent in the easy form {role, content}
    role: Literal["user", "assistant", "system", "developer"]
    content: Content


class FunctionCallItem(Loose):
    type: Literal["function_call"]
    call_id: CallId
    name: str = Field(min_length=1, max_length=200)
    arguments: str = Field("{}", max_length=MAX_ITEM_CHARS)


class FunctionCallOutputItem(Loose):
    type: Literal["function_call_output"]
    call_id: CallId
    output: Content


class SummaryPart(Loose):
    type: Literal["summary_text"]
    text: str = Field(max_length=MAX_ITEM_CHARS)


class ReasoningItem(Loose):
    """Reasoning as the model returned it; stored and passed back verbatim, never read."""

    type: Literal["reasoning"]
    id: str | None = Field(None, max_length=500)
    summary: list[SummaryPart] = Field(default_factory=list, max_length=256)
    encrypted_content: str | None = Field(None, max_length=MAX_ITEM_CHARS)


def _item_type(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind or "message"


ResponsesItemIn = Annotated[
    Annotated[MessageItem, Tag("message")] | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")] | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_type),
]


def verbatim(item: BaseModel) -> dict[str, Any]:
    """An accepted item as it was sent."""
    return item.model_dump(mode="json", exclude_unset=True)
