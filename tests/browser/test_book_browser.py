"""The reader's book in a real browser: headless Chromium over a loopback server.

``make test`` runs this after the smoke render, on ``_build_smoke/_build/html``
(``ICLR25_BOOK_HTML`` points elsewhere, e.g. at ``_build/html`` after ``make book``). Every page
that exists is opened: the landing page, each chapter page, each notebook page, the data page,
the scorecard and the search page. Asserted on each: HTTP 200, no request to any host but the
loopback server, no console error and no failed local asset; per notebook page at least one
rendered figure and a working .ipynb download; MathJax typeset on the pages with math; search finds a word of the book.
Screenshots go to ``_build/screenshots/`` for a reviewer.

Chromium is Debian's ``chromium`` (``make install`` puts it there), driven by Playwright with
``executable_path``; Playwright's own browser downloads are never used.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from iclr25.paths import repo_root

playwright_api = pytest.importorskip("playwright.sync_api")

ROOT = repo_root()
HTML = Path(os.environ.get("ICLR25_BOOK_HTML", ROOT / "_build_smoke" / "_build" / "html"))
SHOTS = Path(os.environ.get("ICLR25_SCREENSHOTS", ROOT / "_build" / "screenshots"))
REQUIRED = os.environ.get("ICLR25_REQUIRE_BOOK") == "1"
# the flags that keep Chromium from reaching out on its own (updates, sync, safe browsing ...)
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions", "--metrics-recording-only",
                 "--disable-dev-shm-usage"]


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and (path := shutil.which(name)):
            return path
    return None


def _missing(why: str):
    if REQUIRED:
        pytest.fail(why)
    pytest.skip(why)


def _pages() -> dict[str, list[str]]:
    """The pages to open, by kind, as paths relative to the HTML root."""
    rel = lambda p: p.relative_to(HTML).as_posix()  # noqa: E731
    return {
        "landing": ["index.html"],
        "chapter": sorted(rel(p) for p in (HTML / "book" / "chapters").glob("*.html")),
        "notebook": sorted(rel(p) for p in (HTML / "notebooks").glob("*/*.html")),
        "book": [p for p in ("book/data.html", "book/scorecard.html", "book/performance.html")
                 if (HTML / p).exists()],
    }


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        _missing(f"no rendered book at {HTML}: run `make smoke` or `make book` first "
                 "(or set ICLR25_BOOK_HTML)")
    handler = functools.partial(_Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        _missing("Chromium not found: `apt-get install chromium` (make install does it) "
                 "or set CHROMIUM=/path/to/chrome")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Visit:
    """One page load with everything the browser did recorded."""

    def __init__(self, browser, base: str, path: str):
        self.base, self.path = base, path
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.remote: list[str] = []
        self.errors: list[str] = []
        self.failed: list[str] = []
        host = urlparse(base).netloc

        def route(r):
            url = r.request.url
            if url.startswith(("data:", "blob:", "about:")) or urlparse(url).netloc == host:
                r.continue_()
            else:  # never let a page reach another host, and remember that it tried
                self.remote.append(url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        self.response = self.page.goto(f"{base}/{path}", wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def screenshot(self, full_page: bool = False):
        SHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.path.removesuffix(".html"))
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)

    def close(self):
        self.context.close()


def _check_clean(v: Visit):
    assert v.response is not None and v.response.status == 200, f"{v.path}: HTTP {v.response and v.response.status}"
    assert not v.remote, f"{v.path} asked for non-loopback hosts: {v.remote[:5]}"
    assert not v.failed, f"{v.path}: failed requests {v.failed[:5]}"
    assert not v.errors, f"{v.path}: console errors {v.errors[:5]}"


def _has_math(v: Visit) -> bool:
    return bool(v.page.evaluate(
        "() => document.querySelectorAll('div.math, span.math, .math.notranslate').length"))


def _wait_mathjax(v: Visit):
    """Every math element typeset (sidebar titles included), not just the first."""
    try:
        v.page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise && "
            "document.querySelectorAll('mjx-container').length >= "
            "document.querySelectorAll('span.math, div.math').length", timeout=60_000)
    except playwright_api.TimeoutError:
        left = v.page.evaluate("() => [typeof MathJax, document.querySelectorAll('mjx-container').length, "
                               "document.querySelectorAll('span.math, div.math').length]")
        pytest.fail(f"{v.path}: math not typeset (MathJax, typeset, math elements) = {left}")


def test_pages(server, browser):
    """Every page: 200, loopback only, no console errors; figures, math and screenshots."""
    pages = _pages()
    assert pages["chapter"], "the book has no chapter pages"
    math_pages = 0
    for kind, paths in pages.items():
        for path in paths:
            v = Visit(browser, server, path)
            try:
                _check_clean(v)
                if _has_math(v):
                    _wait_mathjax(v)
                    math_pages += 1
                if kind == "notebook":
                    n = v.page.evaluate(
                        "() => Array.from(document.querySelectorAll('.cell_output img'))"
                        ".filter(i => i.complete && i.naturalWidth > 0).length")
                    assert n >= 1, f"{path}: no rendered figure in the notebook's outputs"
                    href = v.page.locator("a[href$='.ipynb']").first.get_attribute("href")
                    assert href, f"{path}: no download link for the notebook"
                    dl = v.page.request.get(v.page.url.rsplit("/", 1)[0] + "/" + href)
                    assert dl.status == 200 and b'"cells"' in dl.body(), f"{path}: notebook download broken"
                if kind == "landing":
                    links = v.page.locator("table a[href*='chapters/']").count()
                    assert links == len(pages["chapter"]), \
                        f"landing page links {links} chapters, {len(pages['chapter'])} are built"
                if kind == "book" and path.endswith("scorecard.html"):
                    text = v.page.inner_text("main")
                    assert re.search(r"\d+ registered findings across \d+ chapter\(s\): \d+ reproduced, "
                                     r"\d+ not reproduced", text), "scorecard shows no results"
                    # findings and checks apart: every chapter's checks sit in a collapsed dropdown
                    n_checks = v.page.locator("details.dropdown, .admonition.dropdown, "
                                              ".toggle-details").count()
                    assert n_checks >= 1, "scorecard shows no collapsed checks"
                    assert "checks held (true by construction; not counted)" in text
                if kind == "book" and path.endswith("performance.html"):
                    # the table and the chart of the committed bench records (or the plain note)
                    text = v.page.inner_text("main")
                    if "No benchmark results yet" not in text:
                        assert "strongest baseline" in text and re.search(r"\d+\.\d\dx", text)
                        assert v.page.locator(".iclr25-performance-chart svg").count() == 1, \
                            "performance page without its chart"
                v.screenshot(full_page=kind in ("landing", "book"))
            finally:
                v.close()
    assert math_pages >= 1, "no page with math was found to check MathJax on"


def test_search(server, browser):
    """The search page finds a word that the book's chapter pages contain."""
    v = Visit(browser, server, "search.html?q=gradient")
    try:
        _check_clean(v)
        v.page.wait_for_function(
            "() => document.querySelectorAll('#search-results li, ul.search li').length > 0",
            timeout=20_000)
        v.screenshot()
    finally:
        v.close()
