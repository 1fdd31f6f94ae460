"""The compression codec: large payloads shrink and come back exact; small ones and payloads
it did not write pass as they are; a broken compressed payload is refused by name."""

from __future__ import annotations

import json
import zlib

import pytest
from temporalio.api.common.v1 import Payload

from worker.payload_codec import (
    DATA_CONVERTER,
    ENCODING,
    MAX_DECODED,
    THRESHOLD,
    CompressionCodec,
    PayloadDecodeError,
)
from workflows.contract.external_calls import RecentCalls, RecordedCall


def _items_payload(count: int) -> Payload:
    rows = [{"id": f"itm-{n:06d}", "seq": n, "kind": "tool_result", "lifecycle": "active", "tokens": {"full": n % 97}}
            for n in range(count)]
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(rows).encode())


async def test_a_large_payload_is_compressed_and_decodes_exactly():
    codec = CompressionCodec()
    original = _items_payload(20_000)
    assert original.ByteSize() > THRESHOLD
    [encoded] = await codec.encode([original])
    assert encoded.metadata["encoding"] == ENCODING and encoded.ByteSize() * 5 < original.ByteSize()
    [decoded] = await codec.decode([encoded])
    assert decoded == original


async def test_small_payloads_and_foreign_ones_pass_unchanged():
    codec = CompressionCodec()
    small = _items_payload(3)
    assert await codec.encode([small]) == [small]
    # a history recorded before the codec: its payloads are decoded as they are
    large_plain = _items_payload(20_000)
    assert await codec.decode([large_plain, small]) == [large_plain, small]


async def test_a_corrupt_or_oversized_compressed_payload_is_refused():
    codec = CompressionCodec()
    with pytest.raises(PayloadDecodeError, match="does not decode"):
        await codec.decode([Payload(metadata={"encoding": ENCODING}, data=b"not zlib at all")])
    [encoded] = await codec.encode([_items_payload(20_000)])
    with pytest.raises(PayloadDecodeError, match="truncated"):
        await codec.decode([Payload(metadata={"encoding": ENCODING}, data=encoded.data[: len(encoded.data) // 2])])
    bomb = zlib.compress(b"\0" * (MAX_DECODED + 1), 9)
    with pytest.raises(PayloadDecodeError, match="inflates past"):
        await codec.decode([Payload(metadata={"encoding": ENCODING}, data=bomb)])


async def test_the_data_converter_round_trips_workflow_values_through_the_codec():
    calls = RecentCalls(calls=[RecordedCall(key=f"k{n}", digest="d" * 64, item_ids=[f"itm-{n}"]) for n in range(2_000)])
    encoded = await DATA_CONVERTER.encode([calls])
    assert encoded[0].metadata["encoding"] == ENCODING
    assert await DATA_CONVERTER.decode(encoded, [RecentCalls]) == [calls]
