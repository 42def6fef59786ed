"""Folder trees deeper than one path can name, for the walks that must not recurse; files aged
as if written long ago."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path


def nested(base: Path, names: list[str], filename: str, text: str) -> Path:
    """Folders `names` nested under `base` and `filename` holding `text` at the bottom, each made
    relative to its parent's descriptor (their paths grow past what one call may name); the
    file's path (too long to open when the tree is)."""
    fd = os.open(base, os.O_RDONLY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            fd, old = os.open(name, os.O_RDONLY, dir_fd=fd), fd
            os.close(old)
        with open(os.open(filename, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write(text)
    finally:
        os.close(fd)
    return Path(base, *names, filename)


def remove_deep(path: Path) -> None:
    """`shutil.rmtree` of a deep tree: it recurses per level (so would pytest's clean-up of old
    temporary folders, failing on every later run)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 5000)
    try:
        shutil.rmtree(path)
    finally:
        sys.setrecursionlimit(limit)


def age(root: Path, seconds: float = 3600) -> None:
    """`root`, a file or a folder with everything under it, modified `seconds` ago: what the
    search index trusts by its stat (one modified within the last 2 s is read again)."""
    when = time.time() - seconds
    os.utime(root, (when, when), follow_symlinks=False)
    for dirpath, _, names in os.walk(root):
        for p in [dirpath, *(os.path.join(dirpath, n) for n in names)]:
            os.utime(p, (when, when), follow_symlinks=False)
