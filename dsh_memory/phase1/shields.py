"""Failure shields: a command that failed with an informative error and what then overcame it, or,
when nothing in the session did, the fix the agent advised. A failure nothing fixed or advised on,
or that passed on a bare rerun, is no shield. Read from the runs `phase1/commands.py` collects.
A shield's commands are shown whole (`shown`): a next session copies them, and a command cut short
is a wrong one; the error text, only quoted, is what gets cut.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from pydantic import BaseModel

from dsh_memory.phase1.clean import CODE, EXPLORATION, TEST_FILE, clip_prose
from dsh_memory.phase1.command_line import core, family, first_command, unpiped, wrapped
from dsh_memory.phase1.commands import BUILD, EXPLORE, FORMATS, MODIFY, SETUP, Run, is_probe
from dsh_memory.phase1.paths import is_absolute

MAX_SHIELDS = 3
MAX_BETWEEN = 8  # runs between a failure and the run that worked for one of them to be the fix


class Shield(BaseModel):
    command: str
    error: str
    cause: str = ""  # the agent's explanation
    fix: str = ""  # what made it work: a command, "editing X", "escalated sandbox permissions"
    advised: bool = False  # the fix is the agent's advice (nothing in the session ran it)


def _same_command(a: str, b: str) -> bool:
    """`ssh-add KEY` and `ssh-add -l` run one command (one's words lead the other's); `erk exec
    impl-signal` and `erk exec setup-impl` are two subcommands of one tool."""
    fa, fb = family(a).split(), family(b).split()
    n = min(len(fa), len(fb))
    return n > 0 and fa[:n] == fb[:n]


def _targets(cmd: str) -> set[str]:
    """The issue, PR or run numbers a command acts on (`gh issue close 7839`, `--issue #8124`)."""
    try:
        words = shlex.split(core(cmd))
    except ValueError:
        words = core(cmd).split()
    return {w.lstrip("#") for w in words[2:] if re.fullmatch(r"#?\d{3,}", w)}  # not `sleep 180`


def _wrapped(a: str, b: str) -> bool:
    """One command is the other run through a wrapper (`rtk bun run test` / `bun run test`,
    `pytest -q` / `uv run pytest -q`): the shorter's words, two at least, end the longer's."""
    wa, wb = unpiped(a).split(), unpiped(b).split()
    short, long_ = sorted((wa, wb), key=len)
    if {"&&", "||", ";"} & set(long_) or any(w.endswith(";") for w in long_):
        return False  # `bun run test && bun run lint` is a chain, not `bun run lint` wrapped
    return len(short) >= 2 and len(long_) > len(short) and long_[-len(short) :] == short


_CHAINED = re.compile(r"&&|\|\||;")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")  # an argument: its `;` chains nothing (`python -c "import a; …"`)
MAX_COMMAND_CHARS = 200  # a shield's command and fix are shown whole within this, or no shield
_LONG_QUOTED = re.compile(r"(\"|')([^\"'\n]{41,})\1")
_CODE_CHARS = re.compile(r"[{}\[\]|$=\\<>]|\.\w")  # a query or an expression, not prose
# … but what a prose flag carries is prose, whatever it holds (a PR body's code span, a selector)
_PROSE_ARG = re.compile(
    r"""(\s(?:--body|--title|--message|--notes|--description|--subject|--comment|-m)(?:\s+|=))"""
    r"""("(?:[^"\\]|\\.){41,}"|'[^']{41,}')"""
)


def shown(cmd: str) -> str:
    """`cmd` as a shield says it, whole: a long quoted prose argument (a comment body, a commit
    message, what `--body` or `-m` carries) becomes `"…"`, its shape being what a next session
    needs, while a query or an expression (`--jq '{branch: .headRefName}'`) stays as typed; "" when
    it is still longer than MAX_COMMAND_CHARS (a command cut short is a wrong command to copy)."""
    s = " ".join(cmd.split())
    if not wrapped(s):  # (a wrapper's quoted script is the command itself: `ssh h "opkg remove a b c"`)
        s = _PROSE_ARG.sub(lambda m: f'{m[1]}"…"', s)
        s = _LONG_QUOTED.sub(lambda m: m[0] if _CODE_CHARS.search(m[2]) else f"{m[1]}…{m[1]}", s)
    return s if len(s) <= MAX_COMMAND_CHARS else ""


