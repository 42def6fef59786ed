"""The memory vault without a browser: pages, the guard's form rules, CSRF, escaping, settings
masking and each correction through the real core (Starlette TestClient in-process, and one real
uvicorn on loopback). The browser tests are in test_vault_browser.py."""

from __future__ import annotations

import os
import re
import socket
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from starlette.testclient import TestClient

from dsh_memory.serve.http_app import RPC_PATH, create_app
from dsh_memory.serve.vault import COOKIE
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.vault_helpers import FLOW_ACTIONS, SESSION, XSS_IMG, XSS_SCRIPT, make_memory, plan_and_confirm, served, token

BASE = "http://127.0.0.1:8765"
PAGES = ["/", "/vault/browse", "/vault/search?q=release", "/vault/sessions", "/vault/settings"]
PAGES += ["/vault/file?path=MEMORY.md", "/vault/file?path=rollout_summaries/release-fix.md", "/vault/file?path="]


@pytest.fixture()
def settings(tmp_path):
    return make_memory(tmp_path)


@pytest.fixture()
def client(settings):
    with TestClient(create_app(settings, mcp=False), base_url=BASE) as c:
        yield c


def _act(client, action, page="/vault/browse", marker="", **fields):
    """Post one correction the way the page does: its token, the confirm step (returned first),
    then `confirm()` posts the confirm step's form."""
    tok = token(client.get(page).text, action, marker)
    first = client.post(f"/vault/act/{action}", data={"csrf": tok, **fields})
    assert first.status_code == 200 and "This will:" in first.text, first.text[-800:]
    return first, lambda: client.post(f"/vault/act/{action}", data={"csrf": tok, "confirm": "yes", **fields})


@pytest.mark.parametrize("url", PAGES)
def test_every_page_renders_with_the_security_headers(client, url):
    r = client.get(url)
    assert r.status_code == 200, r.text[-500:]
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert "<script" not in r.text.lower()  # the vault itself ships no script at all
    # no external asset: the stylesheet is ours, and nothing else is loaded (no src= at all)
    assert re.findall(r"<link[^>]*href=\"([^\"]+)\"", r.text) == ["/vault/static/vault.css"]
    assert re.search(r"<[a-zA-Z][^>]*\ssrc=", r.text) is None


def test_overview_shows_summary_budget_memory_md_and_counts(client, settings):
    html = client.get("/").text
    from dsh_memory.readpath import summary

    chars = summary(MemoryStore(settings.memory_root), settings.max_summary_chars).chars
    assert chars > 50
    assert f"{chars} of {settings.max_summary_chars} characters" in html
    assert "the settlement test fails on Mondays" in html and "Deploy with <code>make release</code>" in html
    assert 'id="count-processed">1<' in html and 'id="count-notes">1<' in html
    assert "no Prefect server configured" in html or "Prefect" in html


def test_planted_html_in_memory_files_is_escaped_everywhere(client):
    for url in ("/", "/vault/file?path=MEMORY.md", "/vault/file?path=MEMORY.md&view=lines", "/vault/search?q=PWNED"):
        html = client.get(url).text
        assert "<script>document.title" not in html and "<img src=x" not in html, url
        assert "&lt;script&gt;document.title=" in html, url
    rendered = client.get("/vault/file?path=MEMORY.md").text
    assert 'href="javascript:' not in rendered  # unsafe link schemes are not links
    # a relative link in a memory file opens the vault's reader, resolved inside the memory
    assert 'href="/vault/file?path=rollout_summaries/release-fix.md"' in rendered
    assert XSS_IMG.replace("<", "&lt;").split(" ")[0] in rendered and XSS_SCRIPT not in rendered


def test_overview_says_when_it_lists_only_the_newest_imports(client, settings):
    """The overview lists the 50 newest pieces `dsh-memory import` brought in: with more, it said
    nothing of the others (an import of a few dozen projects' memory files has more)."""
    import json

    manifest = {
        f"codex:{i}": {
            "agent": "codex",
            "source": f"/m/{i:03d}.md",
            "imported_at": f"2026-11-01T00:{i // 60:02d}:{i % 60:02d}",
        }
        for i in range(51)
    }
    (settings.memory_root / ".state/imports.json").write_text(json.dumps(manifest))
    page = client.get("/").text
    assert "/m/050.md" in page and "/m/000.md" not in page  # the newest first
    assert "Imported from other agents (51)" in page and "The 50 most recent of 51 are listed here" in page
    del manifest["codex:0"]
    (settings.memory_root / ".state/imports.json").write_text(json.dumps(manifest))
    assert "most recent of" not in client.get("/").text


