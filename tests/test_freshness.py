"""Memory that knows when it may be stale (issue 27): at injection, a project's lines are checked
against its working tree (a real git repository): a cited file deleted, a make target renamed, a
package.json script removed, seen from the repository and from a worktree of it. And what does
not fit the budget is named in the injected block, never left out silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dsh_memory.readpath import summary
from dsh_memory.readpath.freshness import stale_reasons
from dsh_memory.storage.store import MemoryStore
from tests.git_helpers import git, make_repo

CAP = 6000


@pytest.fixture
def repo(tmp_path):
    return make_repo(
        tmp_path / "shop",
        {
            "conf/app.toml": "port = 1\n",
            "src/cart.py": "def total(): ...\n",
            "Makefile": "test:\n\tpytest\nlint fmt:\n\truff check .\nPY := python\n",
            "web/package.json": json.dumps({"scripts": {"build": "vite build", "lint": "biome"}}),
        },
    )


def _memory(tmp_path, root, project_lines: list[str]) -> MemoryStore:
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    body = "\n".join(project_lines)
    store.atomic_write(
        "memory_summary.md",
        "v1\n\n# Scope: global\n## User preferences\n- Keep `conf/app.toml` out of commits everywhere.\n\n"
        f"# Scope: project {root}\n## Build and test\n{body}\n",
    )
    return store


LINES = [
    "- Settings live in `conf/app.toml`.",
    "- Checks that passed: `make test`, `make lint`",
    "- Checks that passed: `bun run build` (in `web`)",
    "- `src/cart.py` defines `total`",
    "- Use `.entire/<id>/state.json` and `~/.cursor/skills` as documented.",
]


def test_nothing_is_flagged_while_the_tree_still_has_what_memory_cites(tmp_path, repo):
    s = summary(_memory(tmp_path, repo, LINES), CAP, cwd=str(repo))
    assert s.stale == 0 and "may be stale" not in s.content


def test_a_deleted_file_a_renamed_target_and_a_removed_script_are_flagged(tmp_path, repo):
    store = _memory(tmp_path, repo, LINES)
    (repo / "conf" / "app.toml").unlink()
    (repo / "Makefile").write_text("test:\n\tpytest\ncheck:\n\truff check .\n")
    (repo / "web" / "package.json").write_text(json.dumps({"scripts": {"lint": "biome"}}))
    git("commit", "-qam", "rename", cwd=repo)
    s = summary(store, CAP, cwd=str(repo / "src"))
    lines = s.content.splitlines()
    assert "- Settings live in `conf/app.toml`. (may be stale: conf/app.toml no longer exists)" in lines
    assert (
        "- Checks that passed: `make test`, `make lint` (may be stale: `make lint` is no longer in Makefile)" in lines
    )
    assert (
        "- Checks that passed: `bun run build` (in `web`) (may be stale: script `build` is no longer in web/package.json)"
        in lines
    )
    assert "- `src/cart.py` defines `total`" in lines  # still there
    assert "- Keep `conf/app.toml` out of commits everywhere." in lines  # global: not this tree's to judge
    assert s.stale == 3


def test_a_worktree_gets_its_projects_memory_checked_against_its_own_checkout(tmp_path, repo):
    """The memory is the main repository's; the tree is the worktree's: a file deleted on the
    worktree's branch is gone there and still there in the main checkout, and the other way round."""
    store = _memory(tmp_path, repo, LINES)
    wt = tmp_path / "shop-feature"
    git("worktree", "add", "-q", str(wt), "-b", "feature", cwd=repo)
    git("rm", "-q", "src/cart.py", cwd=wt)
    git("commit", "-qm", "drop the cart", cwd=wt)
    flagged = "- `src/cart.py` defines `total` (may be stale: src/cart.py no longer exists)"
    s = summary(store, CAP, cwd=str(wt / "conf"))
    assert s.project == str(repo) and s.projects_shown == [str(repo)]
    assert flagged in s.content.splitlines() and s.stale == 1
    main = summary(store, CAP, cwd=str(repo))
    assert main.stale == 0 and "- `src/cart.py` defines `total`" in main.content.splitlines()
    (repo / "conf" / "app.toml").unlink()  # gone in the main checkout only
    assert summary(store, CAP, cwd=str(wt)).stale == 1 and summary(store, CAP, cwd=str(repo)).stale == 1
    assert "conf/app.toml no longer exists" not in summary(store, CAP, cwd=str(wt)).content