def _run_fix(cmd: str) -> str:
    """A fix that is a command: `shown` in a code span, or "" when it cannot be shown whole."""
    said = shown(cmd)
    return f"`{said}`" if said else ""


# Code that does not parse: the agent's own typo when an edit fixed it.
_TYPO = re.compile(r"\b(SyntaxError|IndentationError|TabError|ParseError|Unexpected token)\b")


HELP = re.compile(r"(?:^|\s)(?:--help|-h|help|--version)(?=\s|$)")  # `x --help`, `x help run`

# A command a tool refused to parse: a lesson also for a question to it (`bd dolt status --short`).
USAGE = re.compile(
    r"unknown (?:flag|option|command|argument|subcommand)|unexpected argument|unrecognized|invalid (?:flag|option)"
    r"|accepts (?:at most|at least|exactly|no)\b|^usage:|no such (?:option|command|subcommand)",
    re.I,
)


def _kind(error: str) -> str:
    """What kind of failure an error line reports (`EOFError`, `fatal`, `×`): one command that failed
    two ways, each overcome its own way, is two shields."""
    m = re.match(r"\W*([\w.-]+)", error)
    return m.group(1).lower() if m else ""


# "`git push` failed …; fixed by `git push --force`": obeyed in a later session, it loses work.
DESTRUCTIVE = re.compile(
    r"\bgit\s+push\b[^`]*\s(?:-f|--force(?:-with-lease)?)\b|\bgit\s+reset\s+--hard\b|\bgit\s+clean\s+-\w*f"
    r"|\bgit\s+checkout\s+(?:--\s|\.)|\bgit\s+restore\s|\brm\s+-\w*[rf]|\bgit\s+branch\s+-D\b|--no-verify\b"
)


# A merge or rebase that stopped on conflicting changes: the state of that day's branches, resolved by
# hand, not a command's lesson ("`git merge origin/x` failed: `Automatic merge failed; …`").
CONFLICT = re.compile(
    r"\bAutomatic merge failed\b|^CONFLICT \(|\bMerge conflict in\b|\bcould not apply [0-9a-f]{7,}|\bResolve all conflicts\b"
)


def _shield(r: Run, why: str, fix: str, advised: bool = False) -> Shield | None:
    """The shield of the failed run `r`: its command (`shown`), its error, the agent's explanation
    up to its last whole clause; None when the command or the fix cannot be shown whole."""
    command = shown(r.line)
    if not command or not fix or DESTRUCTIVE.search(fix) or CONFLICT.search(r.error):
        return None  # a fix that throws work away is that moment's call, never a lesson to repeat
    return Shield(command=command, error=r.error, cause=clip_prose(why, 220), fix=fix, advised=advised)


def _action(cmd: str) -> str:
    """The word after a command's family when it is a plain word: `erk exec impl-signal started`
    and `… ended` are two actions of one family, `git push origin feat` and `… main` two targets."""
    words = [w for w in unpiped(cmd).split() if not w.startswith("-")]
    return words[3] if len(words) > 3 and re.fullmatch(r"[a-z][a-z-]+", words[3]) else ""


def _same_action(a: str, b: str) -> bool:
    """`a` does what `b` meant to: the same action, or another given the same options with other
    values (`… impl-signal ended --session-id=<id>` after `… started --session-id="$UNSET"` failed
    shows how to pass it; a bare `… ended` fixes nothing)."""
    if _action(a) == _action(b) or not (_action(a) and _action(b)):
        return True
    options = [{w.split("=")[0] for w in unpiped(c).split() if w.startswith("-")} for c in (a, b)]
    return options[0] == options[1] != set()


def _parts(cmd: str) -> list[str]:
    return [p.strip() for p in _CHAINED.split(_QUOTED.sub('""', core(cmd))) if p.strip()]


def _ends_in_a_look(cmd: str) -> bool:
    """A chain whose last command only looks (`git fetch origin main && git log origin/main -8`)."""
    parts = _parts(cmd)
    return bool(parts) and bool(EXPLORATION.match(parts[-1]))


def _only_looks(cmd: str) -> bool:
    """A wait and a look (`sleep 60 && tail -3 train_log.txt`): what it failed on is where it looked."""
    return all(EXPLORATION.match(p) or re.match(r"sleep\s+[\d.]+[smh]?$", p) for p in _parts(cmd))


