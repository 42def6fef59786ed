"""`dsh-memory import`: Claude Code auto memory and Codex memories, laid out as those tools write
them in a temporary home, become scoped, redacted notes with their provenance; idempotent by
sha256; the sources untouched; an excluded project never read; Phase 2 puts each in its
project; the vault lists what was imported."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dsh_memory.cli import app
from dsh_memory.imports.sources import MAX_FILES, MAX_NOTE_CHARS
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.store import MemoryStore
from dsh_memory.storage.store_format import parse_front_matter
from dsh_memory.testing.sessions import PLANTED_SECRET

NEEDLE = "Quetzal-payroll-8812"  # only in the excluded project's memory


def _repo(path: Path) -> str:
    path.mkdir(parents=True)
    (path / ".git").mkdir()
    return str(path)


def _dashed(path: str) -> str:  # as Claude Code names a project's folder: `/[^a-zA-Z0-9]/g` → `-`
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in path)


def _layout(tmp_path: Path) -> dict:
    webapp = _repo(tmp_path / "src" / "webapp")
    secret = _repo(tmp_path / "src" / "secret")
    claude = tmp_path / "claude"
    mem = claude / "projects" / _dashed(webapp) / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("# Memory index\n\n- [Testing](testing.md): pnpm only, run the tests first\n")
    (mem / "testing.md").write_text(
        "---\nname: testing\ndescription: how this repo is tested\nmetadata:\n  type: feedback\n---\n"
        f"- Use pnpm, not npm.\n- Run `pnpm test` before pushing (token {PLANTED_SECRET}).\n"
    )
    hidden = claude / "projects" / _dashed(secret) / "memory"
    hidden.mkdir(parents=True)
    (hidden / "MEMORY.md").write_text(f"- The payroll key is {NEEDLE}.\n")
    gone = claude / "projects" / _dashed(str(tmp_path / "moved" / "away")) / "memory"
    gone.mkdir(parents=True)
    (gone / "notes.md").write_text("- Something about a repository that no longer exists.\n")
    codex = tmp_path / "codex" / "memories"
    (codex / "rollout_summaries").mkdir(parents=True)
    (codex / "MEMORY.md").write_text(
        f"# Task Group: webapp\nscope: project\napplies_to: cwd={webapp}; reuse_rule=this project only\n"
        "- Migrations run with `pnpm db:migrate`.\n\n"
        "# Task Group: global\nscope: global\napplies_to: cwd=.*; reuse_rule=everywhere\n- Answer tersely.\n\n"
        f"# Task Group: payroll\nscope: project\napplies_to: cwd={secret}; reuse_rule=this project only\n"
        f"- {NEEDLE} rotates monthly.\n\n"
        f"# Task Group: deploy with {PLANTED_SECRET}\n- Deploys use the token.\n"
    )
    (codex / "memory_summary.md").write_text("## User profile\n- Prefers small commits.\n")
    (codex / "rollout_summaries" / "2026-11-02-webapp-login.md").write_text(
        f"thread_id: 019a\ncwd: {webapp}\n\n# Login fix\n- The login test needs `pnpm build` first.\n"
    )
    return {"webapp": webapp, "secret": secret, "claude": claude, "codex": tmp_path / "codex", "topic": mem}


def _env(monkeypatch, tmp_path: Path, lay: dict) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(lay["claude"]))
    monkeypatch.setenv("CODEX_HOME", str(lay["codex"]))
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(tmp_path / "memories"))
    monkeypatch.setenv("DSH_MEMORY_EXCLUDE_PROJECTS", lay["secret"])
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    return tmp_path / "memories"


def _import(*args: str) -> dict:
    out = CliRunner().invoke(app, ["import", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def _snapshot(*folders: Path) -> dict:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for f in folders for p in f.rglob("*") if p.is_file()}


def test_import_is_scoped_redacted_idempotent_and_leaves_the_sources_alone(monkeypatch, tmp_path):
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    before = _snapshot(lay["claude"], lay["codex"])
    dry = _import("all", "--dry-run")
    assert dry["dry_run"] and not root.exists()  # "write nothing": not even the root, nor a lock in it
    first = _import("all")["rows"]
    rows = {(Path(r["source"]).parent.parent.name, Path(r["source"]).name, r["part"]): r for r in first}
    rows = {k[1:]: r for k, r in rows.items() if lay["secret"].rsplit("/", 1)[-1] not in k[0]}
    assert [r["action"] for r in first] == [r["action"] for r in dry["rows"]]
    topic = rows[("testing.md", None)]
    assert topic["action"] == "import" and topic["project"] == lay["webapp"] and topic["kind"] == "feedback"
    assert rows[("MEMORY.md", "webapp")]["project"] == lay["webapp"]
    assert rows[("MEMORY.md", "global")]["project"] is None and rows[("memory_summary.md", None)]["project"] is None
    assert rows[("2026-11-02-webapp-login.md", None)]["project"] == lay["webapp"]
    assert rows[("MEMORY.md", "payroll")]["action"] == "skip" and "excluded" in rows[("MEMORY.md", "payroll")]["reason"]
    skipped = [r for r in first if r["action"] == "skip"]
    assert any("no single existing path" in r["reason"] for r in skipped)  # the moved repository
    assert any("excluded" in r["reason"] and "claude" == r["agent"] for r in skipped)
    # Provenance, redaction, nothing of the excluded project.
    store = MemoryStore(root)
    fields, body = parse_front_matter(store.read_text(topic["note"]))
    source = lay["topic"] / "testing.md"
    assert fields["agent"] == "claude" and fields["source"] == str(source) and fields["project"] == lay["webapp"]
    assert fields["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest() and fields["mtime"]
    assert "Use pnpm, not npm." in body and PLANTED_SECRET not in body
    assert not any(NEEDLE.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert not any(PLANTED_SECRET.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert PLANTED_SECRET not in json.dumps(first)  # nor in what import prints (a task group's name)
    assert _snapshot(lay["claude"], lay["codex"]) == before, "the sources are never modified"
    # Idempotent; a changed file is imported again as the next version.
    assert {r["action"] for r in _import("all")["rows"]} == {"unchanged", "skip"}
    source.write_text(source.read_text() + "- Node 22 only.\n")
    again = {(Path(r["source"]).name, r["part"]): r for r in _import("claude")["rows"]}
    changed = again[("testing.md", None)]
    assert changed["action"] == "update" and changed["version"] == 2
    assert parse_front_matter(store.read_text(changed["note"]))[0]["supersedes"] == topic["note"]
    notes = store.list_notes()  # the replaced version waits no more: it is archived
    assert len(notes) == len([r for r in first if r["action"] == "import"]) and topic["note"] not in notes
    assert (root / "extensions" / "ad_hoc" / "archive" / Path(topic["note"]).name).is_file()


def test_a_secret_or_a_private_span_in_what_names_a_piece_stays_out_of_the_output_and_the_notes(monkeypatch, tmp_path):
    """What identifies a piece (its file's name, its `name:` and `type:`, its task group's name,
    its recap's `cwd:`) is printed, kept in .state/imports.json and in the note's front matter:
    redacted there, and without its private spans, as the note's text."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    topic = f"---\ntype: {PLANTED_SECRET}\nname: <private>{NEEDLE}</private> notes\n---\n- A rule.\n"
    (lay["topic"] / f"{PLANTED_SECRET}.md").write_text(topic)
    recap = lay["codex"] / "memories" / "rollout_summaries" / "2026-11-03-elsewhere.md"
    recap.write_text(f"cwd: /home/{PLANTED_SECRET}/app\n- A recap.\n")
    with open(lay["codex"] / "memories" / "MEMORY.md", "a") as fh:
        fh.write(f"\n# Task Group: <private>{NEEDLE}</private> deal\nscope: global\n- Keep it short.\n")
    out = CliRunner().invoke(app, ["import", "all", "--json"])
    assert out.exit_code == 0 and PLANTED_SECRET not in out.output and "[REDACTED:" in out.output, out.output
    assert NEEDLE not in out.output and "deal" in out.output, out.output
    for needle in (PLANTED_SECRET, NEEDLE):
        assert not any(needle.encode() in p.read_bytes() for p in root.rglob("*") if p.is_file()), needle
    assert {r["action"] for r in _import("all")["rows"]} == {"unchanged", "skip"}  # still idempotent
    assert {r["action"] for r in _import("all")["rows"]} == {"unchanged", "skip"}  # still idempotent


def test_a_repository_under_a_non_ascii_path_is_found_through_its_transcripts(monkeypatch, tmp_path):
    """Claude Code names a project's folder with every character but an ASCII letter or digit as
    `-` (`/home/josé/app` → `-home-jos--app`): the folder was checked against the cwd its
    transcripts name with Python's `isalnum`, which keeps `é`, so it never fit and the project's
    memory was skipped ("cannot tell which repository")."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    repo = _repo(tmp_path / "src" / "café")
    folder = lay["claude"] / "projects" / _dashed(repo)
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text("- Use uv, not pip.\n")
    (folder / "0b1f.jsonl").write_text(json.dumps({"type": "user", "cwd": repo, "sessionId": "0b1f"}) + "\n")
    rows = [r for r in _import("claude")["rows"] if Path(r["source"]).parent.parent == folder]
    assert [(r["action"], r["project"]) for r in rows] == [("import", repo)], rows


def test_two_codex_task_groups_of_one_name_are_two_pieces(monkeypatch, tmp_path):
    """A task group's name is its key in .state/imports.json: two groups of one name (one per
    repository) were one piece, each run importing one as a newer version of the other, whose
    note (not consolidated yet) went to the archive. Each is its own piece, imported once."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    other = _repo(tmp_path / "src" / "other")
    with open(lay["codex"] / "memories" / "MEMORY.md", "a") as fh:
        fh.write(f"\n# Task Group: webapp\nscope: project\napplies_to: cwd={other}; reuse_rule=x\n- Use vitest.\n")
    first = [r for r in _import("codex")["rows"] if r["part"] and r["part"].startswith("webapp")]
    assert [(r["action"], r["project"]) for r in first] == [("import", lay["webapp"]), ("import", other)], first
    assert {r["action"] for r in _import("codex")["rows"]} == {"unchanged", "skip"}
    notes = "".join(MemoryStore(root).read_text(n) for n in MemoryStore(root).list_notes())
    assert "pnpm db:migrate" in notes and "Use vitest." in notes