def test_a_project_that_is_not_on_this_machine_is_not_checked(tmp_path):
    store = _memory(tmp_path, "/elsewhere/shop", LINES)
    s = summary(store, CAP, cwd="/elsewhere/shop")
    assert s.stale == 0 and "- Settings live in `conf/app.toml`." in s.content


def test_what_a_line_cites_is_read_without_guessing(tmp_path, repo):
    assert stale_reasons("- `make -j4 test`, `make PY=1`, `make -C web x`", str(repo)) == []  # no variable, no -C
    assert stale_reasons("- `../other/file.py` and `https://x.y/z` and `a/*.py`", str(repo)) == []
    assert stale_reasons("- `npm run deploy`", str(repo)) == []  # no package.json at the root: nothing known


def test_a_package_json_too_deep_to_parse_says_nothing(tmp_path, repo):
    """A repository's package.json nested past the JSON parser's limit (still under MAX_READ): no
    scripts known, no RecursionError out of the session-start summary."""
    (repo / "package.json").write_text('{"scripts": ' + "[" * 100_000 + "}")
    assert stale_reasons("- `npm run deploy`", str(repo)) == []


def test_what_does_not_fit_the_budget_is_named_not_dropped_silently(tmp_path, repo):
    many = [f"- project rule number {i} with some words" for i in range(300)]
    s = summary(_memory(tmp_path, repo, many), 2500, cwd=str(repo))
    assert s.truncated and len(s.content) <= 2500
    note = next(ln for ln in s.content.splitlines() if ln.startswith("- not shown here:"))
    shown = sum(ln.startswith("- project rule number") for ln in s.content.splitlines())
    assert (
        note
        == f"- not shown here: {300 - shown} more lines of project shop (memory_search for them, or memory_read MEMORY.md)"
    )
    whole = summary(_memory(tmp_path, repo, many), 2500)  # no cwd: the whole file, cut in the middle
    assert "- not shown here:" in whole.content and "lines of memory_summary.md" in whole.content


def test_status_counts_the_handbook_items_that_may_be_stale_per_project(tmp_path, repo):
    from dsh_memory.readpath.health import memory_health

    store = _memory(tmp_path, repo, LINES)
    store.atomic_write(
        "MEMORY.md",
        f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
        "## Project facts\n- Settings live in `conf/app.toml`.\n- `src/cart.py` defines `total`\n",
    )
    assert memory_health(store)["projects"][str(repo)]["stale"] == 0
    (repo / "conf" / "app.toml").unlink()
    row = memory_health(store)["projects"][str(repo)]
    assert row["handbook_items"] == 2 and row["stale"] == 1


def test_the_commit_memory_was_learned_against_is_read_withoutgit(tmp_path, repo):
    from dsh_memory.scope import head_commit

    def rev(cwd):
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True).stdout.strip()

    assert head_commit(str(repo / "src")) == rev(repo)
    wt = tmp_path / "shop-wt"
    git("worktree", "add", "-q", str(wt), "-b", "wt", cwd=repo)
    (wt / "new.txt").write_text("x")
    git("add", ".", cwd=wt)
    git("commit", "-qm", "wt", cwd=wt)
    git("pack-refs", "--all", cwd=repo)  # refs only in packed-refs now
    assert head_commit(str(wt)) == rev(wt) != rev(repo)
    assert head_commit(str(repo)) == rev(repo)
    assert head_commit(str(tmp_path)) == "" and head_commit("/no/such/dir") == "" and head_commit(None) == ""


def test_consolidation_sets_stale_items_aside_and_brings_them_back_never_deleting(tmp_path, repo):
    from dsh_memory.consolidation import stale
    from dsh_memory.consolidation.mechanical import parse_memory_md, render_summary, scope_of_group

    md = (
        f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
        '## User preferences\n- The user: "never edit `conf/app.toml` by hand" [source: a]\n\n'
        "## Project facts\n- Settings live in `conf/app.toml`. [source: a]\n- `src/cart.py` defines `total` [source: b]\n"
    )
    groups = parse_memory_md(md)
    assert stale.set_aside(groups, scope_of_group) == 0
    (repo / "conf" / "app.toml").unlink()
    groups = parse_memory_md(md)
    assert stale.set_aside(groups, scope_of_group) == 1
    g = groups[str(repo)]
    assert g.sections["Possibly stale"] == [
        "- Settings live in `conf/app.toml`. (may be stale: conf/app.toml no longer exists) [source: a]"
    ]
    assert g.sections["Project facts"] == ["- `src/cart.py` defines `total` [source: b]"]
    assert "never edit" in g.sections["User preferences"][0]  # the user's words stay where they are
    assert "Settings live" not in render_summary(groups, [], 4000)  # set aside: not routed to from injection
    (repo / "conf" / "app.toml").write_text("port = 2\n")  # back in the tree: back in the facts
    regrouped = parse_memory_md(g.render())
    stale.set_aside(regrouped, scope_of_group)
    assert "- Settings live in `conf/app.toml`. [source: a]" in regrouped[str(repo)].sections["Project facts"]
    assert not regrouped[str(repo)].sections["Possibly stale"]


