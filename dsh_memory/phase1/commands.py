"""Shell commands in a session: how the project is built and checked (how a command line reads,
`core` and `family`: `phase1/command_line.py`).

Used by `phase1/evidence.py`. A command is knowledge when it builds, tests, lints, formats, type
checks or runs the project (`make fast-ci`, `bun run test`, `uv run pytest …`), as a next session
would type it: no output redirections, no pager or `tail`, no `cd` into the session's own folder.
Exploration (ls, cat, grep, git status…), plumbing (git, gh) and one-off scaffolding (`npx
create-…`, `… init`) are not. How a run ended: `phase1/outcome.py`; what failed and what overcame
it: `phase1/shields.py`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from pydantic import BaseModel

from dsh_memory.phase1.command_line import LEAD_CD, core, family, one_line
from dsh_memory.phase1.narrow import ONE_CASE, ONE_ID, PLACEHOLDER, narrowed
from dsh_memory.phase1.paths import checkout, on_drive, spellings

MAX_COMMANDS = 6

# Commands: exploration and plumbing are not how a project is built.
EXPLORE = re.compile(
    r"^(ls|ll|cat|bat|nl|head|tail|less|more|find|fd|grep|egrep|rg|ag|sed|awk|wc|pwd|cd|echo|printf|tree|stat|du|df|"
    r"which|whereis|type|file|sort|uniq|cut|diff|cmp|xargs|true|false|sleep|date|env|export|set|unset|source|\.|"
    r"open|ps|kill|pkill|lsof|top|jq|yq|curl|wget|tee|touch|mkdir|rm|cp|mv|ln|chmod|chown|readlink|realpath|"
    r"basename|dirname|history|clear|exit|man|tldr|code|vim|vi|nano|git|gh|glab|gt|hg|svn)\b"
)
_LOOK = re.compile(r"(?:ls|cat|head|tail|grep|egrep|rg|ag|wc|find|fd|stat|tree|diff|jq|yq)\b")  # … a look in a chain
BUILD = re.compile(
    r"^(make|just|task|npm|pnpm|yarn|bun|bunx|npx|deno|node|uv|uvx|poetry|pipenv|pdm|hatch|tox|nox|pytest|py\.test|"
    r"python3?(?:\.\d+)?|pip3?(?:\.\d+)?|mypy|ruff|black|isort|flake8|pylint|pyright|ty|cargo|rustc|go|gofmt|golangci-lint|mvn|"
    r"gradle|\./gradlew|\./mvnw|dotnet|mix|rebar3|elixir|swift|xcodebuild|tsc|eslint|biome|prettier|jest|vitest|"
    r"playwright|tailwindcss|docker|docker-compose|conda|mamba|bazel|cmake|ctest|ninja|meson|rake|bundle|rspec|"
    r"composer|phpunit|sbt|lein|stack|cabal|zig|nix|terraform|helm|kubectl|pre-commit"
    r"|nvm|fnm|volta|pyenv|rbenv|asdf|mise|rustup)(?=\s|$)"  # … and the version managers (`nvm use 20`)
)  # a program, not `node.plan` or `make_x`
# … or a script of the project's own, run by its relative path (`bash run_e2e.sh`, `./scripts/smoke_test.sh`,
# `sh -e tests/x.sh`; not one in /tmp or elsewhere: `on_scratch`, `ELSEWHERE`), not only parsed (`bash -n x.sh`),
# nor a release or a deploy (an act of that day)
PROJECT_SCRIPT = re.compile(
    r"^(?:(?:ba|z|da)?sh\s+(?!-n\b)(?:-\w+\s+)*|\./)(?![/~.])(?P<path>[\w./-]*[\w-]\.sh)(?=\s|$)"
)
_ONE_ACT = re.compile(r"release|deploy|publish")
# the programs that build, test or check the project named alone (`make`, `pytest`, `yarn` installs)
ALONE = re.compile(
    r"^(make|just|task|tox|nox|pytest|py\.test|yarn|tsc|jest|vitest|rspec|rake|ninja|ctest|pre-commit|flake8|pyright|"
    r"mix|phpunit|xcodebuild|bundle|\./gradlew|\./mvnw|gradle|mvn)$"
)
# a test runner however spelt (`pytest`, `x_test.go`, `prompt.test`, `runtests.py`), not `x@latest`; `make ci`, not
# `npm ci` (an install from the lockfile)
CHECK = re.compile(
    r"(?:\b|py|vi|unit|nex|run|[_.:-])test|(?<!npm )\bci\b|\b(check|\w*lint|fmt|gofmt|format|typecheck|mypy|ruff|clippy|vet|biome|tsc|"
    r"verify|validate|build|compile|quality|spec|rspec|jest|prettier|analy[sz]e|phpstan|psalm|flake8|pyright|"
    r"shellcheck)\b|(?:\b|[_.-])(?:e2e|smoke)(?:\b|_)",
    re.I,
)
# `gofmt -w .`, `ruff check --fix`, `biome check --write`, `bun run lint:fix`, a formatter that writes unless
# asked to check (`ruff format`, `black`, `cargo fmt`; not `… --check`): rewrites files, checks nothing
FIXES = re.compile(
    r"\s--(?:fix|write)\b|\b(?:gofmt|goimports)\b[^&;|]*\s-w\b|^(?:npm|pnpm|yarn|bun)(?:\s+run)?\s+[\w.-]+[:-]fix\b"
    r"|\b(?:ruff format|black|isort|cargo fmt|go fmt|rustfmt|terraform fmt|dotnet format)\b"
    r"(?![^&;|]*\s--?(?:check|diff|check-only|verify-no-changes)\b)"
)
SCAFFOLD = re.compile(r"(?<![\w-])(create-[\w-]+|init|new)\b(?!-)")  # not `--stop-after-init`
_REFORMATS = r"--fix|fix|format|fmt"
SETUP = re.compile(
    rf"(?<![\w-])(install|sync|add|activate|export|config|init|setup|login|auth|{_REFORMATS}|migrate)(?![\w-])"
)  # a word of its own: `add-plan-label` sets nothing up
# … of which these only reformat or autofix (`mise run fmt`: no known fixer to `FIXES`, still no fix for a failing test)
FORMATS = re.compile(rf"(?<![\w-])(?:{_REFORMATS})(?![\w-])")
MODIFY = re.compile(
    r"^(sed\s+-i|perl\s+-pi|patch\b|git (apply|checkout|restore|revert)\b|\S+\s*>>?\s*(?!/tmp/|/dev/null)\S)"
)  # edits a file (not one in /tmp)
# A file's syntax checked, nothing run (`node --check x.mjs`, `python -m py_compile a.py`)
_SYNTAX = re.compile(r"^(?:(?:node|deno)\s+(?:--check|-c)|python3?\s+-m\s+(?:py_compile|compileall))\s")
RUNS_SOMETHING = re.compile(r"\b(run|dev|start|serve|exec|install|sync|activate|create|up)\b")


class Command(BaseModel):
    line: str
    ok: bool = True
    runs: int = 1
    check: bool = False  # a test / lint / build / check command (vs. run / install)
    fixes: bool = False  # a check's fixer (`bun run lint:fix`, `ruff format x.py`): rewrites what checks find
    via: str = ""  # the subagent the session ran it through, when it did
    script: str = ""  # what the package script ran, as its tool echoed it


# A tool told the folder it works in (`make -C DIR`, `git -C DIR`, `npm --prefix DIR`, `cargo --manifest-path F`)
_TOLD_FOLDER = (
    r"(?:\w+=\S*\s+)*(?:(?:g?make|git|go|pnpm)\b[^&;|]*?\s-C|npm\b[^&;|]*?\s--prefix|yarn\b[^&;|]*?\s--cwd"
    r"|cargo\b[^&;|]*?\s--manifest-path|cmake\s+--build)[=\s]\s*"
)


def normalize_command(line: str, cwd: str | None) -> str:
    """A command as a future agent would type it: no redirections of its output, no pager or
    `tail`, no search of a build's output, no `|| true` or `|| echo …`, no `cd` into the session's
    own folder or another checkout of it (the folder as an argument is `.`, a file in it relative, from
    the subfolder the command runs in: `cd api && python ../tools/x.py`), no `cd` before a tool told its
    folder (`make -C vsim/test t`), one line (`one_line`)."""
    s = " ".join(one_line(line).split())
    if cwd and (m := LEAD_CD.match(s)) and (target := m[1] or m[2] or m[3]) != (mapped := checkout(target, cwd)):
        s = f'cd "{mapped}" && {s[m.end() :]}'  # a cd into another checkout (a worktree) of the project
    s = _cut(r"\s*\|\s*(tail|head|less|more|cat|tee)\b[^|&;]*?(?=\s*(?:&&|;|\|\||$))", s)  # mid-chain too
    if BUILD.match(core(s)):  # a check's output searched (`bun run lint | grep -A3 "error"`): the check
        s = _cut(r"\s*\|\s*(?:grep|egrep|rg)\b(?:\"[^\"]*\"|'[^']*'|[^|&;\"'])*?(?=\s*(?:&&|;|\|\||$))", s)
    s = _cut(r"\s+2>&1|\s+2>/dev/null|\s+&?>\s*/dev/null|\s*\|\|\s*(?:true|echo\b[^&;|]*)\s*$", s)
    for spelt in spellings(cwd) if cwd else ():  # `D:\repo`, `D:/repo`, `/d/repo` on Windows
        root = re.escape(spelt)
        s = re.sub(rf"^cd\s+['\"]?{root}[/\\]?['\"]?\s*(&&|;)\s*", "", s, flags=re.I)
        # a subfolder: relative, with `/` on Windows (`cd website/src`, not `cd website\src`)
        s = re.sub(rf"^cd\s+['\"]?{root}[/\\]([^'\"\s]+)['\"]?", lambda m: "cd " + _slashed(m[1], cwd), s, flags=re.I)
        if told := re.match(
            rf"^cd\s+\S+\s*&&\s*(?=(?:{_TOLD_FOLDER})['\"]?{root}(?:[/\\'\"\s]|$)(?!.*(?:&&|;|\|)))", s, re.I
        ):
            s = s[told.end() :]  # a tool told its folder in the project: where it ran does not matter
        here = re.match(r"^cd\s+([\w][\w./-]*)\s*&&", s)  # … from the folder the command runs in (`cd api && …`)
        sub = here[1] if here and not on_drive(cwd) and ".." not in here[1].split("/") else ""

        def rel(path: str, sub: str = sub) -> str:
            return posixpath.relpath(path or ".", sub) if sub else (_slashed(path, cwd) if path else ".")

        s = re.sub(rf"(?<=\s)['\"]?{root}[/\\]?['\"]?(?=\s|$)", rel(""), s, flags=re.I)  # the folder as an argument
        if sub or not s.startswith("cd "):  # … and a file in it
            s = re.sub(rf"(?<=\s)([\"']){root}[/\\]([^\"']+)\1", lambda m: m[1] + rel(m[2]) + m[1], s, flags=re.I)
            s = re.sub(rf"(?<=\s){root}[/\\]([^\"'\s;&|]+)", lambda m: rel(m[1]), s, flags=re.I)
    # `…; echo "done"`, `… && echo BUILD_OK [&& …]`, `go build -o bin/x . && ls -la bin/` (a look at what it
    # made, or `&& start "" out/report.html` its page opened), unless that cuts a `( … )` in two
    cut = _cut(r"\s*;\s*echo\b.*$|\s*&&\s*(?:echo|ls|open|xdg-open|start\s+\"\")(?!\S)[^;&|]*?(?=\s*&&|\s*$)", s)
    # a server started in the background to be probed (`npx astro dev & sleep 5; kill %1`): the server
    cut = re.sub(r"^((?:[^&;|]|&&)+?)\s+&(?!&)\s*sleep\s+[\d.]+\s*(?:(?:;|&&).*)?$", r"\1", cut)
    return (cut if cut.count("(") == cut.count(")") else s).strip()


def _slashed(path: str, cwd: str) -> str:
    """A relative path as a command names it: with `/` on Windows (`app/scripts/init.js`)."""
    return path.replace("\\", "/") if on_drive(cwd) else path


def _cut(pattern: str, s: str) -> str:
    """`s` without what `pattern` matches, unless that leaves a quote open (`ssh h "ls x || echo 'none'"`
    is not `ssh h "ls x`)."""
    cut = re.sub(pattern, "", s)
    return cut if all(cut.count(q) % 2 == s.count(q) % 2 for q in "\"'") else s


def is_build_command(cmd: str) -> bool:
    """How a project is built, tested, checked or run, as opposed to exploring it."""
    c = core(cmd)
    if script := PROJECT_SCRIPT.match(c):
        return not _ONE_ACT.search(script["path"].rsplit("/", 1)[-1])
    if not c or EXPLORE.match(c) or not BUILD.match(c) or is_probe(c):
        return False
    if " " not in c and not ALONE.match(c):  # `npm`, `cargo`, `docker` alone print their usage
        return False
    return not SCAFFOLD.search(c)  # a one-off: the project it makes exists now


# A command run in a container (`docker exec -it web …`, `docker compose exec db …`): judged by what it runs there
_IN_CONTAINER = re.compile(
    r"^(?:(?:docker|podman)(?:\s+compose)?\s+exec\s+(?:(?:-[euw]|--(?:env|user|workdir))\s+\S+\s+|-\S+\s+)*[^\s-]\S*"
    r"|adb(?:\s+-s\s+\S+|\s+-[de])*\s+shell)\s+(?P<cmd>.+)$"  # … or on a device (`adb -s emulator-5554 shell "ls …"`)
)
# … a look there (`cat /etc/odoo/odoo.conf`, `wget -O- …/health`) or a query (`psql -U odoo -c "\l"`)
_LOOK_INSIDE = re.compile(
    r"^(?:wget|dumpsys|getprop|pm\s+(?:list|path|dump)|logcat\s+-d|psql\b.*\s-c|mysql\b.*\s-e|sqlite3\b.*\s['\"]|redis-cli|mongosh?\b.*--eval)\b"
)


_SOURCED = re.compile(r"^(?:(?:source|\.)\s+\S+\s*(?:&&|;)\s*)+")  # an environment read in first
# … or a run in a conda environment (`conda run -n ml python -c "import numpy"`: the question is Python's)
_IN_ENV = re.compile(r"^(?:conda|mamba|micromamba)\s+run\s+(?:(?:-n|--name|-p|--prefix)\s+\S+\s+|--[\w-]+\s+)+")
_IP_SHOW = r"^ip\s+(?:-\S+\s+)*(?:a|addr|address|r|route|l|link|n|neigh)\b(?!.*\b(?:add|del|delete|set|flush|change|replace)\b)"


def is_probe(cmd: str) -> bool:
    """A question to a tool, which changes nothing: `npm view x`, `marvin --help`, an inline script
    (`python -c …`, `python3 - <<'PY' …`, `bun -e …`, `mix run -e …`), a JSON file checked
    (`python -m json.tool x.json`), `gh pr view 12`, `kubectl get pods`, `bun src/cli.ts skills get x`,
    a look or a query in a container (`_IN_CONTAINER`)."""
    c = _IN_ENV.sub("", _SOURCED.sub("", core(cmd)))  # (`source setup.bash && rosservice info x`: the last part)
    inside = _IN_CONTAINER.match(c)
    there = inside and inside["cmd"].strip("'\"")
    if there and (EXPLORE.match(there) or _LOOK_INSIDE.match(there) or is_probe(there)):
        return True
    return bool(
        re.match(
            r"^(pip3?|npm|pnpm|yarn|bun) (show|list|ls|view|info|outdated|config|help|owner|whoami|search|ping|"
            r"access|token|dist-tags?|--version|-v)\b",
            c,
        )
        or re.match(r"^go (?:doc|env|version|list)\b", c)  # a question to the toolchain
        or re.match(r"^(?:nix\s+(?:eval|search|flake\s+(?:show|metadata|info))|nix-instantiate\s+--eval)\b", c)
        # … or to the system's package manager: `dpkg -l x` (exits 1 when one is not installed)
        or re.match(
            r"^(?:dpkg\s+(?:-[lsLS]|--list|--status|--listfiles|--search|--get-selections)|dpkg-query"
            r"|apt(?:-cache)?\s+(?:list|show|search|policy|depends|rdepends|madison)|rpm\s+-q|brew\s+(?:list|info|search|deps))\b",
            c,
        )
        or re.match(_IP_SHOW, c)  # the network as it is (`ip -brief addr`, `ip route`)
        or re.match(r"^(?:npm|pnpm|yarn|bun) run$", c)  # the package's scripts listed
        or re.match(
            r"^(?:python3?\s+(?:-c|-m\s+json\.tool|-\s+<<\s*['\"]?\w+)|(?:node|bun|deno)\s+(?:-e|--eval|-p|--print|eval)"
            r"|(?:ruby|perl)\s+-e|php\s+-r|(?:mix\s+run|elixir)\s+(?:-e|--eval)"
            r"|(?:bundle\s+exec\s+)?(?:bin/)?rails\s+runner\s+[\"'])",  # (`rails runner "puts …"`: Ruby inline)
            c,
        )
        or "--help" in c
        or "--version" in c
        or QUERY.intersection([w for w in c.split() if not w.startswith("-")][1:4])
    )


QUERY = {
    "get",
    "show",
    "list",
    "ls",
    "view",
    "describe",
    "status",
    "info",
    "whoami",
    "logs",
    "inspect",
    "ps",
    "help",
    "version",
    "versions",  # `pyenv versions`, `nvm current`, `mise which node`
    "current",
    "which",
}


@dataclass
class Run:
    """One shell command run: its line, outcome and the output's informative error line."""

    seq: int
    line: str
    failed: bool
    error: str
    escalated: bool
    via: str = ""  # the subagent that ran it ("devrun"), "" when the agent ran it itself
    script: str = ""  # what a package script ran (`bun run css:build` → `tailwindcss -i …`)
    background: bool = False  # the agent's tool ran it in the background (Claude Code's run_in_background)
    scratch: bool = False  # it ran on a file the session tried things with (`narrow.scratch_runs`)


