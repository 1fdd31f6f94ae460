"""Fixtures: the API (with an in-process worker) on the real stack."""

from tests.api.stack import *  # noqa: F403