def _worked_later(runs: list[Run], i: int) -> Run | None:
    """The run after `runs[i]` (which failed) that did what it meant to: the same command on the
    same target (another issue's run is no fix); nearby, the same tool's other form, the command
    with or without a wrapper, or another tool on the same issue/PR number (not a look at the help)."""
    r, fam = runs[i], family(runs[i].line)
    targets, asked = _targets(r.line), is_probe(r.line)
    for x in runs[i + 1 :]:
        if x.failed or (is_probe(x.line) and not asked):
            continue  # `bun x eval run --help` after `bun x eval --filter y` failed only asked how
        if family(x.line) == fam and (not targets or targets & _targets(x.line)):
            if _ends_in_a_look(x.line) and not _ends_in_a_look(r.line):
                continue  # `git fetch && git rebase` failed; `git fetch && git log` did not rebase
            if _same_action(x.line, r.line):
                return x
    for x in runs[i + 1 : i + 8]:
        if x.failed or family(x.line) == fam or HELP.search(core(x.line)):
            continue  # a look at the help (`marvin --help`) did not do the work …
        same_issue = bool(targets and targets & _targets(x.line))
        if is_probe(x.line) and not same_issue:
            continue  # … nor a look elsewhere; a look at the same issue starts the workaround (`gh pr view 8124`)
        if not BUILD.match(core(r.line)) and _same_command(x.line, r.line):  # `ssh-add -l`, then `ssh-add KEY`
            return x
        if _wrapped(x.line, r.line) or same_issue:
            return x
        if x.background and not r.background and first_command(x.line) == first_command(r.line):
            return x  # refused in the foreground (`Blocked: sleep 180 …`), run in the background
    return None


# A linter's or type checker's run (and a test file, `clean.TEST_FILE`): a lint finding in new code, or a test the
# session wrote and then corrected, is the check doing its job (a circular import the tests hit is not).
LINT = re.compile(
    r"\b(lint|eslint|biome|ruff|flake8|pylint|mypy|pyright|ty|tsc|typecheck|type-check|clippy|vet|prettier|black|fmt)\b"
)


# A test suite's run, and a file that sets up how things build and run (not the code they build)
_TESTS = re.compile(r"(?:\b|py|vi|unit|[_.:-])test|\b(?:spec|rspec|jest|mocha|phpunit)\b", re.I)
_CONFIG_FILE = re.compile(
    r"(?:^|/)(?:[^/]*config[^/]*|conftest\.py|setup\.cfg|package\.json|[^/]*\.(?:ini|toml|cfg)|\.[\w.-]*rc(?:\.\w+)?"
    r"|Makefile|Dockerfile|\.env[\w.-]*)$",
    re.I,
)


def _worked_on(r: Run, edited: list[tuple[int, str, str]]) -> bool:
    """A test suite failed on the code the session edited next (not on how the project is set up: a
    config file edited is a lesson): the work at hand, a lesson only where the agent said why."""
    return bool(_TESTS.search(core(r.line))) and not any(_CONFIG_FILE.search(path) for _, path, _ in edited)


def _own(r: Run, edited: list[tuple[int, str, str]], edits: list[tuple[int, str, str]]) -> bool:
    """The failure of `r` is the check doing its job: every file the fix edited is a test file (a
    test brought in line with the change), or a linter's finding in files the session had edited."""
    if all(TEST_FILE.search(path) for _, path, _ in edited):
        return True
    before = {path for at, path, _ in edits if at < r.seq}
    return bool(LINT.search(core(r.line))) and all(path in before for _, path, _ in edited)


