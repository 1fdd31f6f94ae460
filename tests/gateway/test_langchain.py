"""LangChain's ChatOpenAI and ChatAnthropic with nothing but a base URL and a Lanes token: a
tool call, its result, the answer (invoked and streamed), what the upstream was sent."""

from __future__ import annotations

import uuid

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.gateway.conftest import TOKEN
from tests.gateway.upstream import Scripted, ScriptedUpstream


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def conversation(chat, upstream: ScriptedUpstream, name: str) -> dict:
    upstream.script(name, Scripted(calls=[("call_lc", "read_file", {"path": "notes.txt"})]),
                    Scripted(text="The notes say hello."))
    model = chat.bind_tools([read_file])
    messages = [SystemMessage("You read files."), HumanMessage("What do the notes say?")]
    first = model.invoke(messages)
    assert isinstance(first, AIMessage) and first.tool_calls[0]["name"] == "read_file"
    assert first.tool_calls[0]["args"] == {"path": "notes.txt"}
    messages += [first, ToolMessage("hello", tool_call_id=first.tool_calls[0]["id"])]
    streamed = "".join(str(chunk.content if isinstance(chunk.content, str) else
                           "".join(p.get("text", "") for p in chunk.content if isinstance(p, dict)))
                       for chunk in model.stream(messages))
    assert streamed == "The notes say hello."
    sent = upstream.of(name)
    assert len(sent) == 2
    return sent[1]


def test_chat_openai_by_base_url(gateway: str, upstream: ScriptedUpstream):
    name = f"lc-{uuid.uuid4().hex[:8]}"
    chat = ChatOpenAI(model=name, base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    last = conversation(chat, upstream, name)
    assert last["messages"][-1]["role"] == "tool" and last["messages"][-1]["content"] == "hello"


def test_chat_anthropic_by_base_url(gateway: str, upstream: ScriptedUpstream):
    name = f"lc-{uuid.uuid4().hex[:8]}"
    chat = ChatAnthropic(model=name, base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0,
                         max_tokens=256)
    last = conversation(chat, upstream, name)
    assert last["messages"][-1]["content"][0]["type"] == "tool_result"
