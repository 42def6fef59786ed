"""Flagged memory fed back into consolidation (issue 27, point 3), on a real git repository and a
real memory root: an item the working tree contradicts and no session confirmed for
`stale_after_days` is retired into MEMORY.archive.md with its reason, by the mechanical merge and
when a model leaves it out; a newer session that learns it again refreshes it instead; the model
is shown what was flagged; nothing flagged is ever dropped silently."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dsh_memory.consolidation import mechanical
from dsh_memory.consolidation.apply import apply_output
from dsh_memory.consolidation.inputs import gather_inputs
from dsh_memory.consolidation.output import ConsolidationOutput
from dsh_memory.errors import PathGuardError
from dsh_memory.readpath import list_dir, read, search
from dsh_memory.readpath.scoping import scope_of
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from dsh_memory.storage.store_format import RawBlock
from tests.git_helpers import git, make_repo

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
OLD_ITEM = "- Settings live in `conf/app.toml`."
CART_ITEM = "- `src/cart.py` defines `total` [source: new-fix]"


@pytest.fixture
def repo(tmp_path):
    return make_repo(
        tmp_path / "shop",
        {"conf/app.toml": "port = 1\n", "src/cart.py": "def total(): ...\n"},
    )


@pytest.fixture
def memory(tmp_path, repo):
    """A handbook learned in July (the settings file) and November (the cart), then the settings
    file deleted and committed."""
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    for slug, session, day in (("old-setup", "s-old", "2026-07-01"), ("new-fix", "s-new", "2026-11-20")):
        store.write_rollout_summary(
            slug,
            {"session_id": session, "source": "codex", "cwd": str(repo), "project": str(repo), "updated_at": day},
            "- recap\n",
        )
    store.atomic_write(
        "MEMORY.md",
        f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
        f"## Project facts\n{OLD_ITEM} [source: old-setup]\n{CART_ITEM}\n",
    )
    store.atomic_write("memory_summary.md", "v1\n")
    (repo / "conf" / "app.toml").unlink()
    git("commit", "-qam", "settings move to the environment", cwd=repo)
    state = StateStore(store.root)
    yield store, state, MemorySettings(memory_root=store.root)
    state.close()


def test_the_model_is_shown_what_injection_flags(memory, repo):
    store, state, settings = memory
    inputs = gather_inputs(store, state, settings, NOW)
    (item,) = inputs.flagged
    assert item.project == str(repo) and item.retire
    assert item.note == "may be stale: conf/app.toml no longer exists; learned 153 days ago"
    user = inputs.messages()[1]["content"]
    assert f"- project={repo} · RETIRE · {OLD_ITEM} [source: old-setup] · {item.note}" in user
    assert "# Stale items" in inputs.messages()[0]["content"]
    assert inputs.counts()["flagged_items"] == 1


def test_the_mechanical_merge_retires_it_into_the_archive_with_its_reason(memory, repo):
    store, state, settings = memory
    inputs = gather_inputs(store, state, settings, NOW)
    result = apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    handbook = store.read_text("MEMORY.md")
    assert "conf/app.toml" not in handbook and "`src/cart.py` defines `total`" in handbook
    assert result.items_retired == 1 and "MEMORY.archive.md" in result.files_written
    archive = store.read_text("MEMORY.archive.md")
    assert f"# Task Group: {repo}\n" in archive and "## Retired 2026-12-01\n" in archive
    assert (
        f"{OLD_ITEM} (retired: may be stale: conf/app.toml no longer exists; learned 153 days ago) [source: old-setup]"
        in archive.splitlines()
    )
    assert search(store, ["conf/app.toml"], cwd=str(repo)).matches == []  # retired: out of search, as .retired is
    assert "MEMORY.archive.md" in {e.path for e in list_dir(store, "").entries}
    text = read(store, "MEMORY.archive.md").content
    line = 1 + next(i for i, ln in enumerate(text.splitlines()) if "conf/app.toml" in ln)
    assert scope_of(store, "MEMORY.archive.md", line) == f"project {repo}"  # readable, in its project
    # a second consolidation has nothing more to archive, and keeps the record
    again = gather_inputs(store, state, settings, NOW)
    assert (
        again.flagged == []
        and apply_output(
            store, state, again, mechanical.consolidate(store, again, settings), settings, NOW
        ).items_retired
        == 0
    )
    assert store.read_text("MEMORY.archive.md") == archive


def test_a_newer_session_that_learns_it_again_refreshes_it(memory, repo):
    store, state, settings = memory
    store.append_raw(
        RawBlock(
            id="",
            session_id="s-today",
            slug="today",
            source="codex",
            cwd=str(repo),
            project=str(repo),
            updated_at="2026-11-30T10:00:00+00:00",
            body=f"## Facts\n{OLD_ITEM}\n",
        )
    )
    inputs = gather_inputs(store, state, settings, NOW)
    result = apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    lines = store.read_text("MEMORY.md").splitlines()
    stale = lines[lines.index("## Possibly stale") + 1 :]
    (kept,) = [ln for ln in stale if "conf/app.toml" in ln]  # one item, both sources: learned anew
    assert kept.startswith(OLD_ITEM + " (may be stale: conf/app.toml no longer exists)")
    assert "old-setup" in kept and "today" in kept
    assert result.items_retired == 0 and not (store.root / "MEMORY.archive.md").exists()


def test_an_archive_that_cannot_be_written_leaves_the_item_in_the_handbook(memory, repo, tmp_path):
    """MEMORY.archive.md a symlink out of the root (or any failure to write it): the handbook used
    to be written first, without the item, and then the archive refused: the item was gone."""
    store, state, settings = memory
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# not the archive\n")
    (store.root / "MEMORY.archive.md").symlink_to(outside)
    before = store.read_text("MEMORY.md")
    inputs = gather_inputs(store, state, settings, NOW)
    with pytest.raises(PathGuardError):
        apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    assert store.read_text("MEMORY.md") == before and OLD_ITEM in before
    assert outside.read_text() == "# not the archive\n"


def test_what_a_model_leaves_out_is_archived_what_it_keeps_is_not(memory, repo):
    store, state, settings = memory
    inputs = gather_inputs(store, state, settings, NOW)
    head = f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
    kept = ConsolidationOutput(
        memory_md=head
        + f"## Project facts\n{CART_ITEM}\n\n## Possibly stale\n{OLD_ITEM} (may be stale: conf/app.toml no longer exists)\n",
        memory_summary_md="v1\n",
        source="tool",
    )
    assert apply_output(store, state, inputs, kept, settings, NOW).items_retired == 0
    inputs = gather_inputs(store, state, settings, NOW)  # a new run reads the handbook just written
    left_out = ConsolidationOutput(
        memory_md=head + f"## Project facts\n- Settings come from the environment (`APP_PORT`).\n{CART_ITEM}\n",
        memory_summary_md="v1\n",
        source="tool",
    )
    assert apply_output(store, state, inputs, left_out, settings, NOW).items_retired == 1
    assert f"{OLD_ITEM} (retired: may be stale:" in store.read_text("MEMORY.archive.md")


def test_only_old_and_contradicted_is_retired(memory, repo):
    """Old alone is said, not retired; contradicted but recently learned is set aside, not retired."""
    store, state, settings = memory
    (repo / "conf" / "app.toml").write_text("port = 2\n")  # back: only old now
    inputs = gather_inputs(store, state, settings, NOW)
    assert [(f.note, f.retire) for f in inputs.flagged] == [("learned 153 days ago", False)]
    settings = MemorySettings(memory_root=store.root, stale_after_days=200)
    (repo / "conf" / "app.toml").unlink()
    inputs = gather_inputs(store, state, settings, NOW)
    assert [f.retire for f in inputs.flagged] == [False]
    apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    assert "## Possibly stale" in store.read_text("MEMORY.md")
    assert not (store.root / "MEMORY.archive.md").exists()


@pytest.mark.parametrize(
    "item, change, note",
    [
        (
            "- Checks that passed: `make lint`",
            lambda repo: (repo / "Makefile").write_text("test:\n\tpytest\ncheck:\n\truff check .\n"),
            "may be stale: `make lint` is no longer in Makefile",
        ),
        (
            "- Build the front end with `npm run build` (in `web`)",
            lambda repo: (repo / "web" / "package.json").write_text('{"scripts": {"dev": "vite"}}'),
            "may be stale: script `build` is no longer in web/package.json",
        ),
    ],
    ids=["make-target-renamed", "package-script-removed"],
)
def test_a_renamed_target_and_a_removed_script_are_retired_with_their_reason(memory, repo, item, change, note):
    store, state, settings = memory
    (repo / "Makefile").write_text("test:\n\tpytest\nlint:\n\truff check .\n")
    (repo / "web").mkdir()
    (repo / "web" / "package.json").write_text('{"scripts": {"build": "vite build", "dev": "vite"}}')
    git("add", ".", cwd=repo)
    git("commit", "-qm", "build files", cwd=repo)
    head = f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
    store.atomic_write("MEMORY.md", f"{head}## Reusable knowledge\n{item} [source: old-setup]\n")
    assert [(f.note, f.retire) for f in gather_inputs(store, state, settings, NOW).flagged] == [
        ("learned 153 days ago", False)  # old, but the tree still has it: said, not retired
    ]
    change(repo)
    git("commit", "-qam", "rename", cwd=repo)
    inputs = gather_inputs(store, state, settings, NOW)
    assert [(f.note, f.retire) for f in inputs.flagged] == [(f"{note}; learned 153 days ago", True)]
    result = apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    assert result.items_retired == 1 and item not in store.read_text("MEMORY.md")
    assert f"{item} (retired: {note}; learned 153 days ago) [source: old-setup]" in store.read_text("MEMORY.archive.md")


def test_what_the_handbook_cap_drops_is_archived_too(memory, repo):
    store, state, settings = memory
    settings = MemorySettings(memory_root=store.root, max_memory_md_chars=1200)
    store.append_raw(
        RawBlock(
            id="",
            session_id="s-many",
            slug="many",
            source="codex",
            cwd=str(repo),
            project=str(repo),
            updated_at="2026-11-30T10:00:00+00:00",
            body="## Facts\n" + "".join(f"- Module `m{i}` keeps the ledger rule number {i}.\n" for i in range(40)),
        )
    )
    inputs = gather_inputs(store, state, settings, NOW)
    result = apply_output(store, state, inputs, mechanical.consolidate(store, inputs, settings), settings, NOW)
    handbook = store.read_text("MEMORY.md")
    assert len(handbook) <= 1200
    kept = {i for i in range(40) if f"`m{i}` keeps" in handbook}
    archive = store.read_text("MEMORY.archive.md")
    capped = {
        i
        for i in range(40)
        if f"`m{i}` keeps the ledger rule number {i}. (retired: over max_memory_md_chars" in archive
    }
    assert kept and capped and kept | capped == set(range(40)) and not kept & capped  # every item somewhere
    assert result.items_retired >= len(capped)


def test_the_flagged_section_has_a_cap_and_names_what_it_leaves_out():
    from dsh_memory.consolidation.inputs import flagged_section as section
    from dsh_memory.consolidation.stale import Flagged

    items = [Flagged("/p", f"- old item number {i}", "learned 200 days ago", False) for i in range(50)]
    items.append(Flagged("/p", "- gone item", "may be stale: a/b no longer exists; learned 200 days ago", True))
    s = section(items, 500)
    assert len(s.body) <= 500 and s.body.startswith("- project=/p · RETIRE · - gone item")  # retire first
    shown = s.body.count("\n")
    assert (
        s.note
        == f"(51 items; RETIRE: contradicted and not confirmed for a long time; {51 - shown} more not shown (input cap))"
    )


def test_the_consolidate_flow_shows_an_endpoint_model_the_flagged_items_and_archives_what_it_drops(
    tmp_path, monkeypatch, repo, prefect_api
):
    """The real flow on a real Prefect server, the model answering from the fake OpenAI server."""
    from datetime import date

    from dsh_memory.flows.consolidate import consolidate_flow
    from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply

    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    store.write_rollout_summary(
        "old-setup",
        {"session_id": "s-old", "source": "codex", "cwd": str(repo), "project": str(repo), "updated_at": "2026-07-01"},
        "- recap\n",
    )
    head = f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
    store.atomic_write("MEMORY.md", f"{head}## Project facts\n{OLD_ITEM} [source: old-setup]\n")
    store.atomic_write("memory_summary.md", "v1\n")
    store.append_raw(
        RawBlock(
            id="",
            session_id="s2",
            slug="env",
            source="codex",
            cwd=str(repo),
            project=str(repo),
            updated_at=NOW.isoformat(),
            body="## Facts\n- The port comes from `APP_PORT`.\n",
        )
    )
    (repo / "conf" / "app.toml").unlink()
    days = (datetime.now(UTC).date() - date(2026, 7, 1)).days
    with FakeOpenAIServer() as fake:
        monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake.base_url)
        monkeypatch.setenv("DSH_MEMORY_API_KEY", "test")
        monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
        monkeypatch.setenv("DSH_MEMORY_ROOT", str(store.root))
        fake.script(
            Reply.tool(
                {
                    "memory_md": f"{head}## Project facts\n- The port comes from `APP_PORT`.\n",
                    "memory_summary_md": "v1\n",
                }
            )
        )
        result = consolidate_flow(force=True)
        user = fake.requests[0]["messages"][1]["content"]
    assert result.outcome == "consolidated", result
    note = f"may be stale: conf/app.toml no longer exists; learned {days} days ago"
    assert f"- project={repo} · RETIRE · {OLD_ITEM} [source: old-setup] · {note}" in user
    assert result.inputs["flagged_items"] == 1 and result.changes.items_retired == 1
    assert f"{OLD_ITEM} (retired: {note}) [source: old-setup]" in store.read_text("MEMORY.archive.md")
