"""What a rendered transcript says, by who said it: the checkable material of Phase 1.

`blocks(text)` splits a transcript rendered by `dsh_memory.transcript.render` back into its
tagged blocks (`[user]`, `[assistant]`, `[tool]`, `[result …]`, …): tags start at column 0 and
tags inside non-human text are escaped by the renderer, so a block's role is the event's role.
`gather(text)` then picks, deterministically and verbatim:

- the user's standing rules and preferences ("always…", "never…", "use X, not Y", "only…"),
  the user's statements of fact about the project, and the requests;
- the commands the agent ran, with their outcome (ok / failed, first error line);
- failure shields: a failed command, the agent's explanation, and the command that then worked;
- the agent's findings (sentences that explain a cause or a fix) and its last word (the outcome);
- a procedure, when the user asked for one to be remembered and several steps succeeded.

Nothing here paraphrases: every string is a copy of transcript text (or a command line), so
what is built from it is grounded by construction.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_TAG = re.compile(r"^\[(user|assistant|tool|result|hidden|compaction|status|delta|note)\b([^\]]*)\](.*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")
RULE_CUE = re.compile(
    r"\b(always|never|don't|do not|only|must|should|prefer|remember|make sure|from now on|every time|"
    r"instead of|rather than|not\s+\S+\s+directly|in this repo|need[s]? .* first)\b|,\s*not\s+`|\bnot\b\s+\w+\s*[:;]"
    r"|^use\b[^.!?]{1,80},\s*not\b",  # "Use pnpm, not npm."
    re.I,
)
PROCEDURE_CUE = re.compile(
    r"\b(remember (this|the) (procedure|steps|process)|for next time|procedure|the steps are|step by step|checklist)\b",
    re.I,
)
FINDING_CUE = re.compile(
    r"\b(because|cause[sd]?|since|omits?|removed|missing|instead|needs?|requires?|fall(s|ing)? back|pinned|excludes?|"
    r"so that|works now|works|passes|fixed|succeeded|after|until|once)\b",
    re.I,
)
ERROR_LINE = re.compile(r"(error|exception|failed|fatal|denied|not found|cannot|traceback|refused)", re.I)
EXIT_CODE = re.compile(r"\[exit code: ([1-9]\d*)\]")
_COMMAND_ARG = re.compile(r'^(?:command|cmd)=(\[.*?\]|"(?:[^"\\]|\\.)*")', re.S)
_FILE_ARG = re.compile(r'file_path="([^"]+)"')
EDIT_TOOLS = {"edit", "write", "multiedit", "apply_patch", "str_replace", "create"}
PROBLEM = re.compile(
    r"\b(crash\w*|fail\w*|error\w*|broken|doesn't work|does not work|runs? out|hangs?|times? out)\b", re.I
)
GREETING = re.compile(r"^(hi|hello|hey|thanks|thank you|ok|okay|cool|great|bye|good (morning|evening|night))\b", re.I)


@dataclass
class Block:
    tag: str  # user | assistant | tool | result | hidden | …
    text: str
    detail: str = ""  # the tag's rest: ", error", " bash", …
    tool: str = ""  # tool blocks: the tool name; results: the tool name in the tag
    args: str = ""  # tool blocks: the argument summary

    @property
    def error(self) -> bool:
        return "error" in self.detail or bool(EXIT_CODE.search(self.text))


@dataclass
class Command:
    line: str  # the command as run
    ok: bool
    first_error: str = ""
    result_head: str = ""


@dataclass
class Shield:
    command: str
    error: str
    explanation: str = ""
    fixed_by: str = ""  # the command or edit after which it worked
    edited: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    rules: list[str] = field(default_factory=list)  # the user's words, verbatim sentences
    user_facts: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    shields: list[Shield] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # the agent's words, verbatim sentences
    outcome: str = ""
    procedure: list[str] = field(default_factory=list)
    first_prompt: str = ""
    user_text: str = ""
    agent_text: str = ""
    tool_calls: int = 0

    @property
    def ok_commands(self) -> list[str]:
        seen: list[str] = []
        for c in self.commands:
            if c.ok and c.line not in seen:
                seen.append(c.line)
        return seen


def blocks(text: str) -> list[Block]:
    """The tagged blocks of a rendered transcript (the header lines before the first tag dropped)."""
    out: list[Block] = []
    for line in (text or "").split("\n"):
        m = _TAG.match(line)
        if m:
            tag, detail, rest = m.group(1), m.group(2), m.group(3).lstrip()
            b = Block(tag, rest, detail)
            if tag == "result":
                b.tool = detail.split(",")[0].strip()
            out.append(b)
        elif out:
            out[-1].text += "\n" + line
    for b in out:
        b.text = b.text.strip()
        if b.tag == "tool":
            m = re.match(r"^([^()\s]+)\((.*)\)$", b.text, re.S)
            if m:
                b.tool, b.args = m.group(1), m.group(2)
    return out


def sentences(text: str) -> list[str]:
    parts = [s.strip() for s in _SENTENCE.split(text or "")]
    return [s for s in parts if len(s) >= 3]


def command_of(b: Block) -> str | None:
    """The shell command line of a tool block, if it ran one."""
    m = _COMMAND_ARG.match(b.args.strip())
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    if isinstance(value, list):
        parts = [str(v) for v in value]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            return " ".join(parts[2:])
        return " ".join(parts)
    return str(value).strip() or None


def _first_error(text: str) -> str:
    for ln in text.splitlines():
        s = ln.strip()
        if s and ERROR_LINE.search(s) and not s.startswith("[exit code"):
            return s.lstrip("E ").strip()[:200]
    return next((ln.strip()[:200] for ln in text.splitlines() if ln.strip()), "")


def _head(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("[")]
    lines = [ln for ln in lines if ln != "(no output)"]
    return lines[-1][:120] if lines else ""


def is_rule(sentence: str) -> bool:
    return bool(RULE_CUE.search(sentence)) and not sentence.rstrip().endswith("?")


def gather(text: str) -> Evidence:
    """Everything `gather` can copy out of one rendered transcript (see the module docstring)."""
    ev = Evidence()
    bl = blocks(text)
    pending: Shield | None = None
    last_failed: dict[str, Shield] = {}
    turn_ok: list[str] = []
    procedure_turn = False
    for i, b in enumerate(bl):
        if b.tag == "user":
            ev.user_text += b.text + "\n"
            ev.first_prompt = ev.first_prompt or b.text
            if turn_ok and procedure_turn and len(turn_ok) >= 3 and not ev.procedure:
                ev.procedure = list(turn_ok)
            turn_ok, procedure_turn = [], bool(PROCEDURE_CUE.search(b.text))
            for s in sentences(b.text):
                if (GREETING.match(s) and len(s) < 40 or len(s) < 12 and "`" not in s) and not is_rule(s):
                    continue
                if is_rule(s):
                    ev.rules.append(s)
                elif s.endswith("?") or _imperative(s) or PROBLEM.search(s):
                    ev.requests.append(s)
                elif "`" in s or "/" in s or re.search(r"\d", s):
                    ev.user_facts.append(s)
                else:
                    ev.requests.append(s)
        elif b.tag == "assistant":
            ev.agent_text += b.text + "\n"
            ev.outcome = b.text
            explaining = pending is not None and not pending.explanation
            for s in sentences(b.text):
                if (FINDING_CUE.search(s) or explaining) and ("`" in s or len(s) > 40) and s not in ev.findings:
                    ev.findings.append(s)
                    if explaining and not pending.explanation:
                        pending.explanation = s
        elif b.tag == "tool":
            ev.tool_calls += 1
            result = bl[i + 1] if i + 1 < len(bl) and bl[i + 1].tag == "result" else None
            ok = result is None or not result.error
            line = command_of(b)
            if line is None:
                f = _FILE_ARG.search(b.args)
                if f and b.tool.lower() in EDIT_TOOLS:
                    path = f.group(1)
                    if path not in ev.edited:
                        ev.edited.append(path)
                    if pending is not None:
                        pending.edited.append(path)
                    turn_ok.append(f"edit `{path}`")
                continue
            cmd = Command(line, ok, result_head=_head(result.text) if result else "")
            if not ok and result is not None:
                cmd.first_error = _first_error(result.text)
                pending = Shield(line, cmd.first_error)
                last_failed[line] = pending
                ev.shields.append(pending)
            elif ok:
                turn_ok.append(f"`{line}`")
                shield = last_failed.pop(line, None)
                if shield is not None and not shield.fixed_by:
                    shield.fixed_by = line
                    if shield is pending:
                        pending = None
            ev.commands.append(cmd)
    if turn_ok and procedure_turn and len(turn_ok) >= 3 and not ev.procedure:
        ev.procedure = list(turn_ok)
    return ev


_IMPERATIVE = re.compile(
    r"^(please\s+)?(add|fix|make|create|update|move|remove|delete|run|cut|deploy|investigate|find|look|check|"
    r"write|change|rename|refactor|set|install|implement|also|can you|could you|why|what|how)\b",
    re.I,
)


def _imperative(s: str) -> bool:
    return bool(_IMPERATIVE.match(s))
