"""Images: their size read from real encoded files, their cost under both providers' rules, and
where each request format puts them (kept whole) or what it says of them (bounded)."""

from __future__ import annotations

import base64
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from activities.image_tokens import UNKNOWN_IMAGE_TOKENS, image_size, image_tokens
from activities.items import measure
from activities.tokens import count_message_tokens
from workflows.context import Item, ItemContent, Projection
from workflows.context.formats.anthropic_request import anthropic_request
from workflows.context.formats.images import chat_message
from workflows.context.formats.responses_request import turn_items
from workflows.context.render import Rendered
from workflows.context.render_item import item_message


def encoded(width: int, height: int, fmt: str) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 60)).save(buffer, format=fmt)
    return base64.b64encode(buffer.getvalue()).decode()


@settings(max_examples=25, deadline=None)
@given(width=st.integers(1, 2000), height=st.integers(1, 2000), fmt=st.sampled_from(["PNG", "JPEG", "GIF", "WEBP"]))
def test_the_size_is_read_from_every_format(width: int, height: int, fmt: str):
    assert image_size({"media_type": f"image/{fmt.lower()}", "data": encoded(width, height, fmt)}) == (width, height)


def test_a_progressive_jpeg_with_metadata_before_its_frame_is_read():
    buffer = io.BytesIO()
    Image.new("RGB", (640, 480)).save(buffer, format="JPEG", progressive=True, exif=b"Exif\x00\x00" + b"\x00" * 4000,
                                      icc_profile=b"\x00" * 3000)
    assert image_size({"data": base64.b64encode(buffer.getvalue()).decode()}) == (640, 480)


@pytest.mark.parametrize(("width", "height", "openai", "anthropic"), [
    (1024, 1024, 765, 1399),  # OpenAI: 768x768, 4 tiles; Anthropic: 1024*1024/750
    (512, 512, 255, 350),  # one tile; 349.5
    (4000, 3000, 765, 1534),  # 1024x768, 4 tiles; scaled to 1.15 megapixels
    (2048, 4096, 1105, 1534),  # 768x1536, 6 tiles (OpenAI's own example)
    (2048, 100, 765, 161),  # 4 tiles of a thin strip; scaled to 1568 pixels long
])
def test_the_cost_is_the_larger_of_the_two_rules(width: int, height: int, openai: int, anthropic: int):
    assert image_tokens({"media_type": "image/png", "data": encoded(width, height, "PNG")}) == max(openai, anthropic)


def test_an_image_of_unknown_size_is_charged_the_most_any_image_costs():
    assert image_tokens({"url": "https://example.com/cat.png"}) == UNKNOWN_IMAGE_TOKENS
    assert image_tokens({"media_type": "image/png", "data": "bm90IGFuIGltYWdl"}) == UNKNOWN_IMAGE_TOKENS
    largest = max(image_tokens({"data": encoded(w, h, "PNG")}) for w, h in [(1568, 733), (2048, 768), (1072, 1072)])
    assert largest <= UNKNOWN_IMAGE_TOKENS


def test_low_detail_is_charged_by_the_anthropic_rule_when_it_is_larger():
    data = encoded(1024, 1024, "PNG")
    assert image_tokens({"data": data, "detail": "low"}) == 1399
    assert image_tokens({"data": encoded(100, 100, "PNG"), "detail": "low"}) == 85


PNG = {"media_type": "image/png", "data": encoded(800, 600, "PNG")}
USER = Item(id="itm-000001", seq=1, kind="user", role="user")
TOOL = Item(id="itm-000003", seq=3, kind="tool_result", role="tool", tool_call_ids=["call_1"], tool_name="screenshot")


