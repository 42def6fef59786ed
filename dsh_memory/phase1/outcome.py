"""What a shell tool call ran and how it ended: its command line (`shell_line`), whether it failed
(an error flag, an exit code, a JSON status reply with `"success": false`, a package manager's own
error line), the output's informative error line and what a package script ran. Read by
`phase1/evidence.py`; which commands are knowledge is `phase1/commands.py`'s call.
"""

from __future__ import annotations

import json
import re
from itertools import dropwhile
from typing import Any

from dsh_memory.models import Event
from dsh_memory.phase1.clean import clip, is_marker
from dsh_memory.phase1.command_line import core

MAX_JSON_REPLY = 8192  # a JSON status reply longer than this is output, not a status
SHELL_TOOLS = {  # (Codex: `shell` takes an argv, `shell_command` a line since 0.7x)
    "bash",
    "shell",
    "shell_command",
    "exec_command",
    "local_shell",
    "run_terminal_cmd",
    "terminal",
    "run_command",
}

ERROR_WORD = re.compile(
    r"(error|exception|failed|fatal|denied|not found|cannot|can't|no such|traceback|refused|"
    r"not permitted|invalid|missing|undefined|unknown|expected|panic)"
    r"|^[×✖✗✘]\s",  # a diagnostic's mark (biome, eslint, miette): "× Formatter would have printed …"
    re.I,
)
GENERIC_ERROR = re.compile(
    r"^(error|failed|exit code:? ?\d+|command failed.*|process exited with code \d+|exit status \d+|"
    r"(?:error: )?script (?:\"[^\"]*\" )?exited with code \d+|"
    r"\(?no output\)?|error: \d+|(?:error: )?found \d+ errors?\.?|traceback \(most recent call last\):?)$",
    re.I,
)
# A log line at a level below an error: "2026/02/07 16:30:27 INFO cleanup completed … failed_branches=0",
# "… WARN failed to delete orphaned shadow branch … reason=test" (a test's expected warning, not why it failed).
LOG_INFO = re.compile(
    r"^(?:[\d/:.,TZ+-]+\s+){0,2}(?:INFO|DEBUG|TRACE|WARN(?:ING)?)\b|\blevel=\"?(?:info|debug|trace|warn(?:ing)?)\b"
)
# A test that passed or runs, whatever its name says: "(pass) grade > fails clearly when the manifest is
# missing", go test's "=== RUN   TestRegistry/Get_unknown_agent_returns_error".
PASSED = re.compile(  # … and cargo's "test parser::tests::parses_x ... ok"
    r"(?:\(pass\)|✓|✔|PASS\b|ok\s|--- PASS\b|=== (?:RUN|PAUSE|CONT|NAME)\b|test\s+\S+\s+\.\.\.\s+(?:ok|ignored)\b)"
)
EXIT = re.compile(r"(?:exit code:?|exited with code|\[exit code:)\s*(-?\d+)", re.I)  # Codex 0.7x: "Exit code: 1"
_CODEX_HEAD = re.compile(
    r"^(Chunk ID|Wall time|Process exited with code|Exit code|Original token count|Total output lines|Output|"
    r"Process running)\b.*$"
)
CLI_ERROR = re.compile(r"^(error|fatal)(\[[\w-]+\])?: \S")  # `error: unrecognized subcommand 'bun'`, `fatal: …`
ESCALATED = re.compile(r"require_escalated|with_escalated_permissions|sandbox_permissions", re.I)


def shell_line(e: Event) -> str | None:
    """The command line of a shell tool call, or None."""
    if (e.tool_name or "").lower() not in SHELL_TOOLS:
        return None
    a = e.arguments
    value: Any = a.get("command") or a.get("cmd") if isinstance(a, dict) else a
    return argv_line(value)


def ran_in(e: Event) -> str | None:
    """The folder a shell call ran in, where the log says: Claude's record (`Event.cwd`), Codex's
    `workdir` argument; None for the session's own folder or when nothing says."""
    a = e.arguments
    where = e.cwd or (a.get("workdir") if isinstance(a, dict) else None)
    return where if isinstance(where, str) and 0 < len(where) <= 4096 else None


