"""Where the session put things: the files it changed and the names it defined in them.

A next session asks "where does X live?" before anything else, and the session's own edits answer
it without a model: each edit tool call names a file and carries the text written there. Read from
the tool calls' arguments (never the rendered transcript); tests and files outside the session's
folder name no place in this project and are left out.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.phase1.clean import TEST_FILE
from dsh_memory.phase1.commands import is_build_command
from dsh_memory.phase1.facts import BULLET
from dsh_memory.phase1.paths import is_absolute, relative

MAX_FILES = 6
MAX_SYMBOLS = 5
MAX_TEXT = 200_000  # the text of one edit that is scanned for names

# A definition at the start of a line, in the languages coding agents write most.
_DEF = re.compile(
    r"^[ \t]*(?:"
    r"(?:async[ \t]+)?def[ \t]+(?P<py>[A-Za-z_]\w*)"  # Python
    r"|class[ \t]+(?P<cls>[A-Za-z_]\w*)"  # Python, JS/TS, Ruby, PHP…
    r"|(?:export[ \t]+)?(?:default[ \t]+)?(?:async[ \t]+)?function\*?[ \t]+(?P<fn>[A-Za-z_$][\w$]*)"  # JS/TS
    r"|(?:export[ \t]+)(?:const|let|var)[ \t]+(?P<const>[A-Za-z_$][\w$]*)"  # exported JS/TS values
    r"|(?:export[ \t]+)?(?:declare[ \t]+)?(?:interface|type|enum)[ \t]+(?P<type>[A-Za-z_$][\w$]*)"  # TS types
    r"|func[ \t]+(?:\([^)]*\)[ \t]*)?(?P<go>[A-Za-z_]\w*)"  # Go
    r"|type[ \t]+(?P<gotype>[A-Z]\w*)[ \t]+(?:struct|interface)"  # Go types
    r"|(?:pub(?:\([^)]*\))?[ \t]+)?(?:async[ \t]+)?(?:fn|struct|enum|trait)[ \t]+(?P<rs>[A-Za-z_]\w*)"  # Rust
    r"|(?:const|let)[ \t]+(?P<comp>[A-Z]\w*)[ \t]*=[ \t]*(?:\([^)]*\)|[A-Za-z_]\w*)[ \t]*=>"  # React components
    r")",
    re.M,
)
# Files an agent reads at the start of every session: what it writes there is meant to last.
INSTRUCTION_FILE = re.compile(
    r"(^|/)(CLAUDE|AGENTS|GEMINI|CONVENTIONS)(\.local)?\.md$|(^|/)\.cursor/rules/|(^|/)\.github/copilot-instructions\.md$"
    r"|(^|/)\.(?:claude|codex|agents|cursor|github)/skills/[^/]+/SKILL\.md$"  # a project's skill
)
# The toolchain chosen, said before the commands run with it (`nvm use 20`, `conda activate x`)
_SELECTS_TOOLCHAIN = re.compile(
    r"^(?:(?:nvm|fnm|volta|pyenv|rbenv|asdf|mise)\s+(?:use|local|shell|pin)|(?:conda|mamba)\s+activate|source\s+\S*activate)\b"
)
# A command said in an instruction file's prose: a list item that is the command (`- \`npm test\``), or one to
# "run" ("1. From the repo root, run `nvm use 20`"; not "never run `x`")
_SAID_TO_RUN = re.compile(
    r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+`([^`\n]+)`|(?<![Nn]ever )(?<![Nn]ot )(?<!n't )\b(?i:run)\b:?[ \t]+`([^`\n]+)`",
    re.M,
)
AGENT_MEMORY_FILE = re.compile(r"(^|/)\.claude/projects/[^/]+/memory/(?!MEMORY\.md$)[^/]+\.md$")
_FENCE = re.compile(r"^```[ \t]*(?:bash|sh|shell|console|zsh)?[ \t]*\n(.*?)^```", re.M | re.S)
# A shell line's trailing comment, lined up in a column: `bun install      # worktrees do NOT share …`
_TRAILING_COMMENT = re.compile(r"^(\S.*?)\s+#\s+(.+)$")
_DESCRIPTION = re.compile(r"^description:[ \t]*(.+)$", re.M)
_NAME = re.compile(r"^name:[ \t]*(.+)$", re.M)
# A memory server's write (`mcp__serena__write_memory`, `save_memory`, `mcp__basic-memory__write_note`): the
# agent saving what a later session should know, as Claude Code's own memory files do (a notes app's
# `create_note` is the user's document, not the agent's memory)
MEMORY_TOOL = re.compile(r"(?=.*memor).*(?:^|_)(?:write|save|add|store|create)_?(?:memory|memories|note)$", re.I)
_NOTE_FIELDS = ("content", "text", "memory", "note")
MAX_NOTE_CHARS = 4000  # of one saved note read: a longer one is a document
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add) File: (.+)$")


class Change(BaseModel):
    path: str  # relative to the session's folder
    edits: int = 0
    symbols: list[str] = Field(default_factory=list)  # first defined first
    uses: list[str] = Field(default_factory=list)  # the other changed files its new text names


def symbols_in(text: str) -> list[str]:
    """The names `text` defines (functions, classes, types, exported constants), in order; private
    (`_x`) and dunder names last."""
    names = dict.fromkeys(next(v for v in m.groupdict().values() if v) for m in _DEF.finditer(text[:MAX_TEXT]))
    found = [n for n in names if n not in ("main", "init", "__init__", "setUp", "tearDown")]
    return sorted(found, key=lambda n: n.startswith("_"))


def _written(name: str, args: dict[str, Any]) -> str:
    """The text a file-editing tool call writes (new text only, never what it replaced)."""
    if name in ("write", "create"):
        return str(args.get("content") or args.get("file_text") or "")
    if name == "multiedit":
        return "\n".join(str(e.get("new_string") or "") for e in args.get("edits") or [] if isinstance(e, dict))
    if name == "notebookedit":
        return str(args.get("new_source") or "")
    return str(args.get("new_string") or args.get("new_str") or "")


def edits_of(name: str, arguments: Any) -> list[tuple[str, str]]:
    """(path, text written) for each file one tool call edits; [] for other calls."""
    name = name.lower()
    if name == "apply_patch":
        patch = arguments if isinstance(arguments, str) else str((arguments or {}).get("input") or arguments or "")
        out: list[tuple[str, str]] = []
        for line in patch.splitlines():
            m = _PATCH_FILE.match(line)
            if m:
                out.append((m.group(1).strip(), ""))
            elif out and line.startswith("+"):
                out[-1] = (out[-1][0], out[-1][1] + line[1:] + "\n")
        return out
    if not isinstance(arguments, dict):
        return []
    path = arguments.get("file_path") or arguments.get("path") or arguments.get("notebook_path") or ""
    return [(path, _written(name, arguments))] if isinstance(path, str) and path else []


MAX_GIST_LINES = 3
MAX_GIST_CHARS = 240


def gist(arguments: Any) -> str:
    """What a small edit changed, as a fix reads (`input("Press Enter…")` → `time.sleep(3)`): the
    lines it took out and put in, when they are a few short ones; "" for a larger edit, whose
    change a line of memory cannot say."""
    if not isinstance(arguments, dict):
        return ""
    old = str(arguments.get("old_string") or arguments.get("old_str") or "").splitlines()
    new = str(arguments.get("new_string") or arguments.get("new_str") or "").splitlines()
    gone = [ln.strip() for ln in old if ln.strip() and ln not in new]
    came = [ln.strip() for ln in new if ln.strip() and ln not in old]
    if not came or len(gone) > MAX_GIST_LINES or len(came) > MAX_GIST_LINES:
        return ""
    said = "; ".join(f"`{ln}`" for ln in came)
    out = (" ".join(f"`{ln}`" for ln in gone) + " → " + said) if gone else "added " + said
    return out if len(out) <= MAX_GIST_CHARS and out.count("`") % 2 == 0 else ""


def created_by(name: str, arguments: Any, result: str) -> list[str]:
    """The files one edit call created (a Write that says so, an apply_patch `Add File`)."""
    if name.lower() == "apply_patch":
        patch = arguments if isinstance(arguments, str) else str((arguments or {}).get("input") or arguments or "")
        return re.findall(r"^\*\*\* Add File: (.+)$", patch, re.M)
    if name.lower() in ("write", "create") and re.search(r"\bcreated\b", result[:300], re.I):
        return [path for path, _ in edits_of(name, arguments)]
    return []


_WORKTREE = re.compile(r"^\.claude/worktrees/[^/]+/")
# A tool's scratch in its dot-folder: prompts written for workers (`.workmux/prompts/x.md`), a
# brainstorm's pages, plan mode's plans, caches, logs — not the project's code (`.github/prompts/`
# is Copilot's, kept).
SCRATCH = re.compile(r"^\.(?!github/)[\w-]+/(?:[^/]+/)*(?:prompts|brainstorm|plans|scratch|tmp|cache|logs?)/")
# Prose: its code samples show names, they do not define them (a plan's `def x()`, a README's snippet).
PROSE = re.compile(r"\.(?:md|mdx|markdown|rst|txt|adoc|org)$", re.I)


def changes(edits: list[tuple[str, str]], cwd: str | None, created: set[str] = frozenset()) -> list[Change]:
    """The files of this project the session changed (tests and files elsewhere left out), the most
    edited first — a file it created counts as two edits more: it is a new place the next session
    cannot know of —, each with the names it defined there. `created` holds relative paths."""
    by: dict[str, Change] = {}
    written: dict[str, list[str]] = {}  # path -> the texts written there, for `_link`
    for path, text in edits:
        # a subagent's worktree of the project (Claude Code's `.claude/worktrees/<name>/`) holds its files
        path = _WORKTREE.sub("", relative(path, cwd))
        if is_absolute(path):
            continue  # another repository, an agent's memory folder, /tmp, a Windows temp folder
        if path.startswith("..") or TEST_FILE.search(path) or SCRATCH.match(path):
            continue
        c = by.setdefault(path, Change(path=path))
        c.edits += 1
        written.setdefault(path, []).append(text)
        if not PROSE.search(path):
            c.symbols = list(dict.fromkeys([*c.symbols, *symbols_in(text)]))
    ranked = sorted(by.values(), key=lambda c: (-bool(c.symbols), -(c.edits + 2 * (c.path in created))))[:MAX_FILES]
    _link(ranked, written)
    return ranked


def _link(changed: list[Change], written: dict[str, list[str]]) -> None:
    """Each changed file's `uses`: the other changed files its new text (`written`, by path) names
    (an import of `./ContextTreeView`, a `_load_prompt("erk_system_prompt.md")`): how the
    session's files hang together, which a next session would otherwise have to grep for."""
    names = {c.path: c.path.rsplit("/", 1)[-1] for c in changed}
    stems = {p: n.rsplit(".", 1)[0] for p, n in names.items()}
    for c in changed:
        text = "\n".join(written[c.path])
        for other, name in names.items():
            if other == c.path or len(c.uses) >= 3:
                continue
            stem = stems[other]
            if name in text or (len(stem) >= 5 and re.search(rf"(?<![\w.-]){re.escape(stem)}(?![\w-])", text)):
                c.uses.append(name)