def test_a_message_kept_whole_carries_its_images_and_is_charged_for_them():
    content = ItemContent(text="What is on this screen?", images=[PNG])
    full = item_message(USER, content, Projection.FULL, 2000)
    assert full is not None and full["images"] == [PNG]
    without = count_message_tokens({"role": "user", "content": "What is on this screen?"})
    assert count_message_tokens(full) == without + image_tokens(PNG)
    costs = measure(USER, content, 2000, None)
    assert costs[Projection.FULL] == without + image_tokens(PNG)
    compact = item_message(USER, content, Projection.COMPACT, 2000)
    assert compact is not None and "images" not in compact and "1 image not shown" in compact["content"]
    assert costs[Projection.COMPACT] < costs[Projection.FULL]


def test_an_image_only_message_is_not_empty_while_kept_whole():
    content = ItemContent(text="", images=[PNG, {"url": "https://example.com/a.png"}])
    assert item_message(USER, content, Projection.FULL, 2000) == {"role": "user", "content": "", "images": content.images}
    assert item_message(USER, content, Projection.COMPACT, 2000)["content"].startswith("[2 images not shown")


def test_each_format_places_the_images_after_the_text():
    user = {"role": "user", "content": "look", "images": [PNG, {"url": "https://example.com/a.png", "detail": "low"}]}
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "taken", "images": [PNG]}
    data_url = f"data:image/png;base64,{PNG['data']}"
    assert chat_message(user) == {"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": data_url}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]}
    assert "images" in user  # the rendering's own message is not changed (it is cached)
    chat_tool = chat_message(tool)
    assert chat_tool["content"].startswith("taken\n[1 image(s)") and "images" not in chat_tool

    calls = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]}
    request = anthropic_request([user, calls, tool], 0)
    # (the breakpoint before the newest turn falls on the last block of the user message: its image)
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in request.messages[0]["content"][1:]] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG["data"]}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]
    result = request.messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["content"][0] == {"type": "text", "text": "taken"}
    assert result["content"][1]["source"]["data"] == PNG["data"]

    def rendered(message: dict) -> Rendered:
        return Rendered(message=message, item_id="itm-1", projection=Projection.FULL)
    assert turn_items(rendered(user), ItemContent(text="look"))[0]["content"][1] == {
        "type": "input_image", "image_url": data_url, "detail": "auto"}
    output = turn_items(rendered(tool), ItemContent(text="taken"))[0]["output"]
    assert output[0] == {"type": "input_text", "text": "taken"} and output[1]["type"] == "input_image"


@pytest.mark.parametrize("projection", [Projection.FULL, Projection.COMPACT, Projection.REFERENCE,
                                        Projection.MINIMAL_REFERENCE])
def test_a_paired_tool_result_renders_what_was_measured(projection: Projection):
    """The request renderer writes a paired tool message itself (and keeps an addressed output's
    reference message): with images it must still send what ``measure`` charged."""
    from workflows.context import item_with
    from workflows.context.render import render_entries, render_messages

    call = Item(id="itm-000002", seq=2, kind="assistant", role="assistant", group=2, tool_call_ids=["call_1"])
    calls = ItemContent(text="", tool_calls=[{"id": "call_1", "name": "screenshot", "arguments": "{}"}])
    result = item_with(TOOL, observation_id="obs-1")
    shot = ItemContent(text="taken at 12:00", tool_call_id="call_1", images=[PNG])
    items, contents = {call.id: call, result.id: result}, {call.id: calls, result.id: shot}
    entries = [(call.id, Projection.FULL), (result.id, projection)]
    measured = item_message(result, shot, projection, 2000)
    assert render_messages(entries, items, contents, 2000)[1] == measured
    facts: dict = {}
    kept = render_entries([call.id, result.id], [Projection.FULL, projection], items, contents, 2000, facts=facts)
    assert kept.messages[1] == measured
    assert ("images" in measured) == (projection == Projection.FULL)


def test_the_token_memo_tells_images_apart():
    from activities import token_memo

    small, large = ({"media_type": "image/png", "data": encoded(w, h, "PNG")} for w, h in ((64, 64), (1024, 1024)))
    counts = [token_memo.message_tokens({"role": "user", "content": "look", "images": [image]})
              for image in (small, large, small)]
    assert counts[1] - counts[0] == image_tokens(large) - image_tokens(small) > 0 and counts[2] == counts[0]
