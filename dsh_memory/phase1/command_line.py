"""How a shell command line reads: several lines as the one line that runs the same, the folder
it ran in, and what it runs (`core`, `family`) once `cd DIR &&`, VAR=value and a shell wrapper or
`ssh host '…'` are taken off — so a command is judged by the script inside it."""

from __future__ import annotations

import functools
import ntpath
import posixpath
import re

from dsh_memory.phase1.paths import is_absolute, on_drive


def one_line(script: str) -> str:
    """A script of several lines as the one line that runs the same: a line break is `; ` unless
    the line before ends in an operator that joins it (`&&`, `|`, `&`, `\\`, `then`, …); comment
    lines go. (`a &`, `sleep 5`, `curl …` is `a & sleep 5; curl …`, not `a & sleep 5 curl …`.)"""
    out = ""
    for raw in script.replace("\\\n", " ").splitlines():
        ln = raw.strip()
        if not ln or ln.startswith("#"):
            continue
        joined = not out or _JOINS.search(out) or _CONTINUES.match(ln)
        out += (" " if out else "") + ln if joined else "; " + ln
    return out


_JOINS = re.compile(r"(?:&&|\|\||[|&;({]|\b(?:then|do|else|in))\s*$")
_CONTINUES = re.compile(r"^(?:&&|\|\||\|)")  # (`done`, `fi`, `}` want the `;` a line break is)


LEAD_CD = re.compile(r"""^cd\s+(?:"([^"]+)"|'([^']+)'|([^\s;&|]+))\s*(?:&&|;)\s*""")


def in_folder(line: str, where: str | None) -> str:
    """`line` as run from `where`, the folder the log says the call ran in: `cd WHERE && line`, a
    relative `cd` that leads it joined to WHERE; as it is when it leads with a `cd` from the root."""
    m = LEAD_CD.match(line)
    target = m and (m[1] or m[2] or m[3])
    if not where or (target and is_absolute(target)):
        return line
    if target:
        norm = ntpath.normpath if on_drive(where) else posixpath.normpath
        where, line = norm(f"{where}/{target}"), line[m.end() :]
    return f'cd "{where}" && {line}' if re.search(r"\s", where) else f"cd {where} && {line}"


# A shell run for one quoted script (`powershell.exe -NoProfile -Command "…"`, `bash --norc -lc '…'`, `cmd /c …`,
# `ssh -p 22 root@host '…'` on another machine): the script is the command. A quote of the same kind inside
# it ends it, so a chain of two is no wrapper.
_WRAPPER = re.compile(
    r"""^(?:(?:powershell|pwsh)(?:\.exe)?\s+(?:-(?!c(?:ommand)?\s)\w+\s+(?:[A-Za-z]\w*\s+)?)*-c(?:ommand)?"""
    r"""|(?:ba|z)?sh\s+(?:--[\w-]+\s+)*-l?c|cmd(?:\.exe)?\s+/[ck]|ssh\s+(?:-[BbcDEeFIiJLlmOoPpQRSWw]\s*\S+\s+|-\w+\s+)*"""
    r"""[^\s"'-]\S*)\s+(?:"(?P<d>(?:\\.|[^"\\])*)"|'(?P<s>[^']*)')\s*$""",
    re.I,
)


def _bare(cmd: str) -> str:
    """`cmd` without its leading `cd DIR &&` and VAR=value assignments."""
    return re.sub(r"^(\w+=\S*\s+)+", "", re.sub(r"^(cd\s+\S+\s*(&&|;)\s*)+", "", cmd))


def wrapped(cmd: str) -> bool:
    """Does `cmd` run one quoted script through a shell or on another machine (`_WRAPPER`)?"""
    return bool(_WRAPPER.match(_bare(cmd)))


def core(cmd: str) -> str:
    """The command a line runs once `cd DIR &&`, leading VAR=value assignments and a shell wrapper
    (`_WRAPPER`) are taken off."""
    s = _bare(cmd)
    m = _WRAPPER.match(s)
    return core(m["d"] if m["d"] is not None else m["s"]) if m else s


_FOLDER = re.compile(r"(^|/)\.\.\.$|/$|^\.$")  # `./cmd/...`, `src/`, `.`: where, not what


@functools.lru_cache(maxsize=4096)  # shields compare each failure with every later run
def family(cmd: str) -> str:
    """What a command runs, without its flags, package folders and arguments past the third word
    (`erk exec setup-impl`, `bun run test`, `python app.py`): reruns with other flags are the same
    command, and so are `go build ./cmd/x/...` and `go build ./cmd/x/cli/`, `mvn clean verify` and
    `mvn verify`."""
    words = [w for w in core(cmd).split("|")[0].split() if not w.startswith("-") and not _FOLDER.search(w)]
    if words and _CLEANS_FIRST.match(words[0]):
        words = [words[0], *(w for w in words[1:] if w != "clean")]  # `mvn clean verify`: `mvn verify`
    return " ".join(words[:3])


# A build whose `clean` goal goes before the one that counts
_CLEANS_FIRST = re.compile(r"^(?:\./)?(?:mvnw?|gradlew?)$")


def first_command(cmd: str) -> str:
    """The first command of a line, out of its subshell (`(sleep 180; gh api …)` → `sleep 180`)."""
    return re.split(r"\s*(?:;|&&|\|\|?)\s*", core(cmd).lstrip("( "), maxsplit=1)[0].strip()


def unpiped(cmd: str) -> str:
    return core(cmd).split("|")[0].strip()
