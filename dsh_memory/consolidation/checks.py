"""A project's one "Checks that passed" line, merged from its sessions' lines: each check once
per folder, however many ways sessions started it, said the plainest way, at most MAX_LIST_ITEMS;
its "Set up and run with" lines, one where one session's steps are among another's; and its one
list of the commands its agent instruction files give."""

from __future__ import annotations

import re

from dsh_memory.phase1.command_line import family
from dsh_memory.phase1.narrow import NARROW, narrowed
from dsh_memory.phase1.steps import DOCUMENTED

_LIST_ITEM = re.compile(r"`[^`]+`(?: \([^()]*(?:`[^`]*`[^()]*)*\))*")
_IN_FOLDER = re.compile(r"\(in `[^`]+`\)")
_RUNS = re.compile(r"\(runs `([^`]+)`\)")  # what a package script ran
MAX_LIST_ITEMS = 8  # a project's checks that passed: its standing ones, not every variant sessions ran


def merged_list(new: str, old: str) -> str:
    """`new`'s list line with the items only `old` has appended: one command of a kind (its
    `family`: `uv run pytest tests/ -x` and `uv run pytest tests/unit/ -q`; or what it runs: `npm test`
    (runs `vitest run`) and `npx vitest run`) per folder, the one that says what it runs (`bun run
    test` (runs `bun test src/`)) or else the shortest; no check a subagent was told to run that a
    session ran itself; no narrow check whose tool ran broader (`commands.narrowed`); at most
    MAX_LIST_ITEMS, the plainest."""
    head, items = new.split(":", 1)
    merged: dict[tuple[str, bool, str], str]

    def better(item: str, than: str) -> bool:
        said = ("(runs " in item, -len(item.split("`")[1]))
        return not than or said > ("(runs " in than, -len(than.split("`")[1]))

    found = _LIST_ITEM.findall(items) + _LIST_ITEM.findall(old.split(":", 1)[1])
    # the same command, then the same work started another way (`npm test`, `npx vitest run`)
    for kind in (lambda item: family(item.split("`")[1]), _runs_family):
        merged = {}
        for item in found:
            key = (kind(item), "(fixes " in item, _folder(item))
            if better(item, merged.get(key, "")):
                merged[key] = item
        found = list(merged.values())
    # what a subagent was told to run, where the session ran the same itself (its folder known)
    direct = {_runs_family(item) for item in found if "(through the " not in item}
    merged = {k: item for k, item in merged.items() if "(through the " not in item or _runs_family(item) not in direct}
    runs = {item: _RUNS.search(item) for item in merged.values()}
    narrow = narrowed([(item.split("`")[1], m.group(1) if m else "") for item, m in runs.items()])
    items = [item for item in merged.values() if item.split("`")[1] not in narrow]
    # a chain of checks the line has one by one (`cargo build && cargo test` beside both) says nothing more
    alone = {(_runs_family(item), _folder(item)) for item in items if not _CHAIN.search(item.split("`")[1])}
    items = [item for item in items if not _chained_from(item, alone)]
    best = sorted(items, key=_plain_first)[:MAX_LIST_ITEMS]  # … said in the sessions' order, a narrow one last
    return f"{head}: " + ", ".join(
        sorted((i for i in items if i in best), key=lambda i: bool(NARROW.search(i.split("`")[1])))
    )


_CHAIN = re.compile(r"\s*(?:&&|;)\s*")


def _folder(item: str) -> str:
    where = _IN_FOLDER.search(item)
    return where.group(0) if where else ""


def _chained_from(item: str, alone: set[tuple[str, str]]) -> bool:
    """Is `item` a chain (`a && b`) whose every command the list has alone, in the same folder?"""
    parts = _CHAIN.split(item.split("`")[1])
    return len(parts) > 1 and all((family(_RUNNER.sub("", p)), _folder(item)) in alone for p in parts)


# A package's own runner: `npx vitest run` runs what `npm test` (runs `vitest run`) does.
_RUNNER = re.compile(r"^(?:npx|bunx|pnpx|pnpm\s+exec|yarn\s+exec|bun\s+x|uv\s+run|poetry\s+run)\s+(?:-\S+\s+)*")


def _runs_family(item: str) -> str:
    """What a list item runs, whichever way it was started: its script's command when it says
    (`npm run test` (runs `vitest run`)), else its own, through a package runner or not."""
    m = _RUNS.search(item)
    return family(_RUNNER.sub("", m.group(1) if m else item.split("`")[1]))


def _plain_first(item: str) -> tuple:
    """A project's standing checks first: broad (not `NARROW`), one command (not a chain), a
    package script that says what it runs, short."""
    cmd = item.split("`")[1]
    return (bool(NARROW.search(cmd)), bool(re.search(r"&&|;|\|\|", cmd)), "(runs " not in item, len(cmd))


_DOCUMENTED_ITEM = re.compile(r"`[^`]+`(?: — [^;]*)?")
MAX_DOCUMENTED = 10


def merged_documented(old: str, new: str) -> str | None:
    """One list of the commands a project's instruction files give (`steps.documented_line`), the
    older line's first, each command once, at most MAX_DOCUMENTED; None unless both are such lines."""
    if not (old.startswith(DOCUMENTED) and new.startswith(DOCUMENTED)):
        return None
    items: dict[str, str] = {}
    for line in (old, new):
        for item in _DOCUMENTED_ITEM.findall(line[len(DOCUMENTED) :]):
            items.setdefault(item.split("`")[1], item.strip())
    return f"{DOCUMENTED} " + "; ".join(list(items.values())[:MAX_DOCUMENTED])


SETUP_LINE = "- Set up and run with:"


def _steps(line: str) -> set[tuple[str, str]]:
    """The steps of a "Set up and run with" line: each command's `family` with its folder, not its
    flags, how often it ran, what a package script runs nor who ran it (a subagent)."""
    out = set()
    for item in _LIST_ITEM.findall(line.split(":", 1)[1]):
        out.add((family(item.split("`")[1]), _folder(item)))
    return out


def wider(old: str, new: str) -> str | None:
    """Of two set-up lines, the one whose steps hold all of the other's (`pnpm dev` is in `pnpm dev`,
    then `pnpm api dev`); with the same steps (in another order, with other flags: `npm run dev --
    --port 4321`, through a subagent), the one that says what a script runs, else the session's own,
    else the shorter; None when neither holds the other's."""
    a, b = _steps(old), _steps(new)
    if a == b:
        return min(old, new, key=lambda line: ("(runs " not in line, "(through the " in line, len(line)))
    return old if b and b <= a else new if a and a <= b else None