def test_overview_reloads_while_a_phase_runs_and_consolidate_is_disabled_while_one_runs(client, settings, monkeypatch):
    """docs/vault.md said the overview's buttons are disabled while a phase runs: Consolidate now
    (its one button) is disabled while a consolidation runs, and stays usable during extraction."""
    from datetime import UTC, datetime

    from prefect.settings import PREFECT_API_URL, temporary_settings

    from dsh_memory.serve.prefect_server import free_port
    from dsh_memory.storage.locks import phase_lock

    # this memory's phases only: not the runs other tests leave in flight on the suite's server
    dead = f"http://127.0.0.1:{free_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", dead)
    with temporary_settings(updates={PREFECT_API_URL: dead}):
        assert "http-equiv" not in client.get("/").text
        with StateStore(settings.memory_root) as st:
            st.try_start("being-extracted", datetime.now(UTC), source="dsh")
        page = client.get("/").text
        assert '<meta http-equiv="refresh" content="4">' in page and 'data-action="consolidate">' in page
        with phase_lock(settings.memory_root, "phase2"):
            page = client.get("/").text
        assert 'data-action="consolidate" disabled' in page


def test_browse_shows_provenance_usage_notes_skills_and_retired(client, settings):
    with StateStore(settings.memory_root) as st:
        from datetime import UTC, datetime

        st.record_usage("rollout_summaries/release-fix.md", datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    html = client.get("/vault/browse").text
    assert "release-fix" in html and "/home/dev/payments" in html and "dsh" in html
    assert "2026-11-30 09:00 UTC" in html  # last use
    assert "settlement flake" in html and "old-deploy" in html
    assert 'href="/vault/file?path=skills/release-checklist/SKILL.md"' in html


def test_browse_shows_each_memory_files_health(client, settings):
    """Issue 27: per file, items and the figures `status --json` reports (memory_files)."""
    from datetime import UTC, datetime

    from dsh_memory.readpath.health import memory_health

    def recap_row(html: str) -> str:
        rows = html.split('id="summaries"', 1)[1].split("</table>", 1)[0].split("<tr>")
        return next(r for r in rows if ">release-fix<" in r)

    assert "(never used)" in recap_row(client.get("/vault/browse").text)
    with StateStore(settings.memory_root) as st:
        st.record_usage("rollout_summaries/release-fix.md", datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
        health = memory_health(MemoryStore(settings.memory_root), st.usage(), settings.max_summary_chars, 90)
    files = {f["path"]: f for f in health["memory_files"]}
    html = client.get("/vault/browse").text
    table = html.split('id="health"', 1)[1].split("</table>", 1)[0]
    md = files["MEMORY.md"]
    assert f"MEMORY.md</a></td><td>{md['items']}</td><td>{md['stale']}</td><td>{md['aged']}</td><td>-</td>" in table
    assert md["items"] > 0
    recap = files["rollout_summaries/release-fix.md"]
    assert "(never used)" not in recap_row(html) and not recap["never_used"]
    assert f"<td>{recap['items']}</td>\n  <td>{recap['stale']}</td>\n  <td>1</td>" in recap_row(html)


def test_reading_and_searching_in_the_vault_records_no_usage(client, settings):
    assert client.get("/vault/file?path=rollout_summaries/release-fix.md").status_code == 200
    assert "release-fix.md" in client.get("/vault/search?q=tag+missing").text
    with StateStore(settings.memory_root) as st:
        assert st.usage() == {}  # a person looking is not an agent using the memory


def test_search_hits_link_to_their_lines(client):
    html = client.get("/vault/search?q=why+did+make+release+fail&mode=ranked").text
    assert "/vault/file?path=rollout_summaries/release-fix.md&amp;view=lines&amp;line=" in html
    lines = client.get("/vault/file?path=rollout_summaries/release-fix.md&view=lines&line=3").text
    assert 'id="L3" class="hit"' in lines


@pytest.mark.parametrize(
    "q,mode",
    [
        ("release tag", "all_on_same_line"),  # both words on the line, in another order than typed
        ("release tag", "all_within_lines"),
        ("zebra tag", "any"),  # either word: "zebra" is nowhere
        ('"make release" first', "all_on_same_line"),  # a quoted phrase is one query
    ],
)
def test_the_line_modes_take_each_word_typed_as_a_query(client, q, mode):
    """The vault's line modes do what their names say (as `dsh-memory search WORD WORD`): every
    word in the box is a query, a "quoted phrase" one query; not the whole text as one substring."""
    html = client.get("/vault/search", params={"q": q, "mode": mode}).text
    assert "MEMORY.md:5" in html, html[-1500:]  # "- Deploy with `make release`; tag first."
    nothing = client.get("/vault/search", params={"q": "release zebra", "mode": "all_on_same_line"}).text
    assert "0 hits" in nothing
    many = client.get("/vault/search", params={"q": " ".join(f"w{i}" for i in range(17)), "mode": mode})
    assert many.status_code == 400 and "at most 16 words" in many.text


def test_the_search_page_names_the_files_it_could_not_search(client, settings):
    (settings.memory_root / "rollout_summaries" / "latin.md").write_bytes("- zebra caf\xe9\n".encode("latin-1"))
    for mode in ("any", "ranked"):
        html = client.get("/vault/search", params={"q": "zebra", "mode": mode}).text
        assert "0 hits" in html and "skipped 1 file: rollout_summaries/latin.md (not UTF-8)" in html, mode


def test_a_search_hit_past_a_long_files_first_part_is_shown(client, settings):
    """A page shows at most 64,000 characters of a file: a hit below that opens around its line
    (numbered as in the file), not at the top where it is missing."""
    rules = [f"- rule number {i} keeps the build green always" for i in range(1, 3001)]
    rules[2499] = "- the zebra deploy needs a signed tag"
    (settings.memory_root / "MEMORY.md").write_text("# Handbook\n" + "\n".join(rules) + "\n")
    found = client.get("/vault/search?q=zebra+deploy&mode=any").text
    assert "/vault/file?path=MEMORY.md&amp;view=lines&amp;line=2501#L2501" in found
    page = client.get("/vault/file?path=MEMORY.md&view=lines&line=2501").text
    assert 'id="L2501" class="hit"' in page and "zebra deploy" in page
    assert 'id="L2451"' in page and 'id="L2450"' not in page  # from 50 lines above it
    assert "3001 lines, lines 2451–" in page


@pytest.mark.parametrize("line", ["²", "٣", "x", "-1", "9" * 20])
def test_a_line_that_is_not_a_number_opens_the_file_at_the_top(client, line):
    page = client.get("/vault/file", params={"path": "MEMORY.md", "view": "lines", "line": line})
    assert page.status_code == 200 and 'class="hit"' not in page.text


def test_a_cited_line_the_file_no_longer_has_opens_it_at_the_top(client, settings):
    """A link to a line past the file's end (the file emptied or shortened since the search that
    cited it): the file from its first line, not an error about a start_line nobody gave."""
    (settings.memory_root / "extensions/emptied.md").write_text("")
    for path in ("extensions/emptied.md", "MEMORY.md"):
        page = client.get("/vault/file", params={"path": path, "view": "lines", "line": "999"})
        assert page.status_code == 200, page.text[-300:]
        assert 'class="hit"' not in page.text
    assert 'id="L1"' in page.text  # MEMORY.md from its first line, not its last one alone


def test_a_directory_listing_cut_at_its_bound_says_so(client, settings):
    """A folder with more entries than a listing holds (rollout_summaries/ after years of
    sessions): the page says it shows only the first ones, not that this is the whole folder."""
    from dsh_memory.readpath.models import MAX_LIST_RESULTS

    folder = settings.memory_root / "extensions/many"
    folder.mkdir()
    for i in range(MAX_LIST_RESULTS + 1):
        (folder / f"f{i:05d}.md").write_text("x")
    page = client.get("/vault/file", params={"path": "extensions/many"}).text
    assert f"f{MAX_LIST_RESULTS:05d}.md" not in page and f"f{MAX_LIST_RESULTS - 1:05d}.md" in page
    assert f"the first {MAX_LIST_RESULTS:,} entries" in page
    assert "the first" not in client.get("/vault/file", params={"path": "extensions"}).text


def test_browse_and_sessions_list_at_most_the_listing_bound_and_say_so(client, settings):
    """Years of sessions: Browse listed every rollout summary, note, skill and retired summary, and
    Sessions every session ever extracted (20,000 sessions: 13 and 16 MB of HTML, 15 s for Chromium
    to show each page); each list holds the listing bound and says how many there are. Skills were
    cut at 200 without a word."""
    from dsh_memory.readpath.models import MAX_LIST_RESULTS

    assert all("Only the" not in client.get(url).text for url in ("/vault/browse", "/vault/sessions"))
    root, n = settings.memory_root, MAX_LIST_RESULTS + 1
    now = datetime.now(UTC)
    for i in range(n):
        prov = f"---\nsession_id: bulk-{i:05d}\nsource: dsh\ncwd: /src/app\n---\n# bulk\n"
        (root / f"rollout_summaries/a-bulk-{i:05d}.md").write_text(prov)
        (root / f"rollout_summaries/.retired/a-old-{i:05d}.md").write_text("# old\n")
        (root / f"extensions/ad_hoc/notes/0-note-{i:05d}.md").write_text(f"note {i}\n")
        (root / f"skills/a-skill-{i:05d}").mkdir()
    with StateStore(root) as st:
        for i in range(n):
            st.try_start(f"bulk-{i:05d}", now - timedelta(days=1, seconds=i), source="dsh")
            st.finish(f"bulk-{i:05d}", "done", 1, now - timedelta(days=1, seconds=i), source="dsh")
    page = client.get("/vault/browse").text
    last, cut = f"{MAX_LIST_RESULTS - 1:05d}", f"{MAX_LIST_RESULTS:05d}"
    for what in ("a-bulk-", "a-old-", "0-note-", "a-skill-"):
        assert what + last in page and what + cut not in page, what
    assert "release-fix" not in page  # sorted after the bulk ones: past the bound
    assert f"Rollout summaries ({n + 1:,})" in page and f"Retired summaries ({n + 1:,})" in page
    assert f"Notes waiting for consolidation ({n + 1:,})" in page
    assert page.count(f"Only the first {MAX_LIST_RESULTS:,} of") == 3 and "Skills (2,000+)" in page
    assert page.count("search for the others") == 2  # retired summaries are not searched:
    assert "dsh-memory restore NAME restores any of them" in page
    sessions = client.get("/vault/sessions").text
    assert SESSION in sessions and "bulk-00000" in sessions  # the newest first
    assert f"bulk-{MAX_LIST_RESULTS - 2:05d}" in sessions and f"bulk-{last}" not in sessions  # SESSION is first
    assert f"Only the {MAX_LIST_RESULTS:,} most recently updated of {n + 1:,}" in sessions


def test_the_add_form_says_and_keeps_the_notes_project(client, settings):
    """The form wrote every note as global: a note for one repository is for that project."""
    store = MemoryStore(settings.memory_root)
    before = set(store.list_notes())
    confirm, do = _act(client, "add", note="Run `make ci` before pushing.", project="/src/app")
    assert "the project of /src/app" in confirm.text
    done = do()
    assert done.status_code == 200 and "(project /src/app)" in done.text
    (new,) = set(store.list_notes()) - before
    assert "\nproject: /src/app\n" in (settings.memory_root / new).read_text()
    tok = token(client.get("/vault/browse").text, "add")
    bad = client.post("/vault/act/add", data={"csrf": tok, "note": "x", "project": "/src/victim\u2028x"})
    assert bad.status_code == 400 and "cwd must be one path" in bad.text
    assert set(store.list_notes()) - before == {new}


def test_add_then_delete_a_note(client, settings):
    store = MemoryStore(settings.memory_root)
    before = set(store.list_notes())
    confirm, do = _act(client, "add", note="Always run ruff before pushing.", title="ruff first")
    assert "extensions/ad_hoc/notes/" in confirm.text and "Always run ruff before pushing." in confirm.text
    assert set(store.list_notes()) == before  # the confirm step changed nothing
    done = do()
    assert done.status_code == 200 and "Added the note" in done.text
    (new,) = set(store.list_notes()) - before
    assert "Always run ruff" in (settings.memory_root / new).read_text()
    confirm, do = _act(client, "delete", f"/vault/file?path={new}", path=new)
    assert "cannot be restored" in confirm.text and (settings.memory_root / new).exists()
    done = do()
    assert done.status_code == 200 and not (settings.memory_root / new).exists()


def test_a_note_from_the_form_keeps_its_line_breaks_as_typed(client, settings):
    """A browser posts a textarea's line breaks as CRLF: the note is written with LF, and a note
    as long as the textarea allows (20,000 characters, line breaks counted once) is taken."""
    store = MemoryStore(settings.memory_root)
    before = set(store.list_notes())
    typed = "step\n" * 4000  # 20,000 characters in the textarea
    _, do = _act(client, "add", note=typed.replace("\n", "\r\n"))
    assert do().status_code == 200
    (new,) = set(store.list_notes()) - before
    text = (settings.memory_root / new).read_bytes().decode()
    assert "\r" not in text and text.endswith("step\nstep\n")


@pytest.mark.parametrize("linked,hidden", [("extensions", "settlement flake"), ("rollout_summaries", "old-deploy")])
def test_browse_leaves_out_a_linked_memory_folder(client, settings, tmp_path, linked, hidden):
    """A memory folder that is a symlink is refused by the path guard: the browse page lists
    nothing through it (rather than failing on the first file it cannot read)."""
    folder = settings.memory_root / linked
    os.rename(folder, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", folder)
    page = client.get("/vault/browse")
    assert page.status_code == 200, page.text[-500:]
    assert hidden not in page.text


def test_browse_lists_a_note_and_a_retired_summary_whose_name_is_no_utf8(client, settings):
    """A file name in another system's bytes (`caf\\xe9.md`, a memory root copied from elsewhere):
    Browse was a bare 500 (the name cannot be put in a link or a page); it is listed escaped, as
    the folder listing shows it."""
    root = os.fsencode(settings.memory_root)
    for folder in (b"extensions/ad_hoc/notes", b"rollout_summaries/.retired"):
        with open(os.path.join(root, folder, b"caf\xe9.md"), "wb") as f:
            f.write(b"a note from elsewhere\n")
    page = client.get("/vault/browse")
    assert page.status_code == 200, page.text[-500:]
    assert 'href="/vault/file?path=extensions/ad_hoc/notes/caf%5Cxe9.md"' in page.text
    assert 'href="/vault/file?path=rollout_summaries/.retired/caf%5Cxe9.md"' in page.text
    assert "settlement flake" in page.text and "old-deploy" in page.text  # the others still listed


def test_a_lone_surrogate_in_the_bookkeeping_is_shown_escaped_not_a_500(client, settings):
    """JSON's `"\\udce9"` (a lone surrogate: no character, cannot be encoded as UTF-8) in the import
    manifest or the replay report, edited by hand or by another tool: the overview and the Replay
    page were a bare 500 with a traceback (the page could not be encoded); it is shown escaped."""
    import json

    state = settings.memory_root / ".state"
    (state / "imports.json").write_text(json.dumps({"codex:x": {"agent": "codex", "source": "/m/caf\udce9.md"}}))
    (state / "replay.json").write_text(
        json.dumps({"sessions": 1, "new_rules": [{"session": "s", "text": "caf\udce9"}]})
    )
    for url, shown in (("/", "/m/caf\\udce9.md"), ("/vault/replay", "caf\\udce9 <span")):
        page = client.get(url)
        assert page.status_code == 200 and shown in page.text, url


def test_overview_with_a_linked_memory_md_shows_the_rest(client, settings, tmp_path):
    """MEMORY.md kept elsewhere and linked in: not read (summary and search skip it too), but the
    overview still shows everything else."""
    handbook = settings.memory_root / "MEMORY.md"
    os.rename(handbook, tmp_path / "dotfiles-MEMORY.md")
    os.symlink(tmp_path / "dotfiles-MEMORY.md", handbook)
    page = client.get("/")
    assert page.status_code == 200 and "No MEMORY.md yet." in page.text


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_overview_with_no_regular_memory_md_shows_the_rest(client, settings, kind):
    """A folder or a FIFO in MEMORY.md's place (read refuses it: not a regular file) made the whole
    overview an error page; like a linked one it is not shown, and the rest of the page is."""
    handbook = settings.memory_root / "MEMORY.md"
    handbook.unlink()
    handbook.mkdir() if kind == "directory" else os.mkfifo(handbook)
    page = client.get("/")
    assert page.status_code == 200, page.text[-500:]
    assert "No MEMORY.md yet." in page.text and 'id="count-processed">1<' in page.text


def test_delete_guard_refuses_pipeline_and_retired_files(client, settings):
    tok = token(client.get("/vault/browse").text, "delete")
    for path in ("MEMORY.md", "raw_memories.md", "rollout_summaries/.retired/old-deploy.md", "../x"):
        r = client.post("/vault/act/delete", data={"csrf": tok, "confirm": "yes", "path": path})
        assert r.status_code in (403, 404), (path, r.status_code)
    assert (settings.memory_root / "MEMORY.md").exists()
    assert (settings.memory_root / "rollout_summaries/.retired/old-deploy.md").exists()


def test_restore_a_retired_summary(client, settings):
    confirm, do = _act(client, "restore", name="old-deploy")
    assert "rollout_summaries/.retired/old-deploy.md" in confirm.text
    assert not (settings.memory_root / "rollout_summaries/old-deploy.md").exists()
    done = do()
    assert "Restored old-deploy as rollout_summaries/old-deploy.md" in done.text
    assert (settings.memory_root / "rollout_summaries/old-deploy.md").exists()
    with StateStore(settings.memory_root) as st:
        assert "old-deploy" not in st.retired() and "rollout_summaries/old-deploy.md" in st.usage()


def test_forget_a_session_from_the_sessions_page(client, settings):
    confirm, do = _act(client, "forget", "/vault/sessions", session=SESSION)
    assert "rollout_summaries/release-fix.md" in confirm.text and "exclude it from future extraction" in confirm.text
    assert (settings.memory_root / "rollout_summaries/release-fix.md").exists()
    done = do()
    assert done.status_code == 200 and "Forgot session" in done.text
    assert (settings.memory_root / "rollout_summaries/.retired/release-fix.md").exists()
    with StateStore(settings.memory_root) as st:
        assert st.overrides()[SESSION] == "exclude" and SESSION not in st.claims()


def test_forget_plans_only_the_summaries_forgetting_retires(client, settings):
    """The confirm step lists what the forget will retire: a summary with no session (an import's)
    is not the session 'None''s. A session nothing knows is refused as the CLI refuses it (the
    vault excluded it and said "Forgot"): one forget, `forget_session`, for both."""
    MemoryStore(settings.memory_root).write_rollout_summary("imported-notes", {"source": "import"}, "# Imported\n")
    confirm, do = _act(client, "forget", "/vault/sessions", session="None")
    assert "imported-notes" not in confirm.text and "Retire its 0 rollout summaries" in confirm.text
    done = do()
    assert done.status_code == 404 and "nothing known about session None" in done.text
    assert (settings.memory_root / "rollout_summaries/imported-notes.md").exists()
    with StateStore(settings.memory_root) as st:
        assert "None" not in st.overrides()


def test_dsh_memory_http_serves_the_vault_and_says_when_no_prefect_server_would_run_a_flow(settings, tmp_path):
    """`dsh-memory http` as a user starts it, without a Prefect server: extraction and
    consolidation are not pretended, the page says why and offers no confirm button."""
    import os
    import subprocess
    import sys
    import time

    from tests.vault_helpers import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DSH_MEMORY_"))}
    env.update(
        DSH_MEMORY_ROOT=str(settings.memory_root), PREFECT_HOME=str(tmp_path / "ph"), DSH_MEMORY_IGNORE_BLOCKS="1"
    )
    cmd = [sys.executable, "-m", "dsh_memory.cli", "http", "--port", str(port), "--no-mcp"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=20) as c:
            assert "What the agents remember" in c.get("/").text
            for action, page, fields in FLOW_ACTIONS:
                plan, forced = plan_and_confirm(c, action, page, fields)
                assert "No Prefect server is configured" in plan.text and 'id="confirm"' not in plan.text
                assert forced.status_code == 400 and "No Prefect server is configured" in forced.text
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    assert "dsh-memory: http://127.0.0.1" in out and "vault" in out, out


CSRF_CASES = ["no token", "other action's token", "non-ASCII token", "no cookie", "other cookie", "other process"]


def test_re_running_extraction_of_an_excluded_session_says_it_would_be_skipped(client, settings):
    """A session `forget --project` excluded keeps its row on the Sessions page: its Re-run
    extraction step says extraction skips it, not that Phase 1 would extract it."""
    with StateStore(settings.memory_root) as st:
        st.set_override(SESSION, "exclude")
    page = client.get("/vault/sessions").text
    assert "(excluded)" in page
    plan = client.post("/vault/act/extract", data={"csrf": token(page, "extract"), "session": SESSION})
    assert re.search(r'id="blocked">[^<]*excluded', plan.text) and 'id="confirm"' not in plan.text


@pytest.mark.parametrize("sid", ["$(touch pwned)", "a b; rm -rf x", "-x"])
def test_the_terminal_command_a_confirm_step_names_is_safe_to_paste(client, sid):
    """A session id comes from a session log's folder name (DSH: any characters): the command the
    Re-run extraction step offers runs `extract` on that id, nothing else, when pasted."""
    import html
    import shlex

    from tests.vault_helpers import FLOW_ACTIONS

    action, page, _ = FLOW_ACTIONS[0]
    plan = client.post(f"/vault/act/{action}", data={"csrf": token(client.get(page).text, action), "session": sid})
    (line,) = re.findall(r"From a terminal: (.*?)</li>", plan.text)
    words = shlex.split(html.unescape(line))
    assert words[:2] == ["dsh-memory", "extract"] and words[-1] == sid
    assert words[2:-1] == (["--"] if sid.startswith("-") else [])  # an id, not an option


@pytest.mark.parametrize("userinfo", ["", "dsh:topsecret@"])
def test_a_prefect_server_that_fails_the_request_is_one_clear_message(settings, tmp_path, userinfo):
    """`dsh-memory http` pointed at a Prefect API that answers 500 (a server in trouble, or a proxy
    in front of none): Consolidate now says the API failed (503), not "internal error". An API
    behind basic auth (its password in PREFECT_API_URL) is named without the password."""
    import subprocess
    import sys
    import threading

    from tests.vault_helpers import free_port

    failing = socket.create_server(("127.0.0.1", 0))

    def answer_500():
        while True:
            try:
                conn, _ = failing.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=answer_500, daemon=True).start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DSH_MEMORY_"))}
    env.update(
        DSH_MEMORY_ROOT=str(settings.memory_root),
        PREFECT_HOME=str(tmp_path / "ph"),
        DSH_MEMORY_IGNORE_BLOCKS="1",
        PREFECT_API_URL=f"http://{userinfo}127.0.0.1:{failing.getsockname()[1]}/api",
    )
    cmd = [sys.executable, "-m", "dsh_memory.cli", "http", "--port", str(port), "--no-mcp"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if proc.poll() is not None or httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                threading.Event().wait(0.1)
        with httpx.Client(base_url=base, timeout=60) as c:
            _, forced = plan_and_confirm(c, "consolidate", "/", {})
            assert forced.status_code == 503, forced.text[-500:]
            assert re.search(r'id="error">the Prefect API at http://127.0.0.1:\d+/api answered 500<', forced.text)
            assert "topsecret" not in forced.text + c.get("/").text + c.get("/vault/settings").text
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
        failing.close()
    assert "Traceback" not in out, out


@pytest.mark.parametrize("case", CSRF_CASES)
def test_every_post_needs_the_csrf_token_of_its_action(client, settings, case):
    note_dir = settings.memory_root / "extensions/ad_hoc/notes"
    before = sorted(note_dir.iterdir())
    html = client.get("/vault/browse").text
    data = {"note": "sneaky", "confirm": "yes", "csrf": token(html, "add")}
    if case == "no token":
        del data["csrf"]
    elif case == "other action's token":
        data["csrf"] = token(html, "restore")
    elif case == "non-ASCII token":  # a forged form's token is any text: refused, not a 500
        data["csrf"] = "é" * 64
    elif case == "no cookie":
        client.cookies.clear()
    elif case == "other cookie":
        client.cookies.clear()
        client.cookies.set(COOKIE, "attacker-chosen-nonce")
    else:  # a page of another server process (another secret) does not work here
        with TestClient(create_app(settings, mcp=False), base_url=BASE) as other:
            data["csrf"] = token(other.get("/vault/browse").text, "add")
            nonce = other.cookies[COOKIE]
        client.cookies.clear()
        client.cookies.set(COOKIE, nonce)
    r = client.post("/vault/act/add", data=data)
    assert r.status_code == 403 and "CSRF" in r.text
    assert sorted(note_dir.iterdir()) == before


def test_guard_takes_forms_only_for_vault_actions_and_json_only_elsewhere(client):
    tok = token(client.get("/vault/browse").text, "add")
    # a form to the RPC is refused as before; JSON to a vault action is refused too
    assert client.post(RPC_PATH, data={"method": "summary"}).status_code == 415
    assert client.post("/vault/act/add", json={"csrf": tok, "note": "x"}).status_code == 415
    assert client.post("/vault/act/add", content=b"note=x", headers={"content-type": "text/plain"}).status_code == 415
    assert client.post(RPC_PATH, json={"method": "summary"}).status_code == 200
    big = client.post("/vault/act/add", data={"csrf": tok, "note": "x" * (1024 * 1024 + 10)})
    assert big.status_code == 413
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 403
    cross = client.post("/vault/act/add", data={"csrf": tok, "note": "x"}, headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    same = client.post("/vault/act/add", data={"csrf": tok, "note": "x"}, headers={"Origin": BASE})
    assert same.status_code == 200 and "This will:" in same.text
    dup = client.post(
        "/vault/act/add",
        content=f"csrf={tok}&note=a&note=b",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert dup.status_code == 400


def test_the_vaults_own_forms_work_when_served_on_an_allowed_remote_host(settings):
    """`http --host 192.0.2.2 --allow-remote`: the browser posts the vault's forms with that
    Origin, its own; they are taken (another site's Origin is still refused)."""
    remote = "http://192.0.2.2:8765"
    with TestClient(create_app(settings, mcp=False, allowed_hosts=["192.0.2.2"]), base_url=remote) as c:
        tok = token(c.get("/vault/browse").text, "add")
        own = c.post("/vault/act/add", data={"csrf": tok, "note": "x"}, headers={"Origin": remote})
        assert own.status_code == 200 and "This will:" in own.text
        other = c.post("/vault/act/add", data={"csrf": tok, "note": "x"}, headers={"Origin": "http://evil.example"})
        assert other.status_code == 403
        footer = c.get("/").text.split("<footer>", 1)[1]
        assert "loopback only" not in footer and "served on 192.0.2.2" in footer  # not what it says on loopback


def test_the_footer_says_beyond_loopback_when_served_on_every_interface(settings):
    """`http --host 0.0.0.0 --allow-remote`, opened at 127.0.0.1: the server answers the network
    too (without authentication), so the footer must not say "served on loopback only"."""
    with TestClient(create_app(settings, mcp=False, allowed_hosts=["0.0.0.0"]), base_url=BASE) as c:
        footer = c.get("/vault/browse").text.split("<footer>", 1)[1]
    assert "loopback only" not in footer and "served on 0.0.0.0, beyond loopback" in footer


def test_settings_page_masks_the_key_and_names_each_source(tmp_path, monkeypatch):
    secret = "sk-vaulttest-0123456789abcdef0123456789"
    monkeypatch.setenv("DSH_MEMORY_API_KEY", secret)
    monkeypatch.setenv("DSH_MEMORY_IDLE_SECONDS", "77")
    monkeypatch.setenv("DSH_MEMORY_SEMANTIC_SEARCH", "off")
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    settings = make_memory(tmp_path)
    with TestClient(create_app(settings, mcp=False), base_url=BASE) as c:
        html = c.get("/vault/settings").text
    assert secret not in html and secret[:12] not in html
    assert '<code>api_key</code></td><td class="path">********</td><td class="source env">env' in html
    assert '<code>idle_seconds</code></td><td class="path">77</td><td class="source env">env' in html
    assert "source default" in html and "DSH_MEMORY_IGNORE_BLOCKS is set" in html
    assert '<code>semantic_search</code></td><td class="path">off</td><td class="source env">env' in html
    assert "Ranked search: <b>lexical only (semantic_search is &#39;off&#39;)</b>" in html


def test_vault_on_a_real_loopback_uvicorn(settings):
    with served(create_app(settings, mcp=False)) as base:
        with httpx.Client(base_url=base, timeout=10) as c:
            page = c.get("/vault/browse")
            assert page.status_code == 200 and COOKIE in page.headers["set-cookie"]
            assert "served on loopback only" in page.text
            assert "HttpOnly" in page.headers["set-cookie"] and "SameSite=strict" in page.headers["set-cookie"]
            tok = token(page.text, "add")
            assert c.post("/vault/act/add", data={"note": "no token", "confirm": "yes"}).status_code == 403
            ok = c.post("/vault/act/add", data={"csrf": tok, "note": "over real HTTP", "confirm": "yes"})
            assert ok.status_code == 200 and "Added the note" in ok.text
            assert c.get("/vault/static/vault.css").headers["content-type"].startswith("text/css")
            assert c.get("/", headers={"Host": "attacker.example"}).status_code == 403
        # a form body is allowed under /vault/act/ only: dot segments (sent raw, unnormalized) do not
        # smuggle one to the RPC
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            body = b"method=summary"
            sock.sendall(
                b"POST /vault/act/../../dsh-memory/rpc HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            status_line = sock.makefile("rb").readline()
        assert status_line.split()[1] in (b"404", b"405"), status_line


def test_vault_can_be_left_out(settings):
    with TestClient(create_app(settings, mcp=False, vault=False), base_url=BASE) as c:
        assert c.get("/").status_code == 404
        assert c.post(RPC_PATH, json={"method": "summary"}).status_code == 200


@pytest.mark.parametrize(
    "source",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](//evil.example/a)",
        "[x](java\tscript:alert(1))",
        "<a href='https://evil.example'>x</a>",
        "![x](https://tracker.example/pixel.png)",
        "[x]: javascript:alert(1)\n\n[x]",
    ],
)
def test_markdown_from_memory_files_makes_no_unsafe_link_or_element(source):
    from dsh_memory.serve.vault.render import markdown

    html = str(markdown(source, "MEMORY.md"))
    assert re.search(r"<(img|script|iframe|object|embed)\b", html) is None, html
    for href in re.findall(r'href="([^"]*)"', html):  # every link left is a safe one
        assert href.startswith(("/vault/file?path=", "https://", "http://", "mailto:", "#")), html
        assert "evil.example" not in href and not href.startswith("/vault/file?path=/"), html


def test_markdown_links_inside_the_memory_open_in_the_vault():
    from dsh_memory.serve.vault.render import markdown

    html = str(markdown("[a](../MEMORY.md#releases) [b](https://docs.example/x) [c](#top)", "skills/x/SKILL.md"))
    assert 'href="/vault/file?path=skills/MEMORY.md#releases"' in html
    assert 'href="https://docs.example/x" rel="noopener noreferrer nofollow"' in html
    assert 'href="#top"' in html
    # a name with a space or a non-ASCII letter is percent-encoded once, not twice
    html = str(markdown("[d](<../my notes.md>) [e](résumé.md)", "skills/x/SKILL.md"))
    assert 'href="/vault/file?path=skills/my%20notes.md"' in html
    assert 'href="/vault/file?path=skills/x/r%C3%A9sum%C3%A9.md"' in html


@pytest.mark.parametrize("opt_out", [False, True])
def test_browser_tests_fail_without_chromium_unless_skipped_on_purpose(tmp_path, opt_out):
    """CI must not go green by silently skipping the browser: no Chromium on PATH is an error;
    only DSH_MEMORY_SKIP_BROWSER_TESTS=1 skips, and says so."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "DSH_MEMORY_SKIP_BROWSER_TESTS"}
    env["PATH"] = str(Path(sys.executable).parent)  # python, no chromium
    if opt_out:
        env["DSH_MEMORY_SKIP_BROWSER_TESTS"] = "1"
    args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
    args += ["tests/test_vault_browser.py"]
    r = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    if opt_out:
        # the whole module is skipped, with its reason (5: pytest collected nothing else in this run)
        assert r.returncode in (0, 5) and "browser tests skipped: DSH_MEMORY_SKIP_BROWSER_TESTS is set" in r.stdout
    else:
        assert r.returncode != 0 and "no Chromium found" in r.stdout, r.stdout[-2000:]


def test_overview_shows_memories_per_project(client, settings):
    """#18: the vault shows memories per scope, from the same count `status` prints."""
    from dsh_memory.readpath.health import memory_health

    rows = memory_health(MemoryStore(settings.memory_root), stale_after_days=settings.stale_after_days)["projects"]
    assert rows, "the sample memory has items"
    table = client.get("/").text.split('id="projects"', 1)[1].split("</table>", 1)[0]
    for name, row in rows.items():
        label = "global (every project)" if name == "global" else f"<code>{name}</code>"
        keys = ("handbook_items", "sessions", "pending_raw", "stale", "aged", "uses", "never_used", "left_out")
        cells = "".join(f"<td>{row[k]}</td>" for k in keys)
        assert f"<tr><td>{label}</td>{cells}</tr>" in table, table