def argv_line(value: Any) -> str | None:
    """A command as one line: a string as is, an argv list joined (a `bash -lc CMD` wrapper off)."""
    if isinstance(value, list):
        parts = [str(v) for v in value]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            parts = parts[2:]
        value = " ".join(parts)
    return value.strip() if isinstance(value, str) and value.strip() else None


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")  # colours, titles, …


def _output(text: str) -> str:
    """A tool result without a Codex exec header (Chunk ID, Wall time, …) nor a terminal's escape
    sequences (a compiler's colours: "\x1b[1m\x1b[91merror\x1b[0m")."""
    lines = _ANSI.sub("", text or "").splitlines()
    return "\n".join(dropwhile(lambda ln: _CODEX_HEAD.match(ln.strip()) or not ln.strip(), lines))


def _json_error(text: str) -> str | None:
    """The error a JSON status reply reports (`{"success": false, "error": …, "message": …}`:
    CLIs made for agents answer so, with exit code 0 under `|| true`), or None."""
    if len(text) > MAX_JSON_REPLY + 1024:  # with a Codex header: still too long to be one
        return None
    out = _output(text).strip()
    if not out.startswith("{") or len(out) > MAX_JSON_REPLY:
        return None
    try:
        reply = json.loads(out)
    except ValueError:
        return None
    if not isinstance(reply, dict) or not (reply.get("success") is False or reply.get("ok") is False):
        return None
    said = [reply.get(k) for k in ("error_type", "error", "message")]
    return clip(": ".join(dict.fromkeys(str(v) for v in said if isinstance(v, str) and v)), 200) or None


def failed(result: Event | None) -> bool:
    if result is None:
        return False
    if result.is_error:
        return True
    m = EXIT.search((result.text or "")[:400])
    if m:
        return m.group(1) != "0"
    if _json_error(result.text or ""):
        return True
    # A pipe into `tail` hides the exit code: an output that opens with the tool's own error says it,
    # or ends with its package manager's ("error: script "lint" exited with code 1")
    first = next((ln.strip() for ln in _output(result.text or "").splitlines() if ln.strip()), "")
    return bool(
        CLI_ERROR.match(first) or _NO_PROGRAM.search(first) or _SCRIPT_FAILED.search((result.text or "")[-400:])
    )


# … or the shell's own: the program is not there ("(eval):1: command not found: python", "bash: x: command not found")
_NO_PROGRAM = re.compile(r"\bcommand not found(?:: \S+)?$")


_SCRIPT_FAILED = re.compile(
    r'^\s*(?:error: script "[^"\n]+" exited with code [1-9]|(?:ELIFECYCLE|error)\s+Command failed with exit code [1-9]|'
    r"npm (?:ERR!|error) code\b)",
    re.M,
)


_SCRIPT = re.compile(r"^(?:npm|pnpm|yarn|bun)(?:\s+run)?\s+[\w:.-]+\s*$")
# bun/yarn `$ cmd`; npm `> cmd` (not `> pkg@1.0 name`, nor a code frame's marked line `> 6 │ import …`)
_ECHO = re.compile(r"^(?:\$|>)\s+(?!\S+@\S+ )(?!\d+\s*[│|])(\S.{2,199})$")


def script_of(line: str, output: str) -> str:
    """What a package script ran (`bun run css:build` → `tailwindcss -i ./src/styles.css -o …`),
    as the package manager echoed it at the top of its output; "" for any other command."""
    if not _SCRIPT.match(core(line)):
        return ""
    for ln in _output(output).splitlines()[:6]:
        m = _ECHO.match(ln.strip())
        if m:
            return clip(m.group(1), 120)
    return ""


_TOOL_ERROR_TAG = re.compile(r"</?tool_use_error>")  # Claude Code's wrapper of a refused call's message
# Codex's wrapper of any command that failed in its sandbox, whatever failed: "failed in sandbox LinuxSeccomp with
# execution error: sandbox denied exec error, exit code: 1, stdout: ….F.., stderr: …" (the outputs are the error)
_SANDBOX_WRAPPER = re.compile(r"^failed in sandbox \S+ with execution error: [^,\n]*, exit code: -?\d+, stdout: ?")


