"""The memory vault in a real browser: Debian's headless Chromium driven by Playwright (the
system browser, no download), against the app on a real uvicorn on loopback.

Loads every page (a screenshot of each goes to $DSH_MEMORY_VAULT_SCREENSHOTS, else to the test's
tmp dir), searches, adds and deletes a note, restores a retired summary, checks that a POST
without the CSRF token is refused and that `<script>` / `<img onerror>` planted in a memory file
neither runs nor disappears (it is shown as text).

No Chromium is a failure (`.ci/run` installs it), not a skip: only DSH_MEMORY_SKIP_BROWSER_TESTS=1
skips these tests, with that reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dsh_memory.serve.http_app import create_app
from dsh_memory.storage.store import MemoryStore
from tests.vault_helpers import make_memory, served

SKIP_ENV = "DSH_MEMORY_SKIP_BROWSER_TESTS"
SHOTS_ENV = "DSH_MEMORY_VAULT_SCREENSHOTS"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")

if os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes"):
    pytest.skip(f"browser tests skipped: {SKIP_ENV} is set", allow_module_level=True)


def _chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "no Chromium found (looked for chromium, chromium-browser, google-chrome): install Debian's "
        f"`chromium` (.ci/run does), or set {SKIP_ENV}=1 to skip the browser tests",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture()
def vault(tmp_path):
    settings = make_memory(tmp_path)
    with served(create_app(settings, mcp=False)) as base:
        yield base, settings


@pytest.fixture()
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.csp_errors = []
    pg.on("console", lambda m: pg.csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture()
def shots(tmp_path) -> Path:
    out = Path(os.environ.get(SHOTS_ENV) or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _pwned(page) -> bool:
    return page.evaluate("() => Boolean(window.__pwned) || document.title.includes('PWNED')")


def test_every_page_loads_and_planted_script_does_not_run(vault, page, shots):
    base, _ = vault
    pages = {
        "overview": "/",
        "browse": "/vault/browse",
        "file": "/vault/file?path=MEMORY.md",
        "file-lines": "/vault/file?path=rollout_summaries/release-fix.md&view=lines&line=3#L3",
        "search": "/vault/search?q=why+did+make+release+fail",
        "sessions": "/vault/sessions",
        "settings": "/vault/settings",
    }
    for name, url in pages.items():
        response = page.goto(base + url)
        assert response.status == 200, (name, response.status)
        assert page.locator("header nav").is_visible()
        assert not _pwned(page), name
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    # the stylesheet applied (served locally): the header is dark, not the browser default
    assert (
        page.evaluate("() => getComputedStyle(document.querySelector('header')).backgroundColor") != "rgba(0, 0, 0, 0)"
    )
    page.goto(base + "/vault/file?path=MEMORY.md")
    text = page.locator("article.md").inner_text()
    assert "<script>document.title='PWNED'" in text and "<img src=x onerror=" in text  # shown, as text
    assert page.locator("article.md script, article.md img").count() == 0
    assert page.locator("article.md a[href^='javascript']").count() == 0
    assert page.dialogs == [] and not _pwned(page)


def test_search_then_follow_a_hit_to_its_line(vault, page):
    base, _ = vault
    page.goto(base + "/vault/search")
    page.fill("#search-form input[name=q]", "settlement test Mondays")
    page.click("#search-form button[type=submit]")
    hits = page.locator("ol.hits a.cite")
    assert hits.count() >= 1
    first = hits.first.inner_text()
    hits.first.click()
    path, _, line = first.partition(":")
    assert path in page.locator("h1").inner_text()
    target = page.locator(f"pre.lines span#L{line.split('-')[0]}")
    assert target.get_attribute("class") == "hit" and "Monday" in target.inner_text()


def test_add_then_delete_a_note(vault, page, shots):
    base, settings = vault
    store = MemoryStore(settings.memory_root)
    before = set(store.list_notes())
    page.goto(base + "/vault/browse")
    page.fill("#add-note input[name=title]", "browser note")
    page.fill("#add-note textarea[name=note]", "Use the staging cluster for load tests.")
    page.click("#add-note button[type=submit]")
    assert "This will:" in page.content() and set(store.list_notes()) == before
    page.screenshot(path=str(shots / "confirm.png"), full_page=True)
    page.click("#confirm")
    assert "Added the note" in page.locator("#outcome").inner_text()
    (new,) = set(store.list_notes()) - before
    page.click("text=Open it")
    assert "Use the staging cluster for load tests." in page.locator("article.md").inner_text()
    page.click("button[data-action=delete]")
    assert "cannot be restored" in page.locator("#plan").inner_text()
    page.click("#confirm")
    assert "Deleted" in page.locator("#outcome").inner_text()
    assert not (settings.memory_root / new).exists()


def test_restore_a_retired_summary(vault, page):
    base, settings = vault
    page.goto(base + "/vault/browse#retired")
    page.locator("#retired button[data-action=restore]").first.click()
    assert "rollout_summaries/.retired/old-deploy.md" in page.locator("#plan").inner_text()
    page.click("#confirm")
    assert "Restored old-deploy" in page.locator("#outcome").inner_text()
    assert (settings.memory_root / "rollout_summaries/old-deploy.md").exists()
    page.goto(base + "/vault/browse")
    assert page.locator("#summaries a", has_text="old-deploy").count() == 1


def test_a_post_without_the_csrf_token_is_refused(vault, page):
    base, settings = vault
    page.goto(base + "/vault/browse")
    # the page's own add-note form, with its token removed, submitted by the browser
    page.evaluate("() => document.querySelector('#add-note input[name=csrf]').remove()")
    page.fill("#add-note textarea[name=note]", "forged")
    with page.expect_response(lambda r: "/vault/act/add" in r.url) as info:
        page.click("#add-note button[type=submit]")
    assert info.value.status == 403
    assert "CSRF" in page.locator("#error").inner_text()
    # a request without the page's token but with the browser's cookie (what a forged form gets)
    r = page.request.post(base + "/vault/act/add", form={"note": "forged", "confirm": "yes"})
    assert r.status == 403
    assert all(
        "forged" not in (settings.memory_root / n).read_text() for n in MemoryStore(settings.memory_root).list_notes()
    )
