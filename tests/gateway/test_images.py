"""Images through the gateway (Chat Completions, Responses, Anthropic Messages), with the
official SDKs unchanged: sent upstream exactly while their message is kept whole, charged to
the budget, named when their message is bounded, part of what tells conversations apart, and
refused (shaped) when malformed."""

from __future__ import annotations

import base64
import io
import re
from typing import Any

import anthropic
import openai
import pytest
from PIL import Image

from activities.image_tokens import image_tokens
from tests.gateway.conftest import TOKEN
from tests.gateway.test_gateway import model, openai_client, session_of, stored
from tests.gateway.upstream import Scripted, ScriptedUpstream

pytestmark = pytest.mark.timeout(180)


def png(width: int, height: int, colour: tuple[int, int, int]) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def data_url(data: str) -> str:
    return f"data:image/png;base64,{data}"


def images_in(body: dict[str, Any]) -> list[str]:
    """The image data of a Chat Completions request, in order."""
    return [part["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


def test_openai_sdk_images_go_upstream_whole_and_count_against_the_budget(gateway: str, upstream: ScriptedUpstream):
    name = model()
    shots = [png(800, 600, (40 * n, 90, 200)) for n in range(5)]
    cost = image_tokens({"media_type": "image/png", "data": shots[0]})
    assert cost == 765  # 800x600: four 512-pixel tiles (OpenAI), more than Anthropic's 640
    budget = 2_600  # room for three of the five
    upstream.script(name, *[Scripted(text=f"screen {n} shows a form") for n in range(5)])
    client = openai_client(gateway)
    messages: list[Any] = [{"role": "system", "content": "You describe screenshots."}]
    sid = None
    for n, shot in enumerate(shots):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"What is on screen {n}?"},
                                                     {"type": "image_url", "image_url": {"url": data_url(shot)}}]})
        raw = client.chat.completions.with_raw_response.create(
            model=name, messages=messages, extra_headers={"X-Lanes-Budget-Tokens": str(budget)})
        answer = raw.parse().choices[0].message
        assert answer.content == f"screen {n} shows a form"
        sid = sid or session_of(raw)
        assert session_of(raw) == sid
        messages.append({"role": "assistant", "content": answer.content})
    sent = upstream.of(name)
    assert len(sent) == 5
    for n, body in enumerate(sent):
        shown = images_in(body)
        assert shown and shown[-1] == data_url(shots[n])  # the newest image, byte for byte
        assert len(shown) * cost <= budget  # no request carries more images than the budget pays for
    assert len(images_in(sent[0])) == 1 and images_in(sent[1]) == [data_url(shots[0]), data_url(shots[1])]
    last = sent[-1]
    assert len(images_in(last)) < 5  # the oldest left whole ...
    text = str([m.get("content") for m in last["messages"] if isinstance(m.get("content"), str)])
    assert "What is on screen 0? [1 image]" in text  # ... and the summary says an image went with it
    items = stored(gateway, sid)
    assert [i["text"] for i in items if i["kind"] == "user"] == [f"What is on screen {n}?" for n in range(5)]