# Run in a folder outside the project (`normalize_command` made the project's own relative): a temp
# scratch folder, another repository.
ELSEWHERE = re.compile(r"""^cd\s+["']?(?:/|~|\\\\|[A-Za-z]:[\\/])""")  # (`paths.is_absolute` as a pattern)
REMOTE = re.compile(r"^ssh\s")  # run on another machine
# A package installed by name (`pip3 install Pillow`, `npm i -D typescript`, `uv add httpx`, `go get x@latest`)
# or for the whole machine (`npm install -g ccusage`, `yarn global add x`, `uv tool install x`): the environment,
# the manifest or the machine changed once, not how the project is set up (`pip install -r requirements.txt`,
# `uv pip install -e ".[dev]"`, `npm install`, `go get ./...` install what it declares).
_INSTALL = re.compile(
    r"^(?:(?:python3?(?:\.\d+)?\s+-m\s+)?pip3?(?:\.\d+)?|uv\s+pip)\s+install\s+(?P<pip>.*)"
    r"|^(?:npm|pnpm|yarn|bun)\s+(?:install|i|add)\s+(?P<node>.*)|^(?:uv|poetry|pdm|cargo)\s+add\s+(?P<add>.*)"
    r"|^go\s+get\s+(?P<go>.*)|^(?:yarn\s+global\s+add|uv\s+tool\s+install)\s+(?P<machine>.*)"
)


