"""Warnings a project's own files give whoever reads them, picked from the files a session read.

Developers leave tripwires for the next reader (`# CRITICAL: …`, `<!-- AUTO-GENERATED FILE - DO
NOT EDIT -->`); a next session needs them before it edits, not after. Found in what read tools
returned (a Read call, `cat` / `sed -n` / `nl` / `head`): a comment opening with a shouted marker
and the lines that continue it; in a file's first lines a generated-file banner or a NOTE; the
rule paragraph of its opening docstring. Only the project's own files, at most MAX_TRIPWIRES.
"""

from __future__ import annotations

import re
import shlex

from dsh_memory.phase1.clean import clip_prose
from dsh_memory.phase1.command_line import core
from dsh_memory.phase1.near import restates
from dsh_memory.phase1.paths import is_absolute

MAX_TRIPWIRES = 3
MAX_WARNING_CHARS = 300  # a rule paragraph's few sentences; a longer one ends at its last whole clause
MAX_READ = 400_000  # the characters of one read that are scanned
_NUMBERED = re.compile(r"^\s*(\d+)(?:→|\t)")  # Read's `  12→…`, `cat -n` / `nl`'s `    12\t…`
_COMMENT = re.compile(r"^\s*(?:#+|//+|/\*+|\*+(?!\*)|<!--|--|;+)\s?(.*?)\s*(?:\*/|-->)?\s*$")
_SHOUT = re.compile(r"^(?:\*\*)?(CRITICAL|IMPORTANT|WARNING|CAUTION|DANGER|DO NOT (?:EDIT|MODIFY|CHANGE|COMMIT))\b")
_NOTE = re.compile(r"^(NOTE)\b\s*[:!-]")
_RULE = re.compile(  # an imperative sentence or a must: "Don't swallow…", "Callers must hold the lock"
    r"(?:^|[.!:]\s+)(?:don'?t|do not|never|always|avoid)\b|\bmust\b|\bshould (?:not|never|always)\b", re.I
)
HEAD_LINES = 12  # a file's opening lines: its banner, its opening NOTE
_BANNER = re.compile(r"\b(auto-?generated|do not edit|generated (?:file|code|by|from))\b", re.I)
_STAMP = re.compile(
    r"(?:[\s,;]+(?:date|at|on)\s*:?)?\s*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|\s?[+-]\d{2}:?\d{2})?",
    re.I,
)
_READERS = re.compile(r"^(cat|bat|nl|head|sed\s+-n)\b")
_ELSEWHERE = re.compile(
    r"(^|/)(node_modules|\.venv|venv|site-packages|dist|build|vendor|third_party|\.git|target|__pycache__)/"
    # an agent's own skills, commands and prompts: its instructions for that task, shown to it when it runs it
    r"|(^|/)\.(?:claude|codex|cursor|gemini|agents|windsurf|opencode|github/prompts)/.*\.mdx?$"
)


def read_path(tool: str, arguments: object, line: str | None) -> str | None:
    """The file a read tool call returned, or None: a Read/view call's path, or the one file a
    `cat` / `sed -n` / `nl` / `head` command printed (not a pipeline of several)."""
    if line is None:
        if tool in ("read", "view", "read_file") and isinstance(arguments, dict):
            path = arguments.get("file_path") or arguments.get("path")
            return path if isinstance(path, str) and path else None
        return None
    c = core(line)
    if not _READERS.match(c) or re.search(r"[;&]|\|\s*(?!sed\s+-n|head)\S", c):
        return None
    try:
        words = shlex.split(c.split("|")[0])
    except ValueError:
        return None
    files = [w for w in words[1:] if not w.startswith("-") and re.search(r"[/.]\w", w) and not re.match(r"^\d", w)]
    return files[-1] if len(files) == 1 else None


def _lines(text: str) -> list[tuple[int | None, str]]:
    numbered = [(ln, _NUMBERED.match(ln)) for ln in text[:MAX_READ].splitlines()]
    return [(int(m.group(1)), ln[m.end() :]) if m else (None, ln) for ln, m in numbered]


def _comment(s: str) -> str | None:
    m = _COMMENT.match(s)
    return m.group(1).strip() if m and m.group(1).strip() else None


