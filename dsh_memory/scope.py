"""Where a memory applies: one project (a repository root) or every project (`global`); the rules
as users see them: docs/architecture.md ("Project scope"). Shared by every stage: Phase 1 tags
each item, Phase 2 groups by it, the read path filters by it. `project_root` walks the path as
written (no `realpath`: a symlinked checkout is the path the agent used). `matches` never goes
upward: a session started in `$HOME` must not pull its rules into every project below it.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from contextlib import suppress

GLOBAL = "global"
MAX_WALK = 64
TAG = "[scope: global]"
TAG_RE = re.compile(r"\s*\[scope:\s*global\]", re.I)
SUMMARY_HEADING = "# Scope: "  # memory_summary.md parts: `# Scope: global`, `# Scope: project <root>`
PROJECT_WORD = "project "

# "all projects", "every repo", "any of my codebases": not "all project docs" (one project's docs)
_ALL_PROJECTS = (
    r"(?:all\s+(?:of\s+)?(?:my\s+|our\s+|the\s+)?(?:repos|repositories|projects|codebases|code\s*bases|workspaces)\b"
    r"|(?:every|each|any)\s+(?:of\s+)?(?:my\s+|our\s+|the\s+)?(?:repo|repositor|project|codebase|code\s*base|workspace)\w*"
    r"(?!\s+(?:docs?|documentation|files?|code|folders?|director(?:y|ies)|config\w*|settings|scripts?|tests?|"
    r"structure|root|readme|dependenc(?:y|ies)|names?)\b))"
)
# … said in Chinese: "所有專案都…", "每个项目", "全局" (no word boundary between Han characters)
_ALL_PROJECTS_ZH = r"(?:所有的?|每個|每个|任何)(?:專案|项目|項目|倉庫|仓库|repo)|全域|全局"
_GENERAL = re.compile(
    r"\b(always|every\s*where|globally|in\s+general|no\s+matter\s+(the|which|what)\s+(repo|project)\w*"
    rf"|{_ALL_PROJECTS})|{_ALL_PROJECTS_ZH}",
    re.I,
)
_EXPLICIT = re.compile(rf"globally|\b{_ALL_PROJECTS}|{_ALL_PROJECTS_ZH}", re.I)
_EVERYWHERE = re.compile(r"every\s*where", re.I)
# "let's make sure we're using US English everywhere": a team's "everywhere" is its codebase
_TEAM = re.compile(r"\b(?:we|we're|we've|let's|let\s+us|our)\b", re.I)
_LOCAL = re.compile(
    r"\b(in|for|of|inside)\s+(this|the\s+current|that)\s+(repo|repositor|project|codebase|code\s*base|package|service)\w*"
    r"|\b(this|that)\s+(repo|repository|codebase)\b|\bhere\b|\bin\s+here\b",
    re.I,
)


_HABIT = re.compile(
    r"^\W*(please\s+)?(always|never)\b|\b(i|we)\s+(always|never|usually|generally)\b|\bin\s+general\b|\bglobally\b",
    re.I,
)
_PROJECT_THING = re.compile(r"`|(?<![\w~])/\w|\w/\w|\b[\w-]+\.(py|ts|tsx|js|json|md|toml|ya?ml|go|rs|sh|lock)\b")


def stated_as_general(text: str) -> bool:
    """True when `text` (the user's words) states a rule for every project: it says so ("in every
    repo", "globally", "everywhere" unless a team says it of its code: "let's make sure we're using
    US English everywhere"), or it is a habit of the user's ("I always…", "Always…",
    "Never…" as the instruction itself) that names nothing of one project (no path, file or code)
    and no "here" / "this repo". "always" inside a task or a description ("hitting /clear always
    creates a file") makes no global rule."""
    if not text or not _GENERAL.search(text):
        return False
    if _EXPLICIT.search(text) or (_EVERYWHERE.search(text) and not _TEAM.search(text)):
        return True
    return bool(_HABIT.search(text)) and not _LOCAL.search(text) and not _PROJECT_THING.search(text)


def is_tagged_global(line: str) -> bool:
    return bool(TAG_RE.search(line or ""))


def untag(line: str) -> str:
    return TAG_RE.sub("", line or "").rstrip()


def tag(line: str) -> str:
    return untag(line) + " " + TAG


LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")  # what ends a line here or in `splitlines`


def _norm(path: str) -> str:
    """A project path as written, on one line: it names a task group and a summary part."""
    p = os.path.normpath(os.path.expanduser(LINE_BREAKS.sub(" ", path).strip()))
    return "/" if p in ("/", "//") else p.rstrip("/")


def _read_small(path: str, limit: int = 4096) -> str:
    """Up to `limit` characters of a regular file; "" for anything else (a FIFO or a device that a
    `.git` file's gitdir names would block the read)."""
    try:
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), encoding="utf-8", errors="replace") as f:
            return f.read(limit) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else ""
    except OSError:
        return ""