def shields(runs: list[Run], edits: list[tuple[int, str, str]], cause: Callable[[int, int, str], str]) -> list[Shield]:
    """Failures that were overcome, one per command: an informative error, and what made the
    command work (escalated sandbox permissions, a run in the background, a setup command, an edit
    in the project, another form of the command); `cause(failed_seq, worked_seq, failure)` is the
    agent's explanation in between of that failure (command and error)."""
    out: list[Shield] = []
    seen: set[tuple[str, str]] = set()
    for i, r in enumerate(runs):
        fam = family(r.line)
        if not r.failed or not r.error or (fam, _kind(r.error)) in seen or EXPLORATION.match(core(r.line)):
            continue
        if r.scratch:
            continue  # a try on a scratch file (`cargo run -- /tmp/t.obs`): the work in progress, not a lesson
        if is_probe(r.line) and not USAGE.search(r.error):
            continue  # a question's answer (`npm view x@1.2.0` → E404: not published), not a lesson
        if len(_CHAINED.split(_QUOTED.sub("", core(r.line)))) > 2:
            continue  # a script of that moment (`git add … && git commit --amend … && rm …`), not a command to repeat
        later = _worked_later(runs, i)
        if later is None:
            continue  # nothing made it work: no shield
        between = [x for x in runs[i + 1 :] if x.seq < later.seq and not x.failed and family(x.line) != fam]
        far = len(between) > MAX_BETWEEN  # far apart: what ran or was edited in between was other work
        setup = [
            x.line
            for x in ([] if far else between)
            if MODIFY.match(core(x.line)) or (SETUP.search(core(x.line)) and not EXPLORE.match(core(x.line)))
            if LINT.search(core(r.line)) or not FORMATS.search(core(x.line))  # a formatter fixes no failing test
        ]
        edited = [] if far else [e for e in edits if r.seq < e[0] < later.seq and not is_absolute(e[1])]
        why = cause(r.seq, runs[i + 1].seq if far else later.seq, f"{r.line} {r.error}")
        if later.escalated and not r.escalated:
            fix = "running it with escalated sandbox permissions"
        elif later.background and not r.background:
            fix = "running it in the background (the shell tool's `run_in_background`)"
        elif _only_looks(r.line):
            continue  # … and a look elsewhere is no fix of a lasting kind
        elif _wrapped(later.line, r.line):
            fix = _run_fix(later.line)  # `rtk bun run test` → `bun run test`, whatever was edited between
        elif setup:
            fix = _run_fix(setup[-1])
        elif edited and (_TYPO.search(r.error) or _own(r, edited, edits) or (_worked_on(r, edited) and not why)):
            continue  # the agent's own mistake (a typo; a check failing on what it wrote), fixed where it made it
        elif edited:
            fix = "editing " + ", ".join(f"`{p}`" for p in dict.fromkeys(e[1] for e in edited[:3]))
            fix += f" ({edited[-1][2]})" if edited[-1][2] else ""  # the last edit before it worked
        elif unpiped(later.line) != unpiped(r.line):
            fix = _run_fix(later.line)
        else:
            continue  # the same command passed on a bare rerun: flaky, not a shield
        shield = _shield(r, why, fix)
        if shield is not None and not any(family(o.command) == fam and o.fix == fix for o in out):
            seen.add((fam, _kind(r.error)))
            out.append(shield)
    return out[:MAX_SHIELDS]


ADVICE = re.compile(
    r"^(?:then\s+|so\s+)?(run|use|set|add|install|pass|call|delete|remove|export|re-?run|stamp|create)\b[^.!?]*`[^`]+`",
    re.I,
)


def _runs_again(advice: str, failed: str) -> bool:
    """The advice's command is the one that failed, or the same with fewer words ("Then re-run:
    `npm install`" after `npm install --cache .npm-cache` failed): the step after the fix, not one."""
    code = CODE.search(advice)
    if code is None:
        return False
    said, ran = core(code[1]).split(), core(failed).split()
    return bool(said) and said[0] == ran[0] and set(said) <= set(ran)


def advised(
    runs: list[Run], messages: list[tuple[int, str, bool]], cause: Callable[[int, int, str], str], have: list[Shield]
) -> list[Shield]:
    """Failures nothing in the session overcame but that the agent's next words tell how to fix (an
    imperative that names a command: "Run `alembic stamp head` once, then `make migrate` works"):
    a shield whose fix is that advice, with the agent's explanation when it gave one."""
    out: list[Shield] = []
    done = {family(s.command) for s in have}
    for i, r in enumerate(runs):
        fam = family(r.line)
        if not r.failed or not r.error or fam in done or EXPLORATION.match(core(r.line)):
            continue
        if any(not x.failed and family(x.line) == fam for x in runs[i + 1 :]):
            continue  # it worked later: `shields` judged it
        until = next((x.seq for x in runs[i + 1 :]), 1 << 62)
        said = next(
            (
                s
                for seq, s, _ in messages
                if r.seq < seq < until and ADVICE.match(s) and not _runs_again(s, r.line) and not s.endswith(":")
            ),  # (advice that leads into what it shows next says nothing without it)
            "",
        )
        advice = clip_prose(said, 220)
        if not CODE.search(advice):
            continue  # no advice, or none left whole within the bound
        why = cause(r.seq, until, f"{r.line} {r.error}")
        shield = _shield(r, why if why != said else "", advice, advised=True)
        if shield is not None:
            done.add(fam)
            out.append(shield)
    return out[: max(0, MAX_SHIELDS - len(have))]
