"""Fixtures: the API on the real stack (tests/api/stack.py), and a fault proxy in front of it."""

from collections.abc import Iterator

import pytest

from tests.api.stack import *  # noqa: F403
from tests.api.stack import ApiStack
from tests.client.faults import FaultProxy


@pytest.fixture
def proxy(api_stack: ApiStack) -> Iterator[FaultProxy]:
    """A fresh fault proxy (no rules yet) forwarding to the real API."""
    assert api_stack.server.port is not None
    faults = FaultProxy(api_stack.server.port).start()
    yield faults
    faults.stop()