def _git_dirs(base: str) -> tuple[str, str | None]:
    """(gitdir, the common dir its `commondir` names, else None) of the `.git` at `base`: a
    directory, or a file naming the gitdir (a linked worktree, a submodule)."""
    dot = os.path.join(base, ".git")
    m = re.match(r"gitdir:\s*(.+)", _read_small(dot).strip()) if os.path.isfile(dot) else None
    gitdir = os.path.normpath(os.path.join(base, m.group(1).strip())) if m else dot
    common = _read_small(os.path.join(gitdir, "commondir")).strip()
    return gitdir, os.path.normpath(os.path.join(gitdir, common)) if common else None


def head_commit(cwd: str | None) -> str:
    """The commit checked out in the repository around `cwd` (its worktree's own HEAD), read from
    the `.git` files (no git subprocess); "" when there is none on this machine."""
    base = cwd if cwd and os.path.isabs(cwd) and os.path.isdir(cwd) else None
    for _ in range(MAX_WALK if base else 0):
        if os.path.exists(os.path.join(base, ".git")):
            gitdir, common = _git_dirs(base)
            common = common or gitdir
            head = _read_small(os.path.join(gitdir, "HEAD")).strip()
            if head.startswith("ref: "):
                ref = head[5:].strip()
                head = _read_small(os.path.join(common, ref)).strip() or _packed_ref(common, ref)
            return head if re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", head) else ""
        if os.path.dirname(base) == base:
            break
        base = os.path.dirname(base)
    return ""


def _packed_ref(common: str, ref: str) -> str:
    refs = (line.partition(" ") for line in _read_small(os.path.join(common, "packed-refs"), 1 << 20).splitlines())
    return next((sha for sha, _, name in refs if name.strip() == ref), "")


@functools.lru_cache(maxsize=4096)
def _walk(path: str) -> str | None:
    """The nearest ancestor of `path` (existing or not) with a real `.git` (dir or file), or None.
    A linked worktree's (`git worktree add`) is its main repository: its `.git` file names a
    gitdir whose `commondir` is the main repository's `.git`. A submodule (a gitdir without
    `commondir`) or anything unreadable stays where its `.git` file is."""
    cur = path
    for _ in range(MAX_WALK):
        with suppress(OSError, ValueError):  # ValueError: a lone surrogate (half an emoji) no path holds
            st = os.lstat(os.path.join(cur, ".git"))
            if stat.S_ISDIR(st.st_mode):
                return cur
            if stat.S_ISREG(st.st_mode):
                _, common = _git_dirs(cur)
                main = os.path.dirname(common or "")
                if common and os.path.basename(common) == ".git" and os.path.isdir(common) and os.path.isdir(main):
                    return main
                return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent
    return None


# A git worktree by the usual layouts (`<repo>/.worktrees/<name>`, `<repo>/.claude/worktrees/<name>`,
# `<repo>/worktrees/<name>`, `<repo>.worktrees/<name>`, `<repo>-worktrees/<name>`, `_`, `__`), POSIX or
# Windows: `main` is the repository's folder, the match ends at the worktree's.
WORKTREE = re.compile(
    r"^(?P<main>.*?[^/\\])(?:[/\\](?:\.claude[/\\]|\.)?worktrees|[._-]{1,2}worktrees?)[/\\][^/\\]+(?=[/\\]|$)"
)
# A home, or a tool's hidden folder in it (Claude desktop's `~/.claude-worktrees/<repo>/<name>`): no repository.
_HOME = re.compile(
    r"(?:/(?:home|Users)/[^/]+|/root|~|[A-Za-z]:(?:[/\\]Users[/\\][^/\\]+)?)(?:[/\\]\.[^/\\]+)?[/\\]?", re.I
)


