"""Debian's chromium, headless, driven by Playwright (``executable_path``: Playwright's own browser download
cannot work offline). A page records what a person would not see: script errors, Content-Security-Policy
violations, and any request to another host than the appliance."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LAPTOP = {"width": 1366, "height": 768}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def chromium_path() -> str:
    found = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    if not found:
        pytest.fail("the browser tests need Debian's chromium: `apt-get install chromium` (make install-test does)")
    return found


@dataclass
class Watched:
    page: object  # playwright.sync_api.Page
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    api_requests: list[tuple[str, str | None]] = field(default_factory=list)  # (url, Authorization)

    def assert_clean(self) -> None:
        assert self.foreign == [], f"requests to other hosts: {self.foreign}"
        assert self.errors == [], f"script errors or policy violations: {self.errors}"


@contextmanager
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # root in CI: chromium's sandbox needs user namespaces a container may not give
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def watched_page(launched: object, base_url: str, expected_failures: tuple[str, ...] = ()) -> Iterator[Watched]:
    """A laptop-sized page. ``expected_failures``: console texts that are not errors in this test (the browser
    logs every 4xx answer, e.g. a route another part of the appliance has not built)."""
    context = launched.new_context(viewport=LAPTOP)  # type: ignore[attr-defined]
    page = context.new_page()
    watched = Watched(page)

    def on_console(message: object) -> None:
        text = message.text  # type: ignore[attr-defined]
        if message.type == "error" and not any(part in text for part in expected_failures):  # type: ignore[attr-defined]
            watched.errors.append(text)

    def on_request(request: object) -> None:
        url: str = request.url  # type: ignore[attr-defined]
        if not url.startswith(base_url) and not url.startswith(("data:", "blob:")):
            watched.foreign.append(url)
        elif "/api/" in url:
            watched.api_requests.append((url, request.headers.get("authorization")))  # type: ignore[attr-defined]

    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.errors.append(f"page error: {error}"))
    page.on("request", on_request)
    # nothing leaves the machine, whatever a page asks for
    page.route(lambda url: not url.startswith(base_url), lambda route: route.abort())
    try:
        yield watched
    finally:
        context.close()
