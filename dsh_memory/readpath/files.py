"""list, read, add and delete-file: the file-shaped read-path operations."""

from __future__ import annotations

import os
import stat as stat_mod
from bisect import bisect_right
from datetime import datetime
from itertools import accumulate
from typing import Any

from dsh_memory.errors import NotFoundError, PathGuardError, UserInputError
from dsh_memory.readpath._common import (
    decode_cursor,
    encode_cursor,
    fingerprint,
    guard,
    lstat_named,
    record_usage,
    validate,
    visible,
)
from dsh_memory.readpath.models import (
    MAX_READ_CHARS,
    AddRequest,
    AddResult,
    DeleteRequest,
    DeleteResult,
    Entry,
    ListRequest,
    ListResult,
    ReadRequest,
    ReadResult,
    shown_name,
)
from dsh_memory.readpath.scoping import Where, file_scope, layer
from dsh_memory.scope import GLOBAL, locate, matches, project_root

RETIRED_DIR_NAME = ".retired"

# delete-file never removes what the pipeline owns or what forgetting only retires.
PROTECTED_FILES = frozenset(
    {"MEMORY.md", "MEMORY.archive.md", "memory_summary.md", "raw_memories.md", "raw_memories.archive.md"}
)


def list_dir(store: Any, path: str = "", **params: Any) -> ListResult:
    """Shallow, sorted listing of one directory; paginated. Hides `.state`, temp files and
    symlinks (dot entries other than rollout_summaries/.retired). Files carry their scope; with
    `cwd`, other projects' files come only with `other_projects` (after the rest).
    `params`: ListRequest's fields."""
    req = validate(ListRequest, path=path or "", **params)
    target, rel = guard(store, req.path)
    fresh = not rel and not os.path.lexists(target)  # a memory root nothing has written yet: empty
    st = None if fresh else lstat_named(target, rel)
    if st is None:
        entries = []
    elif stat_mod.S_ISREG(st.st_mode):
        entries = [Entry(path=rel, type="file", size=st.st_size)]
    elif stat_mod.S_ISDIR(st.st_mode):
        entries = []
        for e in sorted(os.scandir(target), key=lambda e: e.name):
            # hidden: .state (bookkeeping), writer temp files; .retired stays discoverable
            if e.is_symlink() or (e.name.startswith(".") and e.name != RETIRED_DIR_NAME):
                continue
            name = shown_name(e.name)  # a name that is no UTF-8 is shown escaped: `caf\xe9.md`
            child = f"{rel}/{name}" if rel else name
            if e.is_dir(follow_symlinks=False):
                entries.append(Entry(path=child, type="directory"))
            elif e.is_file(follow_symlinks=False):
                try:
                    size = e.stat(follow_symlinks=False).st_size
                except FileNotFoundError:  # retired or deleted since the folder was listed
                    continue
                entries.append(Entry(path=child, type="file", size=size))
    else:
        raise UserInputError(f"not a file or directory: {rel}")
    if req.cwd:  # the project's files first: every entry's scope is needed before the page
        entries = _scoped(store, entries, req.cwd, req.other_projects)
    fp = fingerprint("list", rel, req.max_results, req.cwd, req.other_projects)
    start = decode_cursor(req.cursor, fp)
    page = entries[start : start + req.max_results]
    page = page if req.cwd else _scoped(store, page, None, False)  # else only the page's scopes
    more = start + req.max_results < len(entries)
    return ListResult(
        path=rel,
        entries=page,
        next_cursor=encode_cursor(start + req.max_results, fp) if more else None,
        truncated=more,
    )


def _scoped(store: Any, entries: list[Entry], cwd: str | None, other_projects: bool) -> list[Entry]:
    """Files with their scope; with `cwd`, this project's and global entries first, the other
    projects' files only with `other_projects` (`scoping.layer`)."""

    def scope(e: Entry) -> str | None:
        return file_scope(store, e.path) if e.type == "file" else None

    return list(layer(entries, Where.of(cwd), other_projects, scope))


def read(
    store: Any, path: str, *, state: Any = None, now: datetime | None = None, usage: bool = True, **params: Any
) -> ReadResult:
    """A slice of one file from `start_line` (1-based, like every line number here), capped at
    MAX_READ_CHARS. `params`: ReadRequest's fields.

    Returning content of an active rollout summary records usage (forgetting input), unless
    `usage=False` (the vault: a person looking is not an agent using the memory)."""
    req = validate(ReadRequest, path=path, **params)
    target, rel = guard(store, req.path)
    st = lstat_named(target, rel)
    if stat_mod.S_ISDIR(st.st_mode):
        raise UserInputError(f"{rel or '.'} is a directory; use list")
    if not stat_mod.S_ISREG(st.st_mode):
        raise UserInputError(f"not a regular file: {rel}")
    first = req.start_line - 1  # index of the first returned line
    try:
        window, total = _window(target, first, req.max_lines)
    except (FileNotFoundError, NotADirectoryError):  # retired or deleted since the lstat above
        raise NotFoundError(f"no such file or directory in memory: {rel}") from None
    if req.start_line > max(total, 1):
        raise UserInputError(f"start_line {req.start_line} is past the end of {rel} ({total} lines)")
    fit = bisect_right(list(accumulate(len(line) + 1 for line in window)), MAX_READ_CHARS)  # lines within the cap
    cut = fit < len(window)
    # a single giant line: return its head rather than nothing
    chunk = window[:fit] if fit or not window else [window[0][: MAX_READ_CHARS - 1]]
    end = first + len(chunk)
    more = end < total
    if chunk and usage:
        record_usage(store, [rel], state=state, now=now)
    return ReadResult(
        path=rel,
        start_line=req.start_line,
        end_line=end,
        total_lines=total,
        content="\n".join(chunk),
        truncated=more or cut,
        next_start_line=end + 1 if more else None,
    )


