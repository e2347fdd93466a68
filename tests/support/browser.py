"""Headless Chromium for the tests that open a page (the report, the viewer): Playwright
driving Debian's ``chromium`` (README, Tests: how it starts)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: no sandbox (tests may run as root in a container), nothing fetched in the background
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_path() -> str:
    """The ``chromium`` executable; skips the test when it or Playwright is missing (call it
    first in a test that sets up a lot before it opens a page)."""
    pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    return chromium


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A page of headless Chromium ``width`` x ``height`` pixels; skips the test when Chromium
    or Playwright is missing. The browser closes on leaving the block."""
    chromium = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
