"""The search page in a real browser: Debian's chromium, driven by Playwright, against
``caffeine serve`` (a real uvicorn process on a free 127.0.0.1 port) over an indexed test web.

Skipped, with the reason, when chromium (``/usr/bin/chromium``, apt package ``chromium``) or the
``playwright`` Python package is missing; under CI (``CI=true``) that is a failure instead.
Playwright's own browser downloads are never used (no ``playwright install``).
A screenshot of a results page is saved to ``tests/artifacts/search.png`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from support import ROOT
from support.search_web import BASE, build_web, index_web
from support.session import SESSION_PREFIX

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "tests" / "artifacts"


def _missing(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sync_playwright():
    if not os.access(CHROMIUM, os.X_OK):
        _missing(f"{CHROMIUM} not found (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright Python package is not installed (pip install playwright)")
    return sync_playwright


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(hbase_store, sync_playwright):
    """`caffeine serve` over a freshly indexed web; yields its base URL."""
    from caffeine.percolator import connect

    sub_prefix = f"page{uuid.uuid4().hex[:6]}_"
    prefix = SESSION_PREFIX + sub_prefix
    cluster = connect(table_prefix=prefix)
    proc = None
    try:
        index_web(cluster, build_web())
        port = free_port()
        env = dict(os.environ, CAFFEINE_TABLE_PREFIX=prefix)
        proc = subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", "serve", "--port", str(port), "--no-access-log",
             "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"caffeine serve exited: {proc.stdout.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("caffeine serve did not become healthy within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


@pytest.fixture
def page(sync_playwright, tmp_path):
    profile = tmp_path / "chromium-profile"  # a fresh user-data-dir per test
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1100, "height": 900},
        )
        try:
            yield context.new_page()
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


def test_type_a_query_and_see_ranked_results(server, page):
    page.goto(server + "/")
    page.get_by_role("searchbox", name="Search the crawled pages").fill("zanzibar island quokka")
    page.keyboard.press("Enter")
    page.wait_for_selector("ol.results li.result")
    results = page.locator("ol.results li.result")
    assert results.count() >= 3
    first = results.nth(0)
    titles = [results.nth(i).locator("h2 a").inner_text() for i in range(results.count())]
    assert "Zanzibar notes" in titles and "Quokka facts" in titles
    assert titles.index("Quokka facts") < titles.index("Quokka trivia")  # the inlink boost
    zanzibar = results.filter(has_text="Zanzibar notes")
    assert zanzibar.count() == 1  # three copies, one canonical result
    assert zanzibar.locator(".url").inner_text() == BASE + "dup-b.html"
    assert zanzibar.locator("a", has_text="2 similar pages").count() == 1
    assert first.locator("mark").count() >= 1
    assert "Results 1–" in page.locator(".summary").inner_text()
    assert page.url.startswith(server + "/?q=zanzibar")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "search.png"), full_page=True)


def test_results_link_to_details_and_the_duplicate_cluster(server, page):
    page.goto(server + "/?q=zanzibar")
    result = page.locator("li.result").first
    result.get_by_role("link", name="2 similar pages").click()
    page.wait_for_selector("h1")
    assert page.locator("h1").inner_text() == "Duplicate cluster"
    rows = page.locator("tbody tr")
    assert rows.count() == 3
    assert "canonical" in rows.nth(0).inner_text() and "dup-b.html" in rows.nth(0).inner_text()
    page.go_back()
    page.locator("li.result").first.get_by_role("link", name="details").click()
    page.wait_for_selector("table.facts")
    assert page.locator("h1").inner_text() == "Zanzibar notes"
    assert "Inlinks (4)" in page.locator("h2.section", has_text="Inlinks").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "document.png"), full_page=True)


def test_a_bad_query_is_explained_on_the_page(server, page):
    response = page.goto(server + "/?q=%21%21%21")
    assert response.status == 400
    assert "no searchable words" in page.get_by_role("alert").inner_text()
    page.get_by_role("searchbox").fill("xylophone")
    page.keyboard.press("Enter")
    page.wait_for_selector("li.result")
    # The document's markup-looking text is shown as text, not run.
    assert "<script>alert(1)</script>" in page.locator("li.result .snippet").inner_text()
    assert page.evaluate("document.querySelectorAll('main script').length") == 0