def test_anthropic_sdk_a_tool_result_image_reaches_the_upstream(gateway: str, upstream: ScriptedUpstream):
    """What Claude Code sends when its Read tool opens a picture: a tool_result whose content
    holds the image; and a user turn with an image of its own."""
    name = model()
    shot, photo = png(640, 480, (10, 200, 10)), png(300, 200, (0, 0, 0))
    upstream.script(name, Scripted(calls=[("toolu_1", "Read", {"file_path": "shot.png"})]),
                    Scripted(text="A green square."))
    client = anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": photo}},
        {"type": "text", "text": "Compare this with shot.png"}]}]
    first = client.messages.create(model=name, max_tokens=256, messages=messages,
                                   tools=[{"name": "Read", "input_schema": {"type": "object"}}])
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": shot}}]}]}]
    with client.messages.stream(model=name, max_tokens=256, messages=messages,
                                tools=[{"name": "Read", "input_schema": {"type": "object"}}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "A green square."
    sent = upstream.of(name)
    user = sent[1]["messages"][0]["content"]
    assert [b["type"] for b in user] == ["text", "image"] and user[1]["source"]["data"] == photo
    result = next(b for m in sent[1]["messages"] for b in m["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == "toolu_1"
    assert [b["type"] for b in result["content"]] == ["image"] and result["content"][0]["source"] == {
        "type": "base64", "media_type": "image/png", "data": shot}


def test_another_image_is_another_conversation_and_the_same_one_a_retry(gateway: str, upstream: ScriptedUpstream):
    name = model()
    upstream.script(name, Scripted(text="red"), Scripted(text="blue"))
    client = openai_client(gateway)

    def ask(data: str) -> Any:
        return client.chat.completions.with_raw_response.create(model=name, messages=[{"role": "user", "content": [
            {"type": "text", "text": "Which colour?"}, {"type": "image_url", "image_url": {"url": data_url(data)}}]}])
    red, blue = png(64, 64, (255, 0, 0)), png(64, 64, (0, 0, 255))
    first, again, other = ask(red), ask(red), ask(blue)
    assert [r.parse().choices[0].message.content for r in (first, again, other)] == ["red", "red", "blue"]
    assert session_of(first) == session_of(again) != session_of(other)
    assert len(upstream.of(name)) == 2  # the repeat was answered from the store


@pytest.mark.parametrize(("part", "says"), [
    ({"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGk="}}, "data:image/...;base64"),
    ({"type": "image_url", "image_url": {}}, "an image needs a URL"),
    ({"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}}, "'input_audio' part cannot pass"),
])
def test_a_malformed_image_is_refused_in_the_protocols_shape(gateway: str, upstream: ScriptedUpstream,
                                                             part: dict, says: str):
    name = model()
    chat: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "see"}, part]}]
    with pytest.raises(openai.BadRequestError, match=re.escape(says)):
        openai_client(gateway).chat.completions.create(model=name, messages=chat)
    sourceless: list[Any] = [{"role": "user", "content": [{"type": "image"}]}]
    with pytest.raises(anthropic.BadRequestError, match="source"):
        anthropic.Anthropic(base_url=f"{gateway}/gateway/anthropic", api_key=TOKEN, max_retries=0).messages.create(
            model=name, max_tokens=64, messages=sourceless)
    assert upstream.of(name) == []


def test_responses_sdk_images_of_a_message_and_a_function_output_go_upstream(gateway: str, upstream: ScriptedUpstream):
    name = model()
    photo, shot = png(320, 240, (1, 2, 3)), png(200, 100, (9, 9, 9))
    upstream.script(name, Scripted(calls=[("call_s", "screenshot", {})]), Scripted(text="Both are dark."))
    client = openai.OpenAI(base_url=f"{gateway}/gateway/openai/v1", api_key=TOKEN, max_retries=0)
    tools: list[Any] = [{"type": "function", "name": "screenshot", "parameters": {"type": "object"}, "strict": False}]
    given: list[Any] = [{"role": "user", "content": [
        {"type": "input_text", "text": "Compare with the screen"},
        {"type": "input_image", "image_url": data_url(photo), "detail": "high"}]}]
    first = client.responses.create(model=name, input=given, tools=tools)
    given += [*[i.model_dump(exclude_none=True) for i in first.output],
              {"type": "function_call_output", "call_id": "call_s",
               "output": [{"type": "input_image", "image_url": data_url(shot)}]}]
    final = client.responses.create(model=name, input=given, tools=tools)
    assert final.output_text == "Both are dark."
    sent = upstream.of(name)[1]["input"]
    assert sent[0]["content"] == [{"type": "input_text", "text": "Compare with the screen"},
                                  {"type": "input_image", "image_url": data_url(photo), "detail": "high"}]
    assert sent[-1]["type"] == "function_call_output" and sent[-1]["output"] == [
        {"type": "input_image", "image_url": data_url(shot), "detail": "auto"}]
