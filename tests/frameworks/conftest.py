"""Fixtures: the API (with an in-process worker) on the real stack, and agent frameworks
kept offline and away from the user's own settings."""

import os
import tempfile

# Before litellm is imported (by mini-swe-agent's models): its model cost map from the
# package, not fetched from GitHub (CI has no internet); mini-swe-agent quiet, its global
# .env from an empty directory rather than the user's.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))

from tests.api.stack import *  # noqa: F403
