"""Fixtures the serving tests share."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("no chromium here: the labelling page is tested in a real browser "
                    "(apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox"])
        yield browser
        browser.close()
