"""Is a memory line still true of the working tree? Checked when a project's lines are injected
(docs/agents.md says what the agent sees): a relative path in a code span must exist under the
project root (or the line's "(in `DIR`)" folder), `make T` / `just T` must still be a target,
`npm|pnpm|yarn|bun run S` a package.json script. A line that cites something gone is flagged,
not dropped. Only stat() and reads of a Makefile / package.json (cached by mtime), never a git
subprocess; a project not on this machine is not checked. A line learned more than
`stale_after_days` ago (`readpath.learned`) says how long.
"""

from __future__ import annotations

import json
import os
import re
from datetime import date
from pathlib import PurePath

from dsh_memory.readpath._common import FileCache
from dsh_memory.readpath.learned import age_days

SPAN = re.compile(r"`([^`\n]+)`")
IN_DIR = re.compile(r"\(in `([^`\n]+)`\)")
RELATIVE_PATH = re.compile(r"^(?:\./)?[\w@.-]+(?:/[\w@.-]+)+/?$")  # a/b, a/b.c, a/b/ — no globs, no placeholders
MAKE = re.compile(r"^(make|just)(?:\s+-(?![Cf]\b)[\w-]+)*\s+([\w.][\w.-]*)(?=\s|$)")  # not `make -C dir`, `make VAR=1`
SCRIPT = re.compile(r"^(?:npm|pnpm|yarn|bun) run\s+([\w:.-]+)")
# Within one line ([ \t], never \s): a word alone on its line is no target, and a Makefile of such
# lines is read in linear time (a match running on across lines is quadratic: hours for 1 MiB).
MAKE_TARGET = re.compile(r"^([\w.-]+(?:[ \t]+[\w.-]+)*)[ \t]*:(?!=)", re.M)
JUST_RECIPE = re.compile(r"^@?([\w-]+)(?:[ \t][^:\n]*)?:(?!=)", re.M)
MAKEFILES = ("Makefile", "makefile", "GNUmakefile")
JUSTFILES = ("justfile", "Justfile")
MAX_READ = 1 << 20  # a Makefile or package.json larger than this is not parsed

_names_cache = FileCache(256)


def _names(path: str, kind: str) -> frozenset[str] | None:
    """The targets of a Makefile / justfile or the scripts of a package.json; None when absent or
    unreadable (nothing can be said then). Cached by the file's identity."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return None if st.st_size > MAX_READ else _names_cache.get(path, st, lambda: _parse_names(path, kind))


def _parse_names(path: str, kind: str) -> frozenset[str] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_READ)
    except OSError:
        return None
    if kind == "just":
        return frozenset(JUST_RECIPE.findall(text))
    if kind != "package":
        return frozenset(n for group in MAKE_TARGET.findall(text) for n in group.split())
    try:
        scripts = json.loads(text).get("scripts") or {}
    except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, nested too deep
        return None
    return frozenset(scripts) if isinstance(scripts, dict) else frozenset()


def checkout_root(cwd: str | None) -> str | None:
    """The working tree around `cwd`: its nearest folder holding a `.git` (a directory, or the
    file of a linked worktree). A worktree is its own tree (the memory's project is still the main
    repository, `scope.locate`): a file deleted on another branch's checkout is not gone here.
    None when `cwd` lies in no repository on this machine."""
    if not cwd or "\x00" in cwd:
        return None
    here = os.path.abspath(os.path.expanduser(cwd))
    for folder in [here, *map(str, PurePath(here).parents)][:64]:
        if os.path.lexists(os.path.join(folder, ".git")) and os.path.isdir(folder):
            return folder
    return None


def _listed(base: str, tool: str, memo: dict) -> tuple[str | None, frozenset[str] | None]:
    """(the Makefile / justfile / package.json under `base`, its names), once per call's `memo`."""
    key = (base, tool)
    if key not in memo:
        files = MAKEFILES if tool == "make" else JUSTFILES if tool == "just" else ("package.json",)
        found = next((p for p in (os.path.join(base, f) for f in files) if os.path.isfile(p)), None)
        memo[key] = (found, _names(found, tool) if found else None)
    return memo[key]


def _rel(path: str, root: str) -> str:
    return path[len(root) + 1 :] if path.startswith(root.rstrip("/") + "/") else os.path.relpath(path, root)


def stale_reasons(line: str, root: str, memo: dict | None = None) -> list[str]:
    """What `line` cites that the working tree at `root` no longer has (empty: nothing known gone).
    `memo`: one dict shared by the calls of one check, so each Makefile / package.json is looked
    up once per check, not once per line."""
    memo = {} if memo is None else memo
    reasons: list[str] = []
    where = IN_DIR.search(line)
    base = os.path.join(root, where.group(1)) if where and not where.group(1).startswith(("/", "~")) else root
    for span in SPAN.findall(line):
        span = span.strip()
        if where and span == where.group(1):
            continue
        if m := MAKE.match(span):  # a make / just target, or a package.json script below
            tool, name, cited = m[1], m[2], f"`{m[1]} {m[2]}`"
        elif m := SCRIPT.match(span):
            tool, name, cited = "package", m[1], f"script `{m[1]}`"
        else:
            if RELATIVE_PATH.match(span) and ".." not in span.split("/"):
                rel = span.removeprefix("./")
                if not os.path.lexists(os.path.join(root, rel)) and not os.path.lexists(os.path.join(base, rel)):
                    reasons.append(f"{rel} no longer exists")
            continue
        found, names = _listed(base, tool, memo)
        if names is not None and name not in names:
            reasons.append(f"{cited} is no longer in {_rel(found, root)}")
    return reasons


def flag_stale(
    text: str,
    root: str | None,
    dates: dict | None = None,
    today: date | None = None,
    stale_after_days: int = 0,
) -> tuple[str, dict[str, tuple[bool, bool]]]:
    """`text` (summary parts) with every bullet of its `# Scope: project …` parts that cites
    something gone from `root` flagged "(may be stale: …)", and every one learned more than
    `stale_after_days` ago (its evidence's date in `dates`, `readpath.learned`; 0: never) saying
    how old it is; (text, {each flagged line as it now reads: (stale, old)}), for the caller to
    count the lines it shows. The global part is not this tree's to judge. Nothing is checked
    against the tree when `root` is not a folder here."""
    on_disk = bool(root) and os.path.isdir(root)
    ages = bool(dates) and stale_after_days > 0 and today is not None
    flags: dict[str, tuple[bool, bool]] = {}
    if not on_disk and not ages:
        return text, flags
    out, project, memo = [], False, {}
    for line in text.split("\n"):
        if line.startswith("# Scope: "):
            project = line.startswith("# Scope: project ")
        if project and line.lstrip().startswith(("- ", "* ")) and not line.lstrip()[2:].startswith("not shown here:"):
            notes = stale_reasons(line, root, memo) if on_disk else []
            stale = bool(notes)
            notes = [f"may be stale: {'; '.join(notes[:2])}"] if notes else []
            days = age_days(line, dates, today) if ages else None
            if days is not None and days > stale_after_days:
                notes.append(f"learned {days} days ago")
            if notes:
                line = f"{line} ({'; '.join(notes)})"
                flags[line] = (stale, days is not None and days > stale_after_days)
        out.append(line)
    return "\n".join(out), flags
