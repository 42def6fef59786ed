"""Where ranked search keeps its index and section vectors (index.py, vectors.py): the memory
root's `.state/`, or, when this process cannot write there (a read-only memory root: a read-only
mount, another user's memory), a private folder of its own in the system's temporary folder,
removed at exit. The index there starts as a copy of the one in `.state/`, so a current index is
searched as it is and a stale or missing one is brought up to date in the copy (a missing one is
built whole, in every process that searches); the memory root is never written."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

from dsh_memory.readpath._common import regular_file, writable
from dsh_memory.readpath.vectors import VECTORS_NAME

INDEX_NAME = "search_index.sqlite3"
_COPIED = (INDEX_NAME, f"{INDEX_NAME}-wal", VECTORS_NAME)  # the -shm is made anew by SQLite
_WRITTEN = (*_COPIED, f"{INDEX_NAME}-shm")

_private: dict[str, Path] = {}  # state folder → this process's folder in its place
_lock = threading.Lock()


def of(state_dir: Path | str) -> Path:
    """The folder that holds the index and vectors of the memory whose state folder is `state_dir`."""
    state_dir = Path(state_dir)
    if writable(state_dir, _WRITTEN):
        return state_dir
    with _lock:
        folder = _private.get(str(state_dir))
        if folder is None or not folder.is_dir():
            folder = _private[str(state_dir)] = _copy(state_dir)
    return folder


def _copy(state_dir: Path) -> Path:
    """A new private folder holding a copy of the index and vectors in `state_dir` (what is there,
    readable, and a regular file: never through a link); what could not be copied is built anew."""
    folder = Path(tempfile.mkdtemp(prefix="dsh-memory-search-"))
    atexit.register(shutil.rmtree, folder, True)
    for name in _COPIED:
        try:
            if regular_file(state_dir / name) is not None:
                shutil.copyfile(state_dir / name, folder / name, follow_symlinks=False)
        except OSError:  # not readable (another user's `.state`)
            continue
    return folder