def in_worktree(path: str) -> re.Match[str] | None:
    """`path` in a worktree by its layout (`WORKTREE`: `main` its repository's folder, the match
    ending at the worktree's); None for other paths and for `~/worktrees/x` or `~/.claude-worktrees/r/x`
    (a home, or a tool's folder in it, is no repository)."""
    m = WORKTREE.match(path)
    return m if m and not _HOME.fullmatch(m["main"]) else None


def locate(cwd: str | None) -> tuple[str | None, bool]:
    """(project root, whether it is a real repository) for a session's or a request's cwd. A
    worktree no repository here claims (removed since, or a log from another machine) is its main
    repository's, by its layout (`in_worktree`)."""
    if not cwd or not isinstance(cwd, str) or "\x00" in cwd or not cwd.strip():
        return None, False
    path = _norm(cwd)
    # a folder that is gone (or not made yet) still lies in the repository around it; a Windows folder
    # read here (`D:\posh\.claude\worktrees\x`) or a relative one is looked up by its layout only
    absolute = os.path.isabs(path)
    root = _walk(path) if absolute else None
    if root is None and (wt := in_worktree(path)):
        path = wt["main"]
        root = _walk(path) if absolute else None
    return (root, True) if root is not None else (path, False)


def project_root(cwd: str | None) -> str | None:
    """The project of a session's cwd (see the module docstring); None without a cwd."""
    return locate(cwd)[0]


def matches(project: str | None, root: str | None, is_repo: bool = False) -> bool:
    """Does a stored `project` belong to the requested `root`? (see the module docstring)"""
    if not project or not root:
        return False
    p, r = _norm(project), _norm(root)
    return p == r or (is_repo and p.startswith(r.rstrip("/") + "/"))


def label(project: str) -> str:
    """A short name for a project: its last path component (the path itself when it has none)."""
    name = _norm(project).rsplit("/", 1)[-1]
    return name or project


MAX_SUMMARY_PARTS = 200


def summary_parts(text: str) -> tuple[str, dict[str, str]]:
    """(global part, {project root: part}) of a memory_summary.md. Text outside any
    `# Scope: project <root>` part (a summary without scope parts included) is global; the
    first `v1` line belongs to neither."""
    glob: list[str] = []
    projects: dict[str, list[str]] = {}
    cur = glob
    lines = (text or "").split("\n")
    if lines and lines[0].strip() == "v1":
        lines = lines[1:]
    for line in lines:
        if line.startswith(SUMMARY_HEADING):
            project = part_project(line)
            cur = projects.setdefault(project, []) if project else glob
            continue
        cur.append(line)
    return "\n".join(glob).strip("\n"), {p: "\n".join(v).strip("\n") for p, v in projects.items()}


def part_project(heading: str) -> str | None:
    """The project root a `# Scope: project <root>` heading names; None for any other part."""
    what = heading[len(SUMMARY_HEADING) :].strip()
    root = what[len(PROJECT_WORD) :].strip()
    return _norm(root) if what.lower().startswith(PROJECT_WORD) and root else None


def summary_groups(lines: list[str]) -> list[tuple[int, str | None]]:
    """(index of the first line, project or None for global) of every memory_summary.md part, as
    `handbook_groups` gives them for MEMORY.md; the lines before the first part are global."""
    return [(0, None)] + [(i, part_project(ln)) for i, ln in enumerate(lines) if ln.startswith(SUMMARY_HEADING)]


