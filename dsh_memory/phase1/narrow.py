"""Runs that say nothing of how to run the project: a check narrowed to one case or a few files
(`NARROW`, said already by the same tool's broader run), a template, a run on one commit or
session id, a try on a scratch file (in the temp folder, or one the session removed later).
`commands` and `shields` leave them out; Phase 2's checks read `NARROW` too.
"""

from __future__ import annotations

import re

from dsh_memory.phase1.command_line import core

# A check narrowed to one test or a few files (`pytest tests/a.py::test_b`, `go test ./x/... -run TestY`,
# `mvn test -Dtest=FooTest`, `gradle test --tests x`, `pytest -k name`, `cargo test name -- --nocapture`,
# `ruff check --fix x.py`): that moment's focus, said already by the same tool's broader run.
_CARGO_VALUE = "".join(  # (cargo test's options that take a value: `-p codex-core` names a package, no test)
    rf"(?<!\s{o}\s)"
    for o in (
        "-p",
        "--package",
        "-F",
        "--features",
        "--test",
        "--bin",
        "--example",
        "--bench",
        "--target",
        "--target-dir",
        "--manifest-path",
        "-j",
        "--jobs",
        "--profile",
        "--color",
    )
)
ONE_CASE = re.compile(
    r"::\w|\s(?:-run|--test-id|--testNamePattern|--grep|--tests|-Dtest|-Dit\.test)[\s=]\S|(?:^|\s)\w*FILTER=\S"
    r"|\bpytest\b[^|;&]*\s-k[\s=]?\S"
    rf"|\bcargo\s+test\b[^|;&]*?\s{_CARGO_VALUE}(?!-)[A-Za-z_][\w:]*(?=\s|$)"
)  # a run of one case, not a way to run
NARROW = re.compile(
    ONE_CASE.pattern
    + r"|(?<![\w/.-])[\w./-]+\.(?:py|ts|tsx|js|jsx|mjs|cjs|go|rs|rb|java|kt|php|cs|swift|c|cc|cpp|h|vue|svelte|"
    r"css|scss|md|mdx|ya?ml|json)(?![\w/-])"
)
_RUNNERS = {
    "uv",
    "uvx",
    "run",
    "python",
    "python3",
    "poetry",
    "pipenv",
    "pdm",
    "hatch",
    "npx",
    "bunx",
    "rtk",
    "exec",
    "bundle",
}


def _tool(cmd: str) -> str:
    """The program a command runs under its runners (`uv run pytest …`, `python -m pytest …`: pytest)."""
    words = [w for w in core(cmd).split() if not w.startswith("-") and w not in _RUNNERS]
    return words[0] if words else ""


def _verb(cmd: str) -> str:
    """A command's first two words, flags aside (`go test`, `go vet`)."""
    return " ".join([w for w in core(cmd).split() if not w.startswith("-")][:2])


_ALL_PACKAGES = re.compile(r"\s\./\.\.\.(?=\s|$)")
_SOME_PACKAGES = re.compile(r"\s\./[\w-][\w./-]*(?=\s|$)")


def narrowed(checks: list[tuple[str, str]]) -> set[str]:
    """The narrow checks (`NARROW`) among `checks` ((line, what its package script ran), the best
    first) that say nothing more: those whose tool also ran broader (`bunx biome check src/a.ts`
    beside `bun run lint` (runs `biome check .`)), and all but the first of a tool that never did
    (one `pytest tests/a.py::test_b` says how its tests run; four say which ones were that moment's);
    and a command run on some packages (`go vet ./cmd/x/`) where it also ran on all (`go vet ./...`)."""
    broad = {_tool(c) for line, script in checks if not NARROW.search(line) for c in (line, script) if c}
    everything = {_verb(line) for line, _ in checks if _ALL_PACKAGES.search(line)}  # `go test ./...`
    out, seen = set(), set()
    for line, _ in checks:
        if _verb(line) in everything and _SOME_PACKAGES.search(line):
            out.add(line)  # `go test ./cmd/x/` beside `go test ./...`
        elif NARROW.search(line):
            if _tool(line) in broad or _tool(line) in seen:
                out.add(line)
            seen.add(_tool(line))
    return out


# A template, not a command that ran: `gofmt -l <files>`, `pytest -k <name>` (a subagent's prompt).
PLACEHOLDER = re.compile(r"(?:^|\s)<[A-Za-z][\w .-]{0,30}>(?=\s|$)")
# A run on one thing of that day: a commit hash, checkpoint or session id as an argument
# (`go run ./cmd/x explain abc123`), not on a port or a file.
ONE_ID = re.compile(
    r"\s(?=[\w-]*\d)(?=[\w-]*[a-f])(?:[0-9a-f]{6,40}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})(?=\s|$)"
)
# … or on a scratch file of that day: `cargo run -- /tmp/test_main.obs` (not `go build -o /tmp/app`, its output)
_SCRATCH = re.compile(r"""["']?(?:/tmp/|/private/tmp/|/var/folders/|\$TMPDIR/)""")


def on_scratch(cmd: str, removed: set[str]) -> bool:
    """Does `cmd` run on a file in the system's temp folder, or on one of `removed` (the files the
    session removed later): one it wrote to try something?"""
    words = core(cmd).split()
    return any(
        (_SCRATCH.match(w) and not re.match(r"-(?!-$)", words[n - 1])) or w.strip("'\"") in removed
        for n, w in enumerate(words)
        if n
    )


_RM = re.compile(r"(?:^|&&|;)\s*rm\s+([^|;&]+)")
_A_FILE = re.compile(r"[\w./-]*[\w-]\.[A-Za-z]\w{0,5}")  # a file's name with its extension (`t.obs`), no folder


def scratch_runs(lines: list[str]) -> list[bool]:
    """For each command line of a session, whether it runs on a scratch file (`on_scratch`): one in
    the temp folder, or one a later `rm` removed (`cargo run -- t.obs`, then `rm -f t.obs`): a try,
    no way to run the project and no lesson."""
    out: list[bool] = []
    later: set[str] = set()
    for line in reversed(lines):
        out.append(on_scratch(line, later))
        for m in _RM.finditer(core(line)):
            later.update(w.strip("'\"") for w in m[1].split() if _A_FILE.fullmatch(w.strip("'\"")))
    return out[::-1]
