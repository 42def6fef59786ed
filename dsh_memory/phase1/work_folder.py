"""The folder a session worked in, when it is not the one it was started from.

An agent started in a home folder (`~`) or in one repository sometimes does all its work in
another: every command runs there (Codex's `workdir`, Claude's record `cwd`, a leading `cd`), every
edit writes there. Filed under the folder it was started from, such a session's memory lands in
the wrong project, and its commands read as another repository's (`commands.ELSEWHERE`), so none
is kept. `work_folder` names the other folder when most of what the session did (`SHARE` of its
commands and edits, at least `MIN_ACTIONS`) ran under it: a sibling of the session's folder, or a
child of a home folder (a child of a project's own folder stays the project's). POSIX paths only;
never a temporary or hidden folder.
"""

from __future__ import annotations

import posixpath
import re

from dsh_memory.models import EventKind, Session
from dsh_memory.phase1.codemap import edits_of
from dsh_memory.phase1.command_line import LEAD_CD
from dsh_memory.phase1.outcome import ran_in, shell_line

MIN_ACTIONS = 10
SHARE = 0.8
HOME = re.compile(r"^/(?:Users|home)/[^/]+$|^/root$")
_NOWHERE = re.compile(r"^/(?:tmp|var|private|dev|proc)(?:/|$)|/\.[^/]+$")  # a scratch or a tool's hidden folder


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def _places(session: Session, cwd: str) -> list[str]:
    """Where each command ran and each edit wrote, as folders."""
    out = []
    for e in session.events:
        if e.kind is not EventKind.TOOL_CALL:
            continue
        line = shell_line(e)
        if line is not None:
            where = ran_in(e) or cwd
            m = LEAD_CD.match(line)
            target = m and (m[1] or m[2] or m[3])
            if target:
                where = target if target.startswith("/") else posixpath.join(where, target)
            out.append(posixpath.normpath(where))
        for path, _ in edits_of(e.tool_name or "", e.arguments):
            out.append(posixpath.dirname(posixpath.normpath(path)) if path.startswith("/") else cwd)
    return out


def work_folder(session: Session) -> str | None:
    """The folder most of `session`'s work ran under, when it is not the session's own (see the
    module docstring); None otherwise."""
    cwd = (session.cwd or "").rstrip("/")
    if not cwd.startswith("/"):
        return None
    places = _places(session, cwd)
    if len(places) < MIN_ACTIONS:
        return None
    home = bool(HOME.match(cwd))
    tops: dict[str, list[str]] = {}
    for p in places:
        if p == cwd or (_under(p, cwd) and not home):
            continue  # the session's own folder (a home's children are projects of their own)
        base = cwd if home else posixpath.commonpath([p, cwd])
        first = p[len(base) :].strip("/").split("/")[0]
        if first:
            tops.setdefault(posixpath.join(base, first), []).append(p)
    if not tops:
        return None
    top, there = max(tops.items(), key=lambda kv: len(kv[1]))
    if len(there) < SHARE * len(places) or _NOWHERE.search(top):
        return None
    return posixpath.commonpath(there)  # as deep as all of it ran (`~/src/shop`, not `~/src`)