def _rows(result: dict) -> dict:
    return {(Path(r["source"]).name, r["part"]): r for r in result["rows"]}


def test_a_secret_where_a_long_note_is_cut_is_not_kept_in_part(monkeypatch, tmp_path):
    """A note keeps MAX_NOTE_CHARS of its source, cut at a line's end, or mid-line when its
    first line is longer: a token there was cut before it was redacted, and its first characters,
    no longer a token's shape, were written to the note."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    line = "word " * (MAX_NOTE_CHARS // 5) + "x" * (MAX_NOTE_CHARS % 5)
    (lay["topic"] / "long-line.md").write_text(line[:-16] + f" {PLANTED_SECRET} and more words\n")
    note = MemoryStore(root).read_text(_rows(_import("claude"))[("long-line.md", None)]["note"])
    assert "[… cut: the rest is in" in note and PLANTED_SECRET[:12] not in note, note[-200:]
    # … and a recap's `cwd:` is read as written: a long recap of an excluded project stays out
    secrets = _repo(tmp_path / "secrets" / "k8s-prod-a8F9dK2mQ7xZ4pL1vB6n")  # redacted as a secret in text
    monkeypatch.setenv("DSH_MEMORY_EXCLUDE_PROJECTS", secrets)
    recap = lay["codex"] / "memories" / "rollout_summaries" / "2026-11-04-secrets.md"
    recap.write_text(f"cwd: {secrets}\n\n" + f"- {NEEDLE} rotates monthly.\n" * 500)
    rows = _rows(_import("codex"))
    assert rows[(recap.name, None)]["reason"] == "excluded (exclude_projects)", rows[(recap.name, None)]


def test_a_secret_where_a_name_or_description_is_cut_is_not_kept_in_part(monkeypatch, tmp_path):
    """A topic's `name` and `description` and a task group's name are kept on one line of at most
    120 or 300 characters: cut before they were redacted, a token there kept its first characters
    in the note, .state/imports.json and the output."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    said = {n: "word " * (n // 5 - 4) + PLANTED_SECRET for n in (120, 300)}
    (lay["topic"] / "named.md").write_text(f"---\nname: {said[120]}\ndescription: {said[300]}\n---\n- A rule.\n")
    with open(lay["codex"] / "memories" / "MEMORY.md", "a") as fh:
        fh.write(f"\n# Task Group: {said[120]}\nscope: global\n- Keep it short.\n")
    out = CliRunner().invoke(app, ["import", "all", "--json"])
    assert out.exit_code == 0 and PLANTED_SECRET[:12] not in out.output, out.output
    assert not any(PLANTED_SECRET[:12].encode() in p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_a_piece_that_says_nothing_is_skipped_as_empty_not_imported(monkeypatch, tmp_path):
    """An empty or blank file, a topic of front matter alone, one all private: each became a note
    of its heading alone ("Codex memory (summary)"), handed to the next consolidation as evidence.
    Each is skipped as empty; a topic whose front matter describes it still says something."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    (lay["topic"] / "bare.md").write_text("---\nname: bare\ntype: user\n---\n\n")
    (lay["topic"] / "described.md").write_text("---\nname: described\ndescription: prefers pnpm\n---\n")
    memories = lay["codex"] / "memories"
    (memories / "memory_summary.md").write_text("")
    (memories / "rollout_summaries" / "blank.md").write_text("\n  \n\n")
    (memories / "rollout_summaries" / "hidden.md").write_text(f"<private>{NEEDLE}</private>\n")
    rows = _rows(_import("all"))
    for name in ("bare.md", "memory_summary.md", "blank.md", "hidden.md"):
        assert (rows[(name, None)]["action"], rows[(name, None)]["reason"]) == ("skip", "empty"), rows[(name, None)]
    assert rows[("described.md", None)]["action"] == "import"
    store = MemoryStore(root)
    notes = [parse_front_matter(store.read_text(n))[0]["source"] for n in store.list_notes()]
    assert not [n for n in notes if Path(n).name in ("bare.md", "memory_summary.md", "blank.md", "hidden.md")], notes


def test_bad_input_is_one_line_and_bounded(monkeypatch, tmp_path):
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    (lay["topic"] / "huge.md").write_bytes(b"- x\n" * (300 * 1024))  # 1.2 MiB
    rows = _rows(_import("claude"))
    assert rows[("huge.md", None)]["action"] == "skip" and "larger than" in rows[("huge.md", None)]["reason"]
    out = CliRunner().invoke(app, ["import", "everything"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    (root / ".state" / "imports.json").write_text("{not json")
    out = CliRunner().invoke(app, ["import", "claude"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1 and "imports.json" in out.output
    # a FIFO in the manifest's or the journal's place is refused at once, never waited on
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for name in ("imports.json", "imports.json.journal"):
        (root / ".state" / "imports.json").unlink()
        os.mkfifo(root / ".state" / name)
        argv = [sys.executable, "-m", "dsh_memory.cli", "import", "claude"]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and name in done.stderr, done.stderr
        (root / ".state" / name).unlink()
        (root / ".state" / "imports.json").write_text("{}")
    # a manifest edited by hand (wrong types) never ends the import in a traceback
    (root / ".state" / "imports.json").unlink()
    manifest = {
        r["agent"] + ":" + r["source"]: {"sha256": "old", "version": v}
        for r, v in zip(
            [r for r in _import("claude")["rows"] if r["action"] == "import"], ("two", [1], None, True), strict=False
        )
    }
    (root / ".state" / "imports.json").write_text(json.dumps(manifest))
    again = [r for r in _import("claude")["rows"] if r["action"] != "skip"]
    assert len(again) == len(manifest) and {(r["action"], r["version"]) for r in again} == {("update", 2)}
    # a billion laughs: 400 bytes of YAML aliases in a topic's front matter, 9**9 words as text
    laughs = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, c in zip("abcdefgh", "bcdefghi", strict=True):
        laughs.append(f"{c}: &{c} [{','.join(['*' + prev] * 9)}]")
    (lay["topic"] / "laughs.md").write_text("\n".join([*laughs, "name: *i", "metadata:", "  type: *i", "---", "x"]))
    laughing = _rows(_import("claude", "--dry-run"))[("laughs.md", None)]
    assert laughing["action"] == "import" and laughing["kind"] == "topic"
    # front matter nested deeper than the YAML parser can recurse is no front matter, not a traceback
    (lay["topic"] / "deep.md").write_text("---\nname: " + "[" * 3000 + "]" * 3000 + "\n---\n- a rule\n")
    (lay["topic"] / "dated.md").write_text("---\nname: dated\ncreated: 2024-02-30\ntype: user\n---\n- a rule\n")
    (lay["topic"] / "long.md").write_text("---\nname: " + "1" * 5000 + "\n---\n- a rule\n")  # over int()'s digits
    rows = _rows(_import("claude", "--dry-run"))
    for name in ("deep.md", "dated.md", "long.md"):
        assert rows[(name, None)]["action"] == "import" and rows[(name, None)]["kind"] == "topic", rows[(name, None)]
    # a file opening with a rule (`---`) round text that is no YAML mapping keeps that text
    (lay["topic"] / "ruled.md").write_text("---\n- Use yarn 4 here.\n---\n- And pin it.\n")
    ruled = _rows(_import("claude"))[("ruled.md", None)]
    assert "- Use yarn 4 here." in MemoryStore(root).read_text(ruled["note"])
    # a 1 MiB Codex handbook of tiny task groups is bounded like a folder of files
    groups = "".join(f"# Task Group: g{i}\n- rule {i}\n" for i in range(MAX_FILES + 1000))
    (lay["codex"] / "memories" / "MEMORY.md").write_text(groups)
    rows = _import("codex", "--dry-run")["rows"]  # … and says so: the first one past the cap is a skip
    assert len(rows) == MAX_FILES + 1 and all(r["action"] == "import" for r in rows[:MAX_FILES])
    assert rows[-1]["action"] == "skip" and "left out" in rows[-1]["reason"], rows[-1]
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "nowhere"))
    (root / ".state" / "imports.json").unlink()
    assert _import("claude")["rows"] == []  # nothing there: nothing to import, no error


# `dsh-memory import` in a process that dies (SIGKILL) before writing its fourth note.
DIE_AT_THE_FOURTH_NOTE = r"""
import os, signal, sys
from dsh_memory.storage.store import MemoryStore

real_add, written = MemoryStore.add_note, []

def add_or_die(self, *args, **kwargs):
    if len(written) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    written.append(real_add(self, *args, **kwargs))
    return written[-1]

MemoryStore.add_note = add_or_die
from dsh_memory.cli import main
sys.argv = ["dsh-memory", "import", "all"]
main()
"""


def test_an_import_killed_half_way_imports_nothing_twice(monkeypatch, tmp_path):
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    died = subprocess.run([sys.executable, "-c", DIE_AT_THE_FOURTH_NOTE], env=env, capture_output=True, check=False)
    assert died.returncode == -signal.SIGKILL and len(MemoryStore(root).list_notes()) == 3
    rows = _import("all")["rows"]
    store = MemoryStore(root)
    sources = [
        tuple(parse_front_matter(store.read_text(n))[0].get(k) for k in ("source", "part")) for n in store.list_notes()
    ]
    assert len(sources) == len(set(sources)) == len([r for r in rows if r["action"] != "skip"]), sources
    assert [r["action"] for r in rows].count("unchanged") == 3
    assert not (root / ".state" / "imports.json.journal").exists()
    assert {r["action"] for r in _import("all")["rows"]} == {"unchanged", "skip"}


def test_a_torn_journal_line_costs_no_later_entry(monkeypatch, tmp_path):
    """A journal line cut short (a full disk, a crash mid-write) has no newline: the next import's
    first entry was appended to it, unreadable, and killed too, its note was imported again."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    (root / ".state").mkdir(parents=True)
    (root / ".state" / "imports.json.journal").write_text('{"claude:/gone.md": {"sha256": "ab')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    died = subprocess.run([sys.executable, "-c", DIE_AT_THE_FOURTH_NOTE], env=env, capture_output=True, check=False)
    assert died.returncode == -signal.SIGKILL and len(MemoryStore(root).list_notes()) == 3
    assert [r["action"] for r in _import("all")["rows"]].count("unchanged") == 3
    store = MemoryStore(root)
    sources = [
        tuple(parse_front_matter(store.read_text(n))[0].get(k) for k in ("source", "part")) for n in store.list_notes()
    ]
    assert len(sources) == len(set(sources)), sources


def test_an_unchanged_piece_archives_only_another_version_than_its_own(monkeypatch, tmp_path):
    """An unchanged piece archives the version it superseded if that still waits (an import killed
    before doing it); a manifest edited by hand so a note supersedes itself keeps that note."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    _import("claude")
    path = root / ".state" / "imports.json"
    manifest = json.loads(path.read_text())
    for entry in manifest.values():
        entry["supersedes"] = entry["note"]
    path.write_text(json.dumps(manifest))
    before = MemoryStore(root).list_notes()
    assert {r["action"] for r in _import("claude")["rows"]} == {"unchanged", "skip"}
    assert MemoryStore(root).list_notes() == before


# `dsh-memory import` in a process that dies (SIGKILL) as it archives the version a changed file replaces.
DIE_ARCHIVING = r"""
import os, signal, sys
from dsh_memory.storage.store import MemoryStore

MemoryStore.archive_notes = lambda self, rels: os.kill(os.getpid(), signal.SIGKILL)
from dsh_memory.cli import main
sys.argv = ["dsh-memory", "import", "claude"]
main()
"""


def test_an_import_killed_archiving_a_replaced_version_writes_the_new_one_once(monkeypatch, tmp_path):
    """A changed file's new version was written, then the version it replaces archived, then the
    new one recorded in the journal: killed in between, the next import wrote it a second time.
    Recorded first, the next import finds it unchanged and archives the version it replaces."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    _import("claude")
    source = lay["topic"] / "testing.md"
    source.write_text(source.read_text() + "- Node 22 only.\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    died = subprocess.run([sys.executable, "-c", DIE_ARCHIVING], env=env, capture_output=True, check=False)
    assert died.returncode == -signal.SIGKILL, died.stderr
    again = _rows(_import("claude"))[("testing.md", None)]
    assert (again["action"], again["version"]) == ("unchanged", 2), again
    store = MemoryStore(root)
    waiting = [n for n in store.list_notes() if "Use pnpm, not npm." in store.read_text(n)]
    assert waiting == [again["note"]]  # the new version once, the old archived
    fields, body = parse_front_matter(store.read_text(again["note"]))
    assert "Node 22 only." in body and fields["supersedes"] != again["note"]  # a name of its own
    assert (root / "extensions" / "ad_hoc" / "archive" / Path(fields["supersedes"]).name).is_file()


def test_the_vault_lists_what_was_imported(monkeypatch, tmp_path):
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    _import("codex")
    from dsh_memory.serve.http_app import create_app

    with TestClient(create_app(MemorySettings.from_env(), mcp=False), base_url="http://127.0.0.1:8765") as c:
        table = c.get("/").text.split('id="imported"', 1)[1].split("</table>", 1)[0]
    assert "2026-11-02-webapp-login.md" in table and f"<code>{lay['webapp']}</code>" in table
    assert root.is_dir()


@pytest.mark.usefixtures("prefect_api")
def test_phase2_puts_imported_memory_in_its_project(monkeypatch, tmp_path):
    """The local mechanical merge: a project's imported items go to its task group, global ones
    to `global`."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    _import("all")
    for var in ("DSH_MEMORY_API_KEY", "DEEPSEEK_API_KEY", "DSH_MEMORY_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DSH_MEMORY_PROVIDER", "local")
    from dsh_memory.llm import model_files
    from dsh_memory.testing.models import SMOLLM2_135M

    monkeypatch.setenv("DSH_MEMORY_MODEL_PATH", str(model_files.bundled_model_path(SMOLLM2_135M)))
    from dsh_memory.flows.consolidate import consolidate_flow

    result = consolidate_flow(force=True)
    assert result.outcome == "consolidated", result
    from dsh_memory.scope import handbook_groups

    lines = (root / "MEMORY.md").read_text().splitlines()
    starts = handbook_groups(lines) + [(len(lines), None)]
    where = {}
    for (start, project), (end, _) in zip(starts, starts[1:], strict=False):
        for line in lines[start:end]:
            where[line.split(" [source:", 1)[0]] = project
    assert where["- Use pnpm, not npm."] == lay["webapp"]
    assert where["- Migrations run with `pnpm db:migrate`."] == lay["webapp"]
    assert where["- Answer tersely."] is None
    assert "[REDACTED:" in "\n".join(lines) and PLANTED_SECRET not in "\n".join(lines)


def test_codex_recaps_are_read_newest_first_so_a_cap_leaves_out_the_oldest(monkeypatch, tmp_path):
    """An import reads MAX_FILES recaps at most, and unchanged ones count toward that on every run:
    read by name, recaps named by date lost the newest for good. They are read newest first."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    recaps = lay["codex"] / "memories" / "rollout_summaries"
    for n, name in enumerate(("2026-01-old.md", "2026-06-mid.md", "2026-11-new.md")):
        (recaps / name).write_text(f"cwd: {lay['webapp']}\n\n# Recap {n}\n- Lesson {n}: run `pnpm build` first.\n")
        os.utime(recaps / name, (1_700_000_000 + n * 1000, 1_700_000_000 + n * 1000))
    os.utime(recaps / "2026-11-02-webapp-login.md", (1_600_000_000, 1_600_000_000))
    rows = [r for r in _import("codex", "--dry-run")["rows"] if r["kind"] == "rollout_summary"]
    assert [Path(r["source"]).name for r in rows] == [
        "2026-11-new.md",
        "2026-06-mid.md",
        "2026-01-old.md",
        "2026-11-02-webapp-login.md",
    ]


def test_changed_files_cost_one_listing_of_the_notes_not_one_each(monkeypatch, tmp_path):
    """Each changed piece listed the notes folder again to see whether the version it replaces was
    still waiting: 4,000 changed files took 4 minutes (12 s to import them first). The folder is
    listed once per import (counted here, the real listing running: no wall-clock bound)."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    for i in range(20):
        (lay["topic"] / f"topic-{i:02d}.md").write_text(f"- Rule {i}.\n")
    _import("claude")
    for i in range(20):
        (lay["topic"] / f"topic-{i:02d}.md").write_text(f"- Rule {i}, changed.\n")
    listings, real = [], MemoryStore.list_notes
    monkeypatch.setattr(MemoryStore, "list_notes", lambda self, *a, **k: listings.append(1) or real(self, *a, **k))
    rows = _rows(_import("claude"))
    assert [rows[(f"topic-{i:02d}.md", None)]["action"] for i in range(20)] == ["update"] * 20
    assert len(listings) == 1, len(listings)
    store = MemoryStore(root)
    waiting = "".join(store.read_text(n) for n in real(store))
    assert "changed" in waiting and "- Rule 3.\n" not in waiting  # each replaced version archived


def test_a_binary_file_named_md_is_skipped_with_why_and_the_rest_imported(monkeypatch, tmp_path):
    """A picture or a Latin-1 file named `.md` was imported as a note of replacement characters
    (and handed to the next consolidation as evidence); each is skipped, saying why."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    (lay["topic"] / "logo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR- a rule\n")
    (lay["topic"] / "latin.md").write_bytes(b"- caf\xe9 rule\n")
    (lay["codex"] / "memories" / "rollout_summaries" / "nul.md").write_bytes(b"cwd: /x\n\n- a\x00rule\n")
    rows = _rows(_import("all"))
    assert (rows[("logo.md", None)]["action"], rows[("logo.md", None)]["reason"]) == ("skip", "binary (NUL bytes)")
    assert (rows[("nul.md", None)]["action"], rows[("nul.md", None)]["reason"]) == ("skip", "binary (NUL bytes)")
    assert rows[("latin.md", None)]["action"] == "skip" and rows[("latin.md", None)]["reason"].startswith("not UTF-8")
    assert rows[("testing.md", None)]["action"] == "import" and rows[("MEMORY.md", "webapp")]["action"] == "import"


def test_a_file_whose_name_is_no_utf8_is_imported_once(monkeypatch, tmp_path):
    """A file name with a byte that is no UTF-8 (decoded as a lone surrogate) ended every import in
    a UnicodeEncodeError at its journal line, after its note was written: each run wrote that note
    again. Its name is kept with the byte as `\\xff`, in the output, the manifest and the note."""
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    with open(os.fsencode(lay["topic"]) + b"/caf\xe9.md", "wb") as fh:
        fh.write(b"- Use the cafe rule.\n")
    rows = _rows(_import("claude"))
    odd = rows[("caf\\xe9.md", None)]
    assert odd["action"] == "import" and odd["source"].endswith("/caf\\xe9.md"), odd
    assert parse_front_matter(MemoryStore(root).read_text(odd["note"]))[0]["source"] == odd["source"]
    assert {r["action"] for r in _import("claude")["rows"]} == {"unchanged", "skip"}
    notes = [n for n in MemoryStore(root).list_notes() if "cafe rule" in MemoryStore(root).read_text(n)]
    assert notes == [odd["note"]]


def test_a_memory_folder_that_is_a_symlink_is_listed_as_skipped_not_ignored(monkeypatch, tmp_path):
    """A symlinked memory folder (dotfiles kept elsewhere) is never followed, as a symlinked file is
    not; it was left out silently ("imported 0 new …, 0 skipped"), as though there were nothing."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    memories = lay["codex"] / "memories"
    memories.rename(tmp_path / "dotfiles-codex")
    memories.symlink_to(tmp_path / "dotfiles-codex")
    lay["topic"].rename(tmp_path / "dotfiles-claude")
    lay["topic"].symlink_to(tmp_path / "dotfiles-claude")
    rows = _rows(_import("all"))
    for name in ("memories", "memory"):
        assert rows[(name, None)]["action"] == "skip" and "symlink" in rows[(name, None)]["reason"], rows
    assert {r["action"] for r in rows.values()} == {"skip"}


def test_a_folder_that_cannot_be_read_is_skipped_saying_so_and_the_rest_imported(monkeypatch, tmp_path):
    """One memory folder the user may not read (mode 000: another user's, a container's) ended the
    whole import in `error: Permission denied`, nothing of the other folders imported. It is one
    skipped row naming it and why, the summary counts it, the rest is imported. As root (which
    reads a mode-000 folder) the import runs without the capabilities that let it."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    argv = [sys.executable, "-m", "dsh_memory.cli", "import", "all"]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root reads a mode-000 folder, and setpriv (util-linux) to drop that is missing")
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    closed = [lay["topic"], lay["codex"] / "memories" / "rollout_summaries"]
    for folder in closed:
        folder.chmod(0)
    try:
        done = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=60, check=False)
        said = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        for folder in closed:
            folder.chmod(0o755)
    assert done.returncode == 0 and said.returncode == 0, done.stdout + done.stderr
    rows = _rows(json.loads(done.stdout))
    for folder in closed:
        assert (rows[(folder.name, None)]["action"], rows[(folder.name, None)]["reason"]) == (
            "skip",
            "cannot read: Permission denied",
        )
        assert f"  skip      {folder} (global): cannot read: Permission denied" in said.stdout.splitlines()
    assert rows[("MEMORY.md", "webapp")]["action"] == rows[("memory_summary.md", None)]["action"] == "import"
    assert said.stdout.splitlines()[-1].endswith(" skipped (2 could not be read)"), said.stdout