def found_in(text: str) -> list[tuple[int, str]]:
    """(rank, warning) for each tripwire in one read of a file: rank 0 a generated-file banner or
    a DO NOT / CRITICAL comment, 1 the others."""
    lines = _lines(text)
    out: list[tuple[int, str]] = []
    for i, (num, s) in enumerate(lines):
        body = _comment(s)
        if body is None:
            continue
        top = (num or i + 1) <= HEAD_LINES
        head = top and _BANNER.search(body)
        shout = _SHOUT.match(body) or (top and _NOTE.match(body))  # a file's opening NOTE is about all of it
        if not (head or shout):
            continue
        said = [body]
        for _, nxt in lines[i + 1 : i + 3]:  # the comment lines that go on with it
            more = _comment(nxt)
            if more is None or _SHOUT.match(more):
                break
            said.append(more)
        joined = " ".join(said).replace("**", "")
        after = _comment(lines[i + len(said)][1]) if i + len(said) < len(lines) else None
        if len(said) == 3 and after and not _SHOUT.match(after):
            joined = re.sub(r"(?<=[.!?])\s+[^.!?]*$", "", joined)  # it goes on: not "… These functions provide"
        rank = 0 if head or (shout and shout.group(1).upper() in ("CRITICAL", "DANGER")) or "NOT" in body[:12] else 1
        warning = _said_whole(clip_prose(joined, MAX_WARNING_CHARS))
        if warning:
            out.append((rank, warning))
        if head:
            break  # one banner per file; its shouted lines say the same
    rule = clip_prose(_docstring_rule(lines) or "", MAX_WARNING_CHARS)  # whole, or none: half a rule is no rule
    if rule:
        out.append((1, rule))
    return out


def _said_whole(warning: str) -> str:
    """A warning that says something to obey: not a shouted heading ("CRITICAL: Extracting File
    Paths"), and without a last sentence that leads into a list it does not carry ("… Do NOT:")."""
    warning = re.sub(r"(?<=[.!])\s+[^.!]*:$", "", warning)
    rest = re.sub(r"^[^:]{0,40}:\s*", "", warning)
    words = re.findall(r"[A-Za-z]{4,}", rest)
    heading = len(rest.split()) <= 8 and all(w[0].isupper() for w in words) and not re.search(r"[.!`]", rest)
    if warning.endswith(":") or (heading and not _RULE.search(rest) and not _BANNER.search(warning)):
        return ""  # (a banner is no heading: "AUTO-GENERATED FILE - DO NOT EDIT DIRECTLY")
    if len(re.findall(r"[A-Za-z]{2,}", _SHOUT.sub("", warning))) < 2 and not _BANNER.search(warning):
        return ""  # the shout alone ("IMPORTANT!"): what to mind is in the lines it does not carry
    if _HISTORY.match(rest) and not _RULE.search(rest):
        return ""  # how the code came to be ("IMPORTANT: We used to ignore these events …"): no warning
    return warning


_HISTORY = re.compile(
    r"(?:(?:we|this|it|they|the code) used to|previously|historically|in the past|originally)\b", re.I
)


def _docstring_rule(lines: list[tuple[int | None, str]]) -> str | None:
    """The paragraph of a file's opening docstring that lays down a rule ("Don't swallow
    exceptions…", "Never import …"), when the read started at the file's top."""
    if not lines or (lines[0][0] or 1) != 1:
        return None
    body: list[str] = []
    for n, (_, s) in enumerate(lines[:60]):
        t = s.strip()
        if not body and (not t or t.startswith(("#", "//"))):
            continue  # a shebang, a comment, a blank line before the docstring
        if not body:
            if not t.startswith(('"""', "'''")) or n > 12:
                return None
            if len(t) >= 6 and t.endswith(t[:3]):  # a one-line docstring
                body.append(t[3:-3])
                break
            body.append(t[3:])
            continue
        if t.endswith(('"""', "'''")):
            body.append(t[:-3])
            break
        body.append(t)
    paragraphs = " ".join(ln if ln else "\n" for ln in body).split("\n")
    return next((" ".join(p.split()) for p in paragraphs if _RULE.search(p)), None)


def tripwires(reads: list[tuple[str, str]], edited: list[str]) -> list[str]:
    """The warnings of the project's files in `reads` ((relative path, text) in session order):
    generated-file banners and DO NOT / CRITICAL comments first, files the session also edited
    first within each, each warning once."""
    pool: dict[str, tuple[int, int, int, str, str]] = {}  # each warning as its first read says it
    for n, (path, text) in enumerate(reads):
        if is_absolute(path) or _ELSEWHERE.search(path):
            continue  # not this project's file
        for rank, said in found_in(text):
            said = _STAMP.sub("", said).strip()  # a banner says when it was generated: the same warning
            pool.setdefault(said, (rank, 0 if path in edited else 1, n, path, said))
    kept: list[tuple[str, str]] = []
    for _, _, _, path, said in sorted(pool.values()):
        # two comments of one file that say the same ("This reads from the worktree …", "We read from worktree …")
        if not any(path == p and restates(said, s) for p, s in kept):
            kept.append((path, said))
    return [f"`{path}`: {said}" for path, said in kept[:MAX_TRIPWIRES]]