_CARET = re.compile(r"^\s*[~^]*\^[~^]*\s*$")  # a line that only marks a column of the line above
# A shell's start-up file complaining in every command's output ("…/profile.d/conda.sh:48: parse error near …"):
# the machine's, not the command's
_STARTUP_FILE = re.compile(
    r"(?:^|[\s/])(?:\.?(?:bash|zsh)(?:rc|_profile|env)|\.?profile|profile\.d/[\w.-]+|Homebrew/cmd/shellenv\.sh):\s?(?:line )?\d+:"
    r"|^\(eval\):\d+: parse error"  # … or the code it evaluates (`eval "$(conda shell.zsh hook)"`)
)
_BANNER = re.compile(r"^[_=-]{3,} .+ [_=-]{3,}$")  # a test runner's heading: "____ ERROR collecting tests/x.py ____"
_SOURCE_LINE = re.compile(  # a numbered line of code an error quotes; a test runner's header of a case's captured
    r"^\d+\s*[|│](?:\s|$)|^(?:stdout|stderr) \| \S+ > "  # output ("stderr | a.test.ts > API > case"): its log
)
_HEADING = re.compile(r"^\S+(?:\s+\S+){0,2}:$")  # "Collected errors:": what the lines below it are


_PS_AT = re.compile(r"^\s*At (?:line:\d+ char:\d+|[^\n]*:\d+ char:\d+)\s*$")  # where a PowerShell error record points
_PS_MESSAGE = re.compile(r"^[A-Z][\w-]*(?: [\w-]+)? : \S")  # "Where-Object : The specified operator …"


def _powershell_error(output: list[str]) -> str:
    """The message of a PowerShell error record ("Get-Item : Cannot find path …" over "At line:1
    char:1", "+ CategoryInfo : …"), its wrapped lines joined; "" when there is none."""
    for n, ln in enumerate(output):
        if not _PS_AT.match(ln):
            continue
        for k in range(n - 1, max(-1, n - 4), -1):
            if _PS_MESSAGE.match(output[k].strip()):
                return clip(" ".join(x.strip() for x in output[k:n]), 200)
    return ""


def _says_no_error(line: str) -> bool:
    """A log line below an error ("INFO … failed_branches=0"), a test that passed or runs ("(pass) …
    fails clearly when …"), a heading of the errors below it ("Collected errors:"): no error said."""
    return bool(LOG_INFO.search(line) or PASSED.match(line) or _HEADING.match(line))


def informative_error(text: str) -> str:
    """The first line of an output that says what went wrong, or "" (nothing worth a shield)."""
    text = _TOOL_ERROR_TAG.sub("", text)
    if _SANDBOX_WRAPPER.match(text):
        text = _SANDBOX_WRAPPER.sub("", text).replace(", stderr: ", "\n", 1)
    said = _json_error(text)
    if said:
        return said
    output = _output(text).splitlines()
    record = _powershell_error(output)
    if record:
        return record
    for n, ln in enumerate(output):
        if n + 1 < len(output) and _CARET.match(output[n + 1]):
            continue  # the source line a compiler marks ("return new TSError(…);" over "^"), not the error
        # pytest's "E   " (not the E of "EOFError"), a "* " item, a parser's "^ " mark
        s = re.sub(r"^(?:E|\*|\^)\s+", "", ln.strip())
        if not s or s.startswith(("[", "at ", "File ", "$ ", "raise ")) or is_marker(s) or GENERIC_ERROR.match(s):
            continue  # … and a package script's echo ("$ biome check --error-on-warnings"), a traceback's source line
        if _SOURCE_LINE.match(s) or _STARTUP_FILE.search(s) or _BANNER.match(s):
            continue  # the source a test runner quotes ("273 |   name: 'x',", "1 | // … the error instance …")
        if _says_no_error(s):
            continue
        if ERROR_WORD.search(s) and len(re.findall(r"[A-Za-z]{2,}", s)) >= 2:
            return clip(s, 200)
    lines = [ln.strip() for ln in output if ln.strip() and not ln.strip().startswith("[")]
    lines = [re.sub(r"^\*\s+", "", ln) for ln in lines if not _says_no_error(ln) and not _STARTUP_FILE.search(ln)]
    if 0 < len(lines) <= 2 and len(re.findall(r"[A-Za-z]{2,}", lines[0])) >= 3 and not GENERIC_ERROR.match(lines[0]):
        return clip(lines[0], 200)  # a short output of a failed command is its message
    return ""
