"""The SDK's walks over an activation's payloads, skipped where they cannot change one.

Temporal's Python SDK (1.35) walks every payload of each workflow activation three times before
the workflow sees it (external-storage references, external retrieval, the codec) and every
payload of each completion three times after (the codec, external storage, references), with a
generic visitor written in Python: sampled on one worker serving 64 hosted sessions, 9 % of its
Python time, two turns' activations and completions at a time.

Lanes configures no external storage, and its codec (``payload_codec.py``) changes only a
payload of ``THRESHOLD`` bytes or more on the way out and a payload marked ``binary/zlib`` on the
way in. So a completion smaller than the threshold, or an activation whose bytes hold neither
that marker nor an external-storage marker, comes out of the three walks as it went in: it is
not walked. Any other, or any walk under another codec or with external storage, is the SDK's
own. The functions replaced are the SDK's module attributes its workflow worker calls;
``install()`` checks they are the ones this was written against and otherwise leaves them
(tests/test_payload_visits.py fails then, to have this looked at again).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import temporalio.bridge.worker as bridge_worker
from temporalio.converter import DataConverter

from worker.payload_codec import ENCODING, THRESHOLD, CompressionCodec

log = logging.getLogger("lanes.worker")

try:  # private to the SDK: checked by install(), which leaves the SDK's walks when it differs
    from temporalio.converter._extstore import (
        _REFERENCE_ENCODING,
        _REFERENCE_MARKER_KEY,
        _REFERENCE_MESSAGE_TYPE,
        StorageOperationMetrics,
    )

    # bytes an activation holds when a walk could change it: the codec's and external storage's
    MARKERS = (ENCODING, _REFERENCE_ENCODING, _REFERENCE_MARKER_KEY.encode(), _REFERENCE_MESSAGE_TYPE)
except ImportError:  # pragma: no cover - another SDK layout
    StorageOperationMetrics = None  # type: ignore[assignment,misc]

SDK_DECODE = bridge_worker.decode_activation
SDK_ENCODE = bridge_worker.encode_completion
DECODE_PARAMETERS = ["activation", "data_converter", "decode_headers", "storage_concurrency_limit"]
ENCODE_PARAMETERS = ["completion", "data_converter", "encode_headers", "storage_concurrency_limit"]


def fits_this_sdk() -> bool:
    """Whether the SDK's walks (as imported, before ``install``) are called as this module's
    replacements expect."""
    return StorageOperationMetrics is not None and all(
        list(inspect.signature(walk).parameters) == parameters
        for walk, parameters in ((SDK_DECODE, DECODE_PARAMETERS), (SDK_ENCODE, ENCODE_PARAMETERS)))


def _only_lanes_codec(data_converter: DataConverter) -> bool:
    return data_converter.external_storage is None and isinstance(data_converter.payload_codec, CompressionCodec)


async def decode_activation(activation: Any, data_converter: DataConverter, decode_headers: bool,
                            storage_concurrency_limit: int) -> Any:
    if _only_lanes_codec(data_converter):
        data = activation.SerializeToString()
        if not any(marker in data for marker in MARKERS):
            return StorageOperationMetrics()
    return await SDK_DECODE(activation, data_converter, decode_headers, storage_concurrency_limit)


async def encode_completion(completion: Any, data_converter: DataConverter, encode_headers: bool,
                            storage_concurrency_limit: int) -> Any:
    # every payload of a completion under the threshold is under it: the codec leaves each as it is
    if _only_lanes_codec(data_converter) and completion.ByteSize() < THRESHOLD:
        return StorageOperationMetrics()
    return await SDK_ENCODE(completion, data_converter, encode_headers, storage_concurrency_limit)


def install() -> bool:
    """Replace the SDK's walks in this process (idempotent); False when the SDK differs."""
    if not fits_this_sdk():
        log.warning("payload walks: this temporalio differs from the one they were written against; "
                    "the SDK's own are used")
        return False
    bridge_worker.decode_activation = decode_activation
    bridge_worker.encode_completion = encode_completion
    return True