def test_consolidation_names_the_routing_and_skills_a_part_could_not_fit(tmp_path, repo):
    """memory_summary.md as the merge writes it: a project with more skills than its part holds
    ends in a line naming how many are not shown and where they are, never a silent cut."""
    from dsh_memory.consolidation.mechanical import parse_memory_md, render_summary

    groups = parse_memory_md(
        f"# Task Group: {repo}\nscope: project {repo}\napplies_to: cwd={repo}; reuse_rule=this project only\n\n"
        "## Reusable knowledge\n- Checks that passed: `make test` [source: a]\n"
    )
    skills = [
        {"name": f"shop-step-{i}", "task": f"do step {i} of the release", "project": str(repo)} for i in range(80)
    ]
    text = render_summary(groups, skills, 3000)
    assert len(text) <= 3000
    lines = text.splitlines()
    shown = sum(ln.startswith("- skills/") for ln in lines)
    assert 0 < shown < 80
    assert (
        lines[-1]
        == f'- not shown here: {80 - shown} more lines of this part (MEMORY.md "# Task Group: {repo}", skills/)'
    )


def test_a_target_is_read_from_its_own_line_only(tmp_path, repo):
    """A word alone on its line is no target, whatever the next line declares (make and just)."""
    (repo / "Makefile").write_text("lint\ncheck: deps\n\ttrue\n")
    assert stale_reasons("- `make lint`", str(repo)) == ["`make lint` is no longer in Makefile"]
    assert stale_reasons("- `make check`", str(repo)) == []
    (repo / "justfile").write_text("fmt\nbuild target:\n    cargo build\n")
    assert stale_reasons("- `just fmt`", str(repo)) == ["`just fmt` is no longer in justfile"]
    assert stale_reasons("- `just build`", str(repo)) == []


def test_a_hostile_makefile_keeps_the_session_start_hook_fast(tmp_path, repo):
    """A Makefile just under the parse bound, one word per line and no target: the hook (a real
    subprocess) still answers, and says nothing it cannot know."""
    from dsh_memory.readpath.freshness import MAX_READ

    (repo / "Makefile").write_text("x\n" * (MAX_READ // 2 - 1))
    store = _memory(tmp_path, repo, LINES)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "DSH_MEMORY_ROOT": str(store.root),
        "DSH_MEMORY_IGNORE_BLOCKS": "1",
    }
    r = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "summary", "--inject", "--cwd", str(repo)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # generous: the check takes well under a second; before, hours
    )
    assert r.returncode == 0, r.stderr
    assert (
        "- Checks that passed: `make test`, `make lint` (may be stale: `make test` is no longer in Makefile" in r.stdout
    )


def test_the_notes_count_against_the_budget(tmp_path, repo):
    """Every shown line cites a file that is gone: with its note it still fits max_chars, and the
    lines the notes push out are named, not dropped silently; `stale` counts the lines shown."""
    gone = [f"- rule {i}: see `src/mod{i}/handler.py` and `src/mod{i}/tests/test_h.py`" for i in range(300)]
    s = summary(_memory(tmp_path, repo, gone), 2500, cwd=str(repo))
    lines = s.content.splitlines()
    flagged = [ln for ln in lines if ln.startswith("- rule ")]
    assert len(s.content) <= 2500 and flagged
    assert all(ln.endswith("/tests/test_h.py no longer exists)") for ln in flagged)
    assert s.stale == len(flagged) and s.left_out == 300 - len(flagged)
    assert lines[-1].startswith(f"- not shown here: {300 - len(flagged)} more lines of project shop")