# A new project made from a template (`npm create astro@latest`, `cargo new x`, `go mod init m`): done once,
# before there was a project to set up.
_SCAFFOLD = re.compile(
    r"^(?:(?:npm|pnpm|yarn|bun)\s+(?:create|init)|npx\s+(?:-y\s+|--yes\s+)?(?:create-[\w-]+|degit)|cargo\s+(?:new|init)"
    r"|go\s+mod\s+init|uv\s+init|poetry\s+(?:new|init)|rails\s+new|django-admin\s+startproject|dotnet\s+new|git\s+init)\b"
)


def installs_once(cmd: str) -> bool:
    """Does `cmd` install packages it names, or for the whole machine, or make the project from a
    template, rather than set up what the project declares? (Run in a conda environment too.)"""
    cmd = _IN_ENV.sub("", cmd.strip())
    if _SCAFFOLD.match(cmd) or re.match(r"go\s+mod\s+edit\b", cmd):  # (the manifest edited once)
        return True
    m = _INSTALL.match(cmd)
    if not m:
        return False
    words = next(g for g in m.groups() if g is not None).split()
    if m["machine"] is not None or {"-g", "--global"} & set(words):
        return True
    if any(re.match(r"-(?:r|e|c)\b|--(?:requirement|editable|constraint)\b", w) for w in words):
        return False
    names = [w.strip("'\"") for w in words if not w.startswith("-")]
    return bool(names) and not any(
        n.startswith((".", "/", "~")) or n.endswith((".txt", ".toml", ".whl")) for n in names
    )