READ_CHUNK_CHARS = 1 << 20
OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what `str.splitlines` splits on besides "\n"


def _window(path: Any, first: int, count: int) -> tuple[list[str], int]:
    """Lines `first` … `first + count - 1` (0-based) of a file and how many lines it has, split as
    `str.splitlines` splits them (search's line numbers), holding one chunk and the window at a
    time: an archive grown over months is not loaded whole to return a page of it. A line longer
    than a page keeps only its head (all `read` returns of it), and the window ends past the
    characters a page returns."""
    window: list[str] = []
    total = kept = 0
    pending = ""  # a line not ended yet: the next chunk may go on with it (or end its "\r" with "\n")

    def take(line: str) -> None:
        nonlocal total, kept
        if first <= total < first + count and kept <= MAX_READ_CHARS:  # past the cap: none returned
            window.append(line.splitlines()[0][: MAX_READ_CHARS + 1])
            kept += len(window[-1]) + 1
        total += 1

    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for chunk in iter(lambda: f.read(READ_CHUNK_CHARS), ""):
            text = pending + chunk
            ends = -1 if any(c in text for c in OTHER_BREAKS) else text.count("\n")
            if ends >= 0 and (total >= first + count or total + ends <= first):  # no line of the window
                total += ends  # lines only counted: C speed, where splitting a 3 GB file took 12 s
                pending = text[text.rfind("\n") + 1 :]
            else:
                parts = text.splitlines(keepends=True)
                pending = parts.pop()
                for line in parts:
                    take(line)
            if len(pending) > MAX_READ_CHARS + 1:
                pending = pending[: MAX_READ_CHARS + 1] + ("\r" if pending.endswith("\r") else "")
    if pending:
        take(pending)
    return window, total


def add(
    store: Any, note: str, *, now: datetime | None = None, session_cwd: str | None = None, **params: Any
) -> AddResult:
    """Write one new ad hoc note (never overwrites). The only write an agent gets. `params`:
    AddRequest's other fields (title, cwd, scope). A note is for cwd's project (`project` in its
    front matter: consolidation puts it in that project's task group and summary part) unless
    scope is `global`. `session_cwd`: where an adapter knows its caller works (the stdio MCP
    server's directory): cwd's default, and a cwd must lie within its project; `/` or the home
    directory (no repository) is where a client starts a server, no project: cwd is required."""
    req = validate(AddRequest, note=note, **params)
    project = None
    if session_cwd and no_project(session_cwd):
        if req.scope == "project" and not req.cwd:  # a client's start directory, not the agent's project
            raise UserInputError(
                f"this server runs in {visible(session_cwd)[:200]}, which is no project: pass cwd (your "
                "working directory), or start the server in the project's directory"
            )
        session_cwd = None
    if req.scope == "project":
        cwd = req.cwd or session_cwd
        if not cwd:
            raise UserInputError("a note is for one project: pass cwd (your working directory), or scope global")
        project = project_root(cwd)
        home = project_root(session_cwd)
        if home and not matches(project, home, is_repo=True):
            raise UserInputError(f"cwd is outside this session's project {visible(home)[:200]}")
    extra = {"project": project} if project else None
    rel = store.add_note(req.note, title=req.title, now=now, extra=extra)
    return AddResult(path=str(rel), scope=f"project {project}" if project else GLOBAL)


def no_project(cwd: str) -> bool:
    """`/` or the home directory, when it is no repository: where a client starts a server, or a
    shell its user, not a project a note is meant for (`add`'s default cwd there is refused)."""
    return locate(cwd) in ((os.sep, False), (project_root(os.path.expanduser("~")), False))


def delete_file(store: Any, path: str) -> DeleteResult:
    """Delete one file (settings-page vault). Refuses pipeline files and retired summaries."""
    req = validate(DeleteRequest, path=path)
    target, rel = guard(store, req.path)
    if rel.lower() in {f.lower() for f in PROTECTED_FILES}:  # case-insensitive file systems too
        raise PathGuardError(f"{rel} is maintained by the pipeline and cannot be deleted")
    if f"{rel.lower()}/".startswith(f"rollout_summaries/{RETIRED_DIR_NAME}/"):
        raise PathGuardError("retired summaries are an archive and cannot be deleted")
    if rel == "":
        raise PathGuardError("refusing to delete the memory root")
    st = lstat_named(target, rel)
    if not stat_mod.S_ISREG(st.st_mode):
        raise UserInputError(f"{rel} is not a regular file (directories are never deleted)")
    target.unlink()
    return DeleteResult(path=rel, deleted=True)
