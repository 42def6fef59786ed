"""Paths as the agent's machine wrote them, POSIX or Windows: whether one is outside the project
and where it sits under the session's folder. A session run on Windows names one file as
`D:\\repo\\src\\a.go`, `D:/repo/src/a.go` or (Git Bash) `/d/repo/src/a.go`, and its logs may be
read on another machine; each is `src/a.go` under the folder `D:\\repo`."""

from __future__ import annotations

import re

from dsh_memory.scope import in_worktree

_DRIVE = re.compile(r"^([A-Za-z]):[\\/]")  # D:\repo, D:/repo
_GIT_BASH = re.compile(r"^/([A-Za-z])(?=/|$)")  # /d/repo (only when the session's folder has a drive)


def on_drive(path: str) -> bool:
    """A Windows path from a drive (`D:\\repo`, `D:/repo`)."""
    return bool(_DRIVE.match(path))


def is_absolute(path: str) -> bool:
    """A path from a root, a home (`~`) or a drive: not one of the project's relative paths."""
    return path.startswith(("/", "~", "\\\\")) or on_drive(path)


def _canonical(path: str, windows: bool) -> str:
    """`path` comparable with others of its kind: on a Windows folder, forward slashes, the drive
    as `d:/` (Git Bash's `/d/` too) and lower case (Windows names ignore case)."""
    if not windows:
        return path
    path = path.replace("\\", "/")
    path = _GIT_BASH.sub(lambda m: f"{m[1]}:", path, count=1)
    return path.lower()


def spellings(cwd: str) -> list[str]:
    """The ways a command line may name the session's folder (`D:\\repo`, `D:/repo`, `/d/repo`)."""
    root = cwd.rstrip("/\\")
    m = _DRIVE.match(cwd)
    if not m:
        return [root]
    rest = root[2:].replace("\\", "/")
    return list(dict.fromkeys([root, f"{m[1]}:{rest}", f"{m[1].lower()}:{rest}", f"/{m[1].lower()}{rest}"]))


def checkout(path: str, cwd: str) -> str:
    """`path` in another checkout (a git worktree, `scope.in_worktree`) of the project at `cwd`, as the
    same place under `cwd`: with `cwd` the repository, `<cwd>/.claude/worktrees/x/src`,
    `<cwd>.worktrees/x/src` or Codex's `~/.codex/worktrees/<id>/<name>/src` is `<cwd>/src`; with
    `cwd` a worktree, so is the repository's or another worktree's `src`. `path` as it is otherwise
    (a sibling repository `<cwd>-private` among them)."""
    windows = on_drive(cwd)
    cwd, bare = cwd.rstrip("/\\"), path.rstrip("/\\")
    here, p = _canonical(cwd, windows), _canonical(bare, windows)  # same lengths as `cwd`, `bare`
    base = here.rpartition("/")[2]
    mine = in_worktree(here)
    main = mine["main"] if mine else here
    theirs = in_worktree(p)
    if p.startswith(here + "/") and not (theirs and theirs.end() > len(here)):
        return path  # under the session's own folder, in no worktree inside it (`.worktrees/alex/test-x` too)
    if theirs and theirs["main"] == main:
        return cwd + bare[theirs.end() :]
    codex = base and re.match(rf".*/\.codex/worktrees/[^/]+/{re.escape(base)}(?=/|$)", p)
    if codex:
        return cwd + bare[codex.end() :]
    if mine and (p == main or p.startswith(main + "/")) and not p.startswith(here + "/"):
        return cwd + bare[len(main) :]  # the repository's own folder
    return path


def relative(path: str, cwd: str | None) -> str:
    """`path` under `cwd` (or under another checkout of it, `checkout`) as a relative path (forward
    slashes on a Windows folder); `path` as it is when it is not under `cwd`."""
    if not cwd:
        return path
    path = checkout(path, cwd)
    windows = on_drive(cwd)
    root = _canonical(cwd.rstrip("/\\"), windows)
    if _canonical(path, windows).startswith(root + "/"):  # same length: `/d/` and `d:/` alike
        return (path.replace("\\", "/") if windows else path)[len(root) + 1 :]
    return path
