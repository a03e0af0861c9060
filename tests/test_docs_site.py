"""The documentation: the site builds and works in a real browser; the text cites no development
issue and links nowhere outside the repository.

The site is built with ``mkdocs build --strict`` (as ``.ci/run`` builds it) into a temporary
directory, served on loopback and opened in Debian's Chromium through playwright (no browser
download): the Material header is there, a click in the navigation changes the page's title,
the console shows no error, and no page asks anything of a host but the local one.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
#: Development issue numbers as a user would see them: "#42", "issue 42", "issue-42".
ISSUE_NUMBER = re.compile(r"(?<![\w&])#\d+\b|\bissues?[ -]\d+\b|/issues/\d+\b", re.IGNORECASE)
#: Markdown link and image targets, and HTML ``src``/``href`` attributes.
LINK_TARGET = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:src|href)=\"([^\"]+)\"")
#: A relative path written in the text that climbs a directory (``../shared/x.md``).
CLIMBING_PATH = re.compile(r"(?<![.\w])((?:\.\./)+[\w.-][\w./-]*)")


def user_facing_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _outside(page: Path, target: str) -> bool:
    """Whether a relative target, read from ``page``, leaves the repository or is an absolute
    path on the writer's machine."""
    path = target.split("#", 1)[0]
    if not path:
        return False
    if path.startswith("/"):
        return True
    resolved = (page.parent / path).resolve()
    return not resolved.is_relative_to(ROOT)


def test_no_issue_numbers_and_no_links_outside_the_repository() -> None:
    """README.md and every docs page: no development issue number, no relative link or path
    that resolves above the repository's root, and every relative link names a file that is
    there."""
    found: list[str] = []
    for page in user_facing_pages():
        text = page.read_text()
        name = page.relative_to(ROOT)
        found += [f"{name}: issue number {m.group(0)!r}" for m in ISSUE_NUMBER.finditer(text)]
        for match in LINK_TARGET.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL (http:, mailto:): not a path in the checkout
            if _outside(page, target):
                found.append(f"{name}: link outside the repository {target!r}")
            elif not (page.parent / target.split("#", 1)[0]).exists():
                found.append(f"{name}: link to a missing file {target!r}")
        for match in CLIMBING_PATH.finditer(text):
            if _outside(page, match.group(1)):
                found.append(f"{name}: path outside the repository {match.group(1)!r}")
    assert not found, "\n".join(found)


def test_the_readme_is_short_and_starts_with_the_quick_start() -> None:
    """README.md: at most 200 lines, its first section the quick start with the ports it uses
    and the options that change them."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections[0] == "Quick start", sections
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for needed in ("trainctl demo", "scripts/test", "7233", "8233", "--port", "--ui-port"):
        assert needed in quick, needed


def test_the_checks_bite() -> None:
    """The patterns catch what they are for and leave ordinary text alone."""
    assert ISSUE_NUMBER.search("as asked in #42") and ISSUE_NUMBER.search("(issue 30)")
    assert ISSUE_NUMBER.search("see issue-30") and not ISSUE_NUMBER.search("[a](#upgrading)")
    page = ROOT / "docs" / "x.md"
    assert _outside(page, "../../shared/DOMAIN.md") and _outside(page, "/work/x.md")
    assert not _outside(page, "../README.md") and not _outside(page, "tutorials/index.md#a")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site, served on a free loopback port; yields its base URL."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.mark.asyncio(loop_scope="session")
async def test_the_site_works_in_chromium(site: str) -> None:
    """The home page shows Material's header, a navigation click opens another page (its title
    changes), no console error appears and nothing is fetched from another host."""
    errors: list[str] = []
    elsewhere: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on(
                "request",
                lambda r: None if r.url.startswith((site, "data:")) else elsewhere.append(r.url),
            )
            await page.goto(site, wait_until="networkidle")
            header = page.locator("header.md-header")
            await header.wait_for(state="visible")
            assert "trainctl" in await header.inner_text()
            home_title = await page.title()
            await page.locator("nav.md-nav--primary a", has_text="Getting started").first.click()
            await page.wait_for_url(re.compile(r"getting-started/"))
            await page.wait_for_load_state("networkidle")
            title = await page.title()
            assert title != home_title and title.startswith("Getting started"), title
            assert await page.locator("h1", has_text="Getting started").count() == 1
        finally:
            await browser.close()
    assert not errors, errors
    assert not elsewhere, elsewhere
