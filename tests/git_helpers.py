"""Real git repositories for tests: one way to run git (no user or system config read, an
identity set) and a committed repository made from a few files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, cwd) -> None:
    """`git ARGS` in `cwd`, failing the test when git fails."""
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True, capture_output=True, env=_ENV
    )


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """A repository at `root` (branch main) holding `files` (relative path → text), committed."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git("init", "-q", "-b", "main", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    return root