def code_map_lines(changed: list[Change]) -> list[str]:
    """One line per changed file that defines something (`path`: the names it defines), then one
    line listing the other files changed."""
    out = [_map_line(c.path, c.symbols, 0, c.uses) for c in changed if c.symbols]
    rest = [c.path for c in changed if not c.symbols]
    if rest:
        out.append("- Also changed: " + ", ".join(f"`{p}`" for p in rest))
    return out


def _map_line(path: str, symbols: list[str], hidden: int, uses: list[str]) -> str:
    names = ", ".join(f"`{s}`" for s in symbols[:MAX_SYMBOLS])
    more = len(symbols) - MAX_SYMBOLS + hidden if len(symbols) > MAX_SYMBOLS else hidden
    said_more = f" (+{more} more)" if more > 0 else ""
    said_uses = f"; uses {', '.join(f'`{u}`' for u in uses)}" if uses else ""
    return f"- `{path}` defines {names}{said_more}{said_uses}"


_MAP_LINE = re.compile(
    r"^- `(?P<path>[^`]+)` defines (?P<names>.+?)(?: \(\+(?P<more>\d+) more\))?(?:; uses (?P<uses>.+))?$"
)


def merged_map_line(old: str, new: str) -> str | None:
    """One code map line for a file two sessions changed (Phase 2): the newer's names, then the
    older's that it does not name, and both their files used; None for lines of two files."""
    a, b = _MAP_LINE.match(old), _MAP_LINE.match(new)
    if not (a and b) or a["path"] != b["path"]:
        return None
    names = list(dict.fromkeys(re.findall(r"`([^`]+)`", b["names"]) + re.findall(r"`([^`]+)`", a["names"])))
    uses = list(dict.fromkeys(re.findall(r"`([^`]+)`", f"{b['uses'] or ''} {a['uses'] or ''}")))
    return _map_line(b["path"], names, max(int(a["more"] or 0), int(b["more"] or 0)), uses)