def summary_file_cap(text: str, cap: int) -> int:
    """The size bound of a memory_summary.md with project parts: `cap` for the global part plus
    one project part (what is injected), times the parts (at most MAX_SUMMARY_PARTS)."""
    n = sum(1 for ln in (text or "").split("\n") if ln.startswith(SUMMARY_HEADING + PROJECT_WORD))
    return cap * (1 + min(n, MAX_SUMMARY_PARTS))


_APPLIES = re.compile(r"^applies_to:\s*cwd=([^;]*?)\s*(?:;|$)")
REUSE = "reuse_rule=this project only"  # the merge's project groups: `applies_to: cwd=<root>; <REUSE>`
_WILD = re.compile(r"[*?\[\]{}()|^$]")
GROUP_HEADING = "# Task Group:"


NO_PROJECT = "(no project)"  # the task group of memory from a session whose cwd named no project
MAX_PATH = 4096  # no path is longer (Linux's PATH_MAX): a longer cwd is a log's claim, no project


def group_of(project: str | None) -> str:
    """The task group of a raw block's `project` (else its cwd's): that project, whatever its path
    (`C:\\src\\app` from another machine, a relative one); NO_PROJECT for a session whose cwd named
    none (missing, one called `global`, or one longer than any path: its group's heading alone
    would fill the handbook's cap). Never the global group: only the user's words put an item
    there (`[scope: global]`)."""
    return project if project and project != GLOBAL and len(project) <= MAX_PATH else NO_PROJECT


def group_project(name: str, head: list[str]) -> str | None:
    """The project of a MEMORY.md task group, from its `applies_to: cwd=<a real path>` line, a
    name that is a path, or its `scope: project <name>` line (the merge writes one for every
    project, `group_of`: a path from another machine or a relative one is a project too); None
    (global) for `global`, whatever its lines say (the merge reads it so, `scope_of_group`), and
    for patterns such as `cwd=.*`. A path the heading names too is the project's, whatever
    characters it holds (`/src/app (copy)`)."""
    if name == GLOBAL:
        return None
    for line in head:
        if os.path.isabs(name) and line.strip() in (f"applies_to: cwd={name}", f"applies_to: cwd={name}; {REUSE}"):
            return _norm(name)  # the heading's own path, whatever it holds (`/src/a;b`)
        m = _APPLIES.match(line.strip())
        if m and os.path.isabs(m.group(1)) and (m.group(1) == name or not _WILD.search(m.group(1))):
            return _norm(m.group(1))
    if f"scope: project {name}" in head or (os.path.isabs(name) and not _WILD.search(name)):
        return _norm(name)
    return None


def handbook_groups(lines: list[str]) -> list[tuple[int, str | None]]:
    """(index of the first line, project or None for global) of every MEMORY.md task group; the
    lines before the first group are global."""
    out: list[tuple[int, str | None]] = [(0, None)]
    for i, line in enumerate(lines):
        if line.startswith(GROUP_HEADING):
            head = [ln for ln in lines[i + 1 : i + 4] if ln.startswith(("scope:", "applies_to:"))]
            out.append((i, group_project(line.split(":", 1)[1].strip(), head)))
    return out


_GLOB = re.compile(r"[*?\[]")


def excluded_by(cwd: str | None, patterns: list[str] | tuple[str, ...]) -> str | None:
    """The first of `patterns` (the `exclude_projects` setting) that excludes a session working in
    `cwd`, or None. A path excludes its repository (a worktree's pattern names its main
    repository, as `project_root` does) and every project inside it; a glob (`*`, `?`, `[`) is
    matched against the session's project root and its cwd. A session without a cwd is never
    excluded (nothing says where it worked)."""
    if not patterns or not cwd:
        return None
    project, _ = locate(cwd)
    seen = [p for p in (project, _norm(cwd)) if p]
    for pattern in patterns:  # validated settings: non-blank strings
        pat = _norm(pattern)
        if _GLOB.search(pat):
            if any(fnmatch.fnmatchcase(p, pat) or fnmatch.fnmatchcase(p, pat.rstrip("/") + "/*") for p in seen):
                return pattern
            continue
        roots = {pat, project_root(pat) or pat}
        if any(matches(p, r, is_repo=True) for p in seen for r in roots):
            return pattern
    return None
