"""Fixtures: the API (with an in-process worker) on the real stack, and a headless Chromium.

The browser is Debian's chromium (``apt-get install chromium``) driven by the ``playwright``
Python package; never ``playwright install``. Without them the browser tests are skipped
with the reason (and fail on CI, where ``make test`` installs chromium).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.api.stack import *  # noqa: F403

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
async def browser():
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    executable = _chromium()
    if executable is None:
        reason = "no chromium binary (apt-get install chromium); the inspector needs a real browser"
        if os.environ.get("CI"):  # make test installs it on CI: its absence is a failure there
            pytest.fail(reason)
        pytest.skip(reason)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        await browser.close()
