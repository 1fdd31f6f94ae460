"""The Chat Completions parser on hostile messages: each is refused with an error naming the
message and field that was wrong (a 400 in OpenAI's shape), never read as something else."""

from __future__ import annotations

from typing import Any

import pytest

from worker.api.gateway.conversation import GatewayInputError
from worker.api.gateway.openai_chat import parse

USER = {"role": "user", "content": "hello"}


@pytest.mark.parametrize(("message", "named"), [
    ("hello", "messages[1]: must be an object"),
    (["user", "hello"], "messages[1]: must be an object"),
    ({"content": "no role"}, "messages[1].role: None is not one of"),
    ({"role": "robot", "content": "x"}, "messages[1].role: 'robot' is not one of"),
    ({"role": "tool", "content": "42"}, "messages[1].tool_call_id: required"),
    ({"role": "tool", "tool_call_id": "", "content": "42"}, "messages[1].tool_call_id: required"),
    ({"role": "assistant", "content": None, "tool_calls": "call_1"}, "messages[1].tool_calls[0]: a tool call needs"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
     "messages[1].tool_calls[0]: a tool call needs"),
    ({"role": "user", "content": 42}, "messages[1].content"),
    ({"role": "user", "content": [{"type": "audio", "data": "..."}]}, "messages[1].content"),
])
def test_a_hostile_message_is_refused_naming_it(message: Any, named: str):
    with pytest.raises(GatewayInputError) as refused:
        parse({"model": "m", "messages": [USER, message]})
    assert named in str(refused.value) and refused.value.status == 400


def test_plain_and_part_contents_read_alike():
    """A string content (read on the parser's fast path) and the same text as one text part
    (read through text_and_images) are the same turn."""
    plain = parse({"model": "m", "messages": [{"role": "system", "content": "Be brief."}, USER]})
    parts = parse({"model": "m", "messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                                              {"role": "user", "content": [{"type": "text", "text": "hello"}]}]})
    assert plain.conversation.turns == parts.conversation.turns
    assert plain.conversation.chains() == parts.conversation.chains()