def documented(edits: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """What the session wrote down for later sessions: (the build/run commands in the shell blocks
    it wrote into an agent instruction file — CLAUDE.md, AGENTS.md, a project's skill … —, each with
    its trailing comment as `cmd # why`, then those its prose says to run, the descriptions of the
    agent memory notes it saved)."""
    commands: list[str] = []
    notes: list[str] = []
    for path, text in edits:
        if INSTRUCTION_FILE.search(path):
            said = [m[1] or m[2] for m in _SAID_TO_RUN.finditer(_FENCE.sub("", text))]
            for line in [ln for block in _FENCE.findall(text) for ln in block.splitlines()] + said:
                line = line.strip().removeprefix("$ ").strip()
                if m := _TRAILING_COMMENT.match(line):  # kept (it says why), the column's padding not
                    line = f"{m.group(1)} # {m.group(2)}"
                if line and not line.startswith("#") and is_build_command(line) and line not in commands:
                    commands.append(line)
        elif AGENT_MEMORY_FILE.search(path):
            m = _DESCRIPTION.search(text)
            if m:  # the note's name is its headline: "X must stay cross-agent compatible — <description>"
                said = m.group(1).strip().strip("\"'")
                name = _NAME.search(text)
                title = name.group(1).strip().strip("\"'") if name else ""
                note = f"{title} — {said}" if len(title.split()) >= 3 and title.lower() not in said.lower() else said
                notes.append(note)
    commands.sort(key=lambda c: not _SELECTS_TOOLCHAIN.match(c))  # (written after them in a later edit)
    return commands, list(dict.fromkeys(notes))


def saved_notes(tool: str, arguments: Any) -> list[str]:
    """What a memory tool call (`MEMORY_TOOL`) saved: its note's top-level items and paragraphs,
    without headings, sub-items (the detail of the item above) or the bold of a markdown note."""
    if not MEMORY_TOOL.search(tool) or not isinstance(arguments, dict):
        return []
    text = next((v for k in _NOTE_FIELDS if isinstance(v := arguments.get(k), str) and v.strip()), "")
    out = []
    for line in text[:MAX_NOTE_CHARS].splitlines():
        if not line.strip() or line[0] in " \t" or line.startswith(("#", "```", "|", ">")):
            continue
        item = BULLET.sub("", line).replace("**", "").strip().rstrip(":：").strip()
        if item:
            out.append(item)
    return out
