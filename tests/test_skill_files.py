"""Skill folders are the user's (or an agent's in the memory root): a tree nested deeper than
Python recurses is one skill's error, never a failed Phase 2 (consolidation/skill_files.py)."""

from __future__ import annotations

from pathlib import Path

from dsh_memory.consolidation.skill_files import MAX_COPY_DEPTH, deeper_than, remove_tree
from dsh_memory.storage.store import MemoryStore
from dsh_memory.testing.fake_openai import FakeOpenAIServer, Reply
from tests.fs_helpers import nested, remove_deep
from tests.test_consolidate_flow import add_raw, fake, root, run_flow  # noqa: F401 (fixtures)

DEPTH = 700  # copytree and rmtree recurse once per folder: past Python's 1,000 frames
OLD = "---\nname: deploy\ndescription: Deploy\n---\n1. make deploy\n"


def test_a_skill_folder_nested_too_deep_is_left_as_it_is_and_the_rest_is_written(
    root: Path,  # noqa: F811 (the fixture)
    fake: FakeOpenAIServer,  # noqa: F811
):
    """A skill folder 700 levels deep, and as deep a tree left in skills/.staging/, raised
    RecursionError out of Phase 2 (copytree, rmtree): nothing consolidated, on every run."""
    store = MemoryStore(root)
    store.atomic_write("skills/deploy/SKILL.md", OLD)
    (store.skills_dir / ".staging" / "x").mkdir(parents=True)
    deep = nested(store.skills_dir / "deploy", ["d"] * DEPTH, "f.txt", "the user's")
    nested(store.skills_dir / ".staging" / "x", ["d"] * DEPTH, "f.txt", "a killed run's")
    add_raw(root, "a", "- a fact")
    skills = [
        {"name": "deploy", "skill_md": "1. a new procedure"},
        {"name": "lint", "skill_md": "1. run make lint"},
    ]
    try:
        fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n", "skills": skills}))
        res = run_flow(force=True)
        assert res.outcome == "consolidated", res
        assert res.changes.skills_written == ["lint"], res
        assert res.changes.skill_errors == [
            f"deploy: skills/deploy holds folders nested deeper than {MAX_COPY_DEPTH}: left as it is"
        ]
        assert (store.skills_dir / "deploy" / "SKILL.md").read_text() == OLD
        assert deep.parent.is_dir()  # the user's tree, untouched (its file's path is too long to name)
        assert not (store.skills_dir / ".staging").exists()  # the killed run's, removed
    finally:
        remove_deep(store.skills_dir / "deploy")


def test_the_walks_bound_depth_and_remove_without_recursing(tmp_path: Path):
    top = tmp_path / "t"
    top.mkdir()
    nested(top, ["d"] * 3, "f", "x")
    assert deeper_than(top, 2) and not deeper_than(top, 3)
    nested(top, ["e"] * DEPTH, "f", "x")
    (top / "link").symlink_to(tmp_path)  # removed, never followed
    remove_tree(top)
    assert not top.exists() and tmp_path.is_dir()


def test_a_run_killed_between_setting_a_skill_aside_and_moving_it_in_loses_nothing(
    root: Path,  # noqa: F811 (the fixture)
    fake: FakeOpenAIServer,  # noqa: F811
):
    """A skill is staged whole, its earlier version set aside, then moved in: a kill between the
    last two left it in skills/.removed/ alone, and the next run deleted the staged one. The
    next run moves it in; a skill staged in part (killed before it was whole) is dropped."""
    from dsh_memory.consolidation.skill_files import STAGING, WHOLE

    store = MemoryStore(root)
    new = "---\nname: deploy\ndescription: Deploy\n---\n1. make ship\n"
    store.atomic_write("skills/.removed/deploy-20260101T000000Z/SKILL.md", OLD)  # set aside
    store.atomic_write(f"{STAGING}/deploy/SKILL.md", new)
    store.atomic_write(f"{STAGING}/deploy{WHOLE}", "")
    store.atomic_write("skills/lint/SKILL.md", OLD.replace("deploy", "lint"))
    store.atomic_write(f"{STAGING}/lint/SKILL.md", "half")  # no marker: lint was never set aside
    add_raw(root, "a", "- a fact")
    fake.script(Reply.tool({"memory_md": "# M\n", "memory_summary_md": "v1\n"}))
    assert run_flow(force=True).outcome == "consolidated"
    assert (store.skills_dir / "deploy" / "SKILL.md").read_text() == new
    assert (store.skills_dir / "lint" / "SKILL.md").read_text() == OLD.replace("deploy", "lint")
    assert not (store.skills_dir / ".staging").exists()
