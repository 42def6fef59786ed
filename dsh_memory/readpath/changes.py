"""What changed in the memory files since the search index (index.py) was last updated: a full
diff (a stat per file) or a quick one (directory entries and inodes), and the folders' mtimes
that say whether anything was created, deleted or replaced at all."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from dsh_memory.readpath._common import corpus, corpus_entries, nameable, top_files


def diff(conn: sqlite3.Connection, store: Any, quick: bool, recent_ns: int):
    """(current {rel: (path, stat)} of the files to index, changed rels, deleted rels).

    Full: every file of the corpus is stat'ed and compared by (size, mtime, inode). Quick: the
    directories are listed without a stat per file; a file whose inode is the one indexed, and
    that was indexed as older than `recent_ns`, is taken as unchanged (the store replaces files
    atomically: a new file, a new inode); the others are stat'ed. Other in-place edits wait for
    the next full diff."""
    known = {p: (s, m, i) for p, s, m, i in conn.execute("SELECT path, size, mtime_ns, ino FROM files")}
    listed = listing(store) if quick else {}
    files = unsure(listed, known, recent_ns) if quick else corpus(store)
    current = {rel: (path, st) for rel, path, st in files}
    changed = [rel for rel, (_, st) in current.items() if known.get(rel) != (st.st_size, st.st_mtime_ns, st.st_ino)]
    deleted = [p for p in known if p not in (listed if quick else current)]
    return current, changed, deleted


def listing(store: Any) -> dict[str, tuple[str, int]]:
    """The corpus (`_common.corpus`: same files, same rules) as {rel: (path, inode)}, read from
    the directory entries alone (no stat per file)."""
    out = {name: (p, st.st_ino) for name, p, st in top_files(str(store.root))}
    return out | {rel: (e.path, e.inode()) for rel, e in corpus_entries(store)}


def unsure(listed: dict, known: dict, recent_ns: int) -> Iterator[tuple[str, str, os.stat_result]]:
    """(rel, path, stat) of the listed files a quick diff does not take as unchanged (`diff`)."""
    for rel, (path, ino) in listed.items():
        k = known.get(rel)
        if k is not None and k[2] == ino and k[1] < recent_ns:
            continue
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        yield rel, path, st


def dir_mtimes(store: Any) -> dict[str, int]:
    """{folder: mtime_ns (-1: missing)} of the folders whose entries are the corpus: a file
    created, deleted or replaced in one changes its mtime."""
    root = str(store.root)
    out: dict[str, int] = {}

    def walk(path: str, recursive: bool) -> None:
        todo = [path]  # a loop, not recursion: a tree may be thousands of folders deep
        while todo:
            path = todo.pop()
            try:
                out[path] = os.lstat(path).st_mtime_ns
                if recursive:
                    with os.scandir(path) as it:
                        todo += (
                            e.path
                            for e in it
                            if e.name[0] != "." and e.is_dir(follow_symlinks=False) and nameable(e.path)
                        )
            except (FileNotFoundError, NotADirectoryError):
                out[path] = -1

    walk(root, False)
    walk(os.path.join(root, "rollout_summaries"), False)
    walk(os.path.join(root, "skills"), True)
    walk(str(store.notes_dir), True)
    return out