def commands(runs: list[Run]) -> list[Command]:
    """The build/test/check commands that succeeded, the checks first, then the most run; a narrow
    check or fixer (`NARROW`: `gofmt -w a.go`) only when its tool ran no broader one, and once."""
    by: dict[str, Command] = {}
    tries: dict[str, int] = {}  # runs per family: `… add URL --dry-run`, then `… add . --list`
    worked: dict[str, int] = {}  # the order the commands first succeeded: setup before what needs it
    for r in runs:
        if (
            not is_build_command(r.line)
            or len(r.line) > 200
            or ELSEWHERE.match(r.line)
            or PLACEHOLDER.search(r.line)
            or ONE_ID.search(r.line)
            or r.scratch
        ):
            continue
        line = core(r.line)
        parts = [p.strip() for p in re.split(r"&&|;|\|\|", line)]
        if REMOTE.match(r.line) or any(installs_once(p) for p in parts):
            continue  # the other machine's, this one's or the environment's change of that moment
        if len(parts) > 1 and any(_LOOK.match(p) for p in parts):
            continue  # a script of that moment: `go mod tidy; grep toolchain go.mod; go build ./...`
        tries[family(r.line)] = tries.get(family(r.line), 0) + 1
        head = " ".join(w for w in line.split() if not w.startswith("-"))
        checks, fixer = (
            bool(CHECK.search(head) or _SYNTAX.match(line)),
            bool(FIXES.search(line) or FIXES.search(r.script)),
        )
        c = by.setdefault(
            r.line, Command(line=r.line, ok=not r.failed, runs=0, check=checks and not fixer, fixes=checks and fixer)
        )
        c.runs += 1
        c.via = c.via or r.via
        c.script = c.script or r.script
        c.ok = not r.failed  # its last outcome
        if c.ok:
            worked.setdefault(r.line, len(worked))
    ok = [  # (a run of one case is no way to run the project; a check of one is `narrowed`)
        c
        for c in by.values()
        if c.ok
        and (c.check or ((RUNS_SOMETHING.search(c.line) or tries[family(c.line)] > 1) and not ONE_CASE.search(c.line)))
    ]
    narrow = narrowed([(c.line, c.script) for c in sorted(ok, key=lambda c: -c.runs) if c.check or c.fixes])
    ok = [c for c in ok if c.line not in narrow]
    out: dict[str, Command] = {}  # family → its shortest form, in order of importance
    for c in sorted(ok, key=lambda c: (not c.check, -c.runs)):
        kept = out.get(family(c.line))
        if kept is None or (len(c.line) < len(kept.line) and c.check == kept.check):  # a fixer's form is no check
            out[family(c.line)] = c
    return sorted(list(out.values())[:MAX_COMMANDS], key=lambda c: (not c.check, worked[c.line]))