def test_a_file_swapped_for_a_symlink_after_its_check_is_not_followed(monkeypatch, tmp_path):
    """The reader checked a file with lstat and then opened it by its path: a symlink put in its
    place between the two (here: as the check returns) was followed, importing what it points at."""
    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    outside = tmp_path / "outside.md"
    outside.write_text(f"- {NEEDLE} is the vault password.\n")
    victim = lay["topic"] / "testing.md"
    real_lstat, real_open, swapped = os.lstat, os.open, []

    def swap(path) -> None:
        if os.fspath(path) == str(victim) and not swapped:
            swapped.append(victim)
            victim.unlink()
            victim.symlink_to(outside)

    def lstat_then_swap(path, *args, **kwargs):  # the check sees the file, the open a link
        st = real_lstat(path, *args, **kwargs)
        swap(path)
        return st

    def swap_then_open(path, *args, **kwargs):  # a reader without that check: the link is there
        swap(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    monkeypatch.setattr(os, "open", swap_then_open)
    rows = _rows(_import("claude"))
    assert swapped and rows[("testing.md", None)]["action"] == "skip", rows[("testing.md", None)]
    assert rows[("testing.md", None)]["reason"] == "not a regular file"
    assert not any(NEEDLE.encode() in p.read_bytes() for p in (tmp_path / "memories").rglob("*") if p.is_file())


def test_a_long_import_says_how_far_it_got_on_stderr_and_json_stays_clean(monkeypatch, tmp_path):
    """An import of thousands of files said nothing until it ended; off a terminal it now says
    how many pieces it has been through every IMPORT_EVERY, and at the end, on stderr only."""
    from dsh_memory.cli._progress import IMPORT_EVERY

    lay = _layout(tmp_path)
    _env(monkeypatch, tmp_path, lay)
    for i in range(2 * IMPORT_EVERY):
        (lay["topic"] / f"topic-{i:04d}.md").write_text(f"- Rule {i}: run the tests first.\n")
    out = CliRunner().invoke(app, ["import", "claude", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["rows"]  # stdout is the JSON alone
    lines = out.stderr.splitlines()
    assert lines[:2] == [f"dsh-memory: import: {n * IMPORT_EVERY:,} pieces" for n in (1, 2)], lines
    assert lines[2:] == [f"dsh-memory: import: {len(rows):,} pieces, done"], lines
