"""A skill written into skills/<name>/ whole or not at all, and the versions it replaces kept.

A skill is staged in skills/.staging/<name> (with the files of its earlier version that this
one does not name), then renamed into place; the earlier folder moves to skills/.removed/,
whose newest MAX_REMOVED_SKILLS versions are kept. The trees are the user's (or an agent's
working in the memory root): their walks never recurse per level, since Python's would raise
RecursionError out of Phase 2 a few hundred folders down.
"""

from __future__ import annotations

import os
import re
import shutil
from contextlib import suppress
from datetime import datetime
from typing import Any

from dsh_memory.consolidation.skill_inventory import SKILL_NAME_RE, read_optional
from dsh_memory.consolidation.skills import ValidSkill
from dsh_memory.errors import DshMemoryError
from dsh_memory.transcript.redact import redact

MAX_REMOVED_SKILLS = 100  # skill versions kept in skills/.removed/, the newest
MAX_COPY_DEPTH = 64  # folders below a skill's own that a new version carries over
_SET_ASIDE = re.compile(r"-(\d{8}T\d{6}Z)$")  # skills/.removed/<name>-<time>
STAGING = "skills/.staging"  # a skill being written (hidden: never listed, searched or offered)
WHOLE = ".whole"  # skills/.staging/<name>.whole: <name> is staged whole, about to replace skills/<name>


def write_skill(store: Any, s: ValidSkill, now: datetime) -> list[str]:
    """Write `s` whole (its earlier version set aside) unless it is already there as it is; the
    files it names. Raises DshMemoryError or OSError, having written nothing, when it cannot."""
    todo = [(f"skills/{s.name}/SKILL.md", s.skill_md)] + [(f"skills/{s.name}/{p}", c) for p, c in s.files]
    for rel, _ in todo:  # guard every path (symlinked skills/, skills/<name>, subfolders) first
        if store.resolve(rel).is_dir():  # nothing is written when one file cannot be
            raise IsADirectoryError(f"{rel} is a folder")
    folder = store.resolve(f"skills/{s.name}")  # its earlier version is kept when this one differs
    if folder.is_dir() and all(read_optional(store.root / rel) == redact(text) for rel, text in todo):
        return [rel for rel, _ in todo]
    stage = store.resolve(f"{STAGING}/{s.name}")  # whole there first: a kill leaves no half skill
    if folder.is_dir():  # with the files this version does not name (a link copied as a link)
        if deeper_than(folder, MAX_COPY_DEPTH):
            raise DshMemoryError(f"skills/{s.name} holds folders nested deeper than {MAX_COPY_DEPTH}: left as it is")
        shutil.copytree(folder, stage, symlinks=True)
    for rel, text in todo:
        store.atomic_write(STAGING + rel.removeprefix("skills"), text)
    whole = store.atomic_write(f"{STAGING}/{s.name}{WHOLE}", "")  # from here on, `unstage` finishes the move
    if folder.is_dir():
        set_aside(store, folder, s.name, now)
    os.rename(stage, folder)
    whole.unlink()
    return [rel for rel, _ in todo]


def unstage(store: Any) -> None:
    """Remove skills/.staging/ (a link there is not followed: each skill's write refuses it),
    first moving into place a skill a killed run had staged whole and whose earlier version it
    had already set aside (else that skill would be in skills/.removed/ alone)."""
    with suppress(DshMemoryError):
        staging = store.resolve(STAGING)
        if staging.is_dir():
            for marker in staging.glob(f"*{WHOLE}"):
                if not SKILL_NAME_RE.fullmatch(name := marker.name.removesuffix(WHOLE)):
                    continue
                with suppress(DshMemoryError, OSError):
                    folder, stage = store.resolve(f"skills/{name}"), store.resolve(f"{STAGING}/{name}")
                    if stage.is_dir() and not os.path.lexists(folder):
                        os.rename(stage, folder)
        remove_tree(staging)


def set_aside(store: Any, folder: Any, name: str, now: datetime) -> None:
    """Move a skill folder the model removes or rewrites to skills/.removed/, and keep the newest
    MAX_REMOVED_SKILLS there (a folder of another name is the user's)."""
    kept = store.resolve(f"skills/.removed/{name}-{now:%Y%m%dT%H%M%SZ}")
    kept.parent.mkdir(exist_ok=True)
    os.rename(folder, kept)
    with os.scandir(kept.parent) as it:
        versions = [e for e in it if _SET_ASIDE.search(e.name) and e.is_dir(follow_symlinks=False)]
    for e in sorted(versions, key=lambda e: _SET_ASIDE.search(e.name).group(1))[:-MAX_REMOVED_SKILLS]:
        remove_tree(e.path)  # never the reason a skill is not written


def deeper_than(top: os.PathLike | str, levels: int) -> bool:
    """Whether `top` holds a folder more than `levels` below it (links not followed)."""
    stack = [(os.fspath(top), 0)]
    while stack:
        path, depth = stack.pop()
        with os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if depth == levels:
                        return True
                    stack.append((e.path, depth + 1))
    return False


def remove_tree(top: os.PathLike | str) -> None:
    """`shutil.rmtree(top, ignore_errors=True)` without its recursion per level: what cannot be
    removed stays (a link is removed, never followed)."""
    top = os.fspath(top)
    if os.path.islink(top):
        with suppress(OSError):
            os.unlink(top)
        return
    stack, folders = [top], []
    while stack:
        folders.append(path := stack.pop())
        with suppress(OSError), os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    with suppress(OSError):
                        os.unlink(e.path)
    for path in reversed(folders):
        with suppress(OSError):
            os.rmdir(path)
