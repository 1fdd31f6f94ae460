"""The conversation chain's digests are what stored gateway sessions are found by: the fast
form of a turn's canonical text must be byte for byte the JSON form every stored digest was
made from, for any text (quotes, control characters, non-ASCII, lone surrogates)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from worker.api.gateway.conversation import Call, Turn, canonical_text

texts = st.text(alphabet=st.characters(codec=None), max_size=200)
kinds = st.sampled_from(["system", "user", "assistant", "tool_result", "note"])


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    kind = draw(kinds)
    calls = tuple(Call(draw(texts), draw(texts), draw(st.sampled_from(['{"a": 1}', "{ }", "not json", ""])))
                  for _ in range(draw(st.integers(0, 2))))
    images: dict | None = draw(st.sampled_from([None, {}, {"images": []}, {"images": [{"url": "https://x/y.png"}]}]))
    return Turn(kind, draw(texts), tool_calls=calls, tool_call_id=draw(st.none() | texts), extras=images)


@given(turns())
def test_canonical_text_is_the_json_every_digest_was_made_from(turn: Turn) -> None:
    assert canonical_text(turn) == json.dumps(turn.canonical(), sort_keys=True, ensure_ascii=False)