# The user saying a command worked on their machine: "OK, this worked: QT_QPA_PLATFORM=xcb opk-gui",
# "`npm run dev:all` works now" (a run the session never saw)
_SAID_TO_WORK = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yep|great|nice|cool|perfect|thanks)\W+)*(?:this|that|it)(?: command| one)? "
    r"(?:worked|works|did it|did the trick)(?: now)?\s*[:\u2014-]\s*(?P<cmd>\S.*)$"
    r"|^`(?P<quoted>[^`\n]+)` (?:worked|works|did it|did the trick)\b",
    re.I,
)
_COMMANDISH = re.compile(r"^(?:\w+=\S+\s+)*(?:\./|~/|/)?\w[\w.@/+:-]*(?:\s+\S+){0,15}$")


def said_to_work(sentence: str) -> str:
    """The command line a user's sentence says worked (`_SAID_TO_WORK`), or "": a line in backticks,
    or one that reads as a command (a VAR=value, a flag, a path, a program named with - _ . /, a
    known build tool), not an exploration."""
    m = _SAID_TO_WORK.match(sentence.strip())
    if not m:
        return ""
    cmd = (m["quoted"] or m["cmd"]).strip().rstrip(".!")
    quoted = bool(m["quoted"]) or (cmd.startswith("`") and cmd.endswith("`") and cmd.count("`") == 2)
    cmd = cmd.strip("`").strip()
    if len(cmd) > 200 or not _COMMANDISH.match(cmd) or EXPLORE.match(core(cmd)):
        return ""
    looks = re.search(r"^\w+=|\s--?\w|/|^[\w.]+[-_.][\w.-]*(?:\s|$)", cmd) or is_build_command(cmd)
    return cmd if quoted or looks else ""
