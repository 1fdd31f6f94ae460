"""An item's images (``ItemContent.images``: ``{"media_type", "data"}`` inline or ``{"url"}``,
with an optional ``detail``) in each request format. The chat rendering carries them beside a
message's text (``message["images"]``, at full fidelity only); each format places them after
the text, the order in which the gateway stored them."""

from __future__ import annotations

from typing import Any

TOOL_IMAGES_NOTE = "[{count} image(s) of this tool result not shown: Chat Completions tool results carry text only]"


def _url(image: dict[str, Any]) -> str:
    return image["url"] if "url" in image else f"data:{image['media_type']};base64,{image['data']}"


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """A rendered message as Chat Completions takes it: images as ``image_url`` parts after the
    text; a tool message's images (Chat tool results are text only) named in its text. The
    rendering's own message is left as it is (it is cached)."""
    images = message.get("images")
    if not images:
        return message
    out = {k: v for k, v in message.items() if k != "images"}
    if message["role"] == "tool":
        note = TOOL_IMAGES_NOTE.format(count=len(images))
        out["content"] = f"{message.get('content') or ''}\n{note}".lstrip("\n")
        return out
    parts: list[dict[str, Any]] = [{"type": "text", "text": str(message["content"])}] if message.get("content") else []
    for image in images:
        spec = {"url": _url(image)}
        if image.get("detail"):
            spec["detail"] = image["detail"]
        parts.append({"type": "image_url", "image_url": spec})
    out["content"] = parts
    return out


def anthropic_image(image: dict[str, Any]) -> dict[str, Any]:
    if "url" in image:
        return {"type": "image", "source": {"type": "url", "url": image["url"]}}
    return {"type": "image", "source": {"type": "base64", "media_type": image["media_type"], "data": image["data"]}}


def responses_image(image: dict[str, Any]) -> dict[str, Any]:
    return {"type": "input_image", "image_url": _url(image), "detail": image.get("detail") or "auto"}
