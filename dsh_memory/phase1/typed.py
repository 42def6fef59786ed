"""The user's own words of each prompt, what Phase 1 reads rules, facts and requests from.

A prompt is often mostly pasted: a plan, a log, a shell session, a drawn tree, a line the agent
wrote earlier. `own_sentences` keeps what the user typed: a long paste's first line, a slash
command's arguments, sentences run together with dots read one by one, and no quote of the agent.
"""

from __future__ import annotations

import re

from dsh_memory.models import Event, EventKind
from dsh_memory.phase1.clean import FENCED
from dsh_memory.phase1.facts import sentences
from dsh_memory.transcript.redact import redact

MAX_PASTE_CHARS = 1200  # a longer prompt is mostly pasted material: only its first line is the user's
LOWER_SENT = re.compile(r"(?<=[a-z]{3}[.!?])\s+(?=[a-z])")  # typed prompts often go on in lower case
SHELL_PROMPT = re.compile(r"\s(?:~\S*|/\S+)\s+[$%#]\s")  # "… ~/Projects $ ln -s …": a pasted shell session


# "…I've plenty of warnings in the console: Warning: Encountered two children…": what follows is
# the paste, not the user's words.
PASTE_LEAD = re.compile(r"\b(?:console|terminal|output|logs?|errors?|warnings?|trace|get|got|see|says)\s*:\s", re.I)


# A lead that names what follows, then a Markdown document: "Implement the following plan:\n\n# …"
_PASTED_DOC = re.compile(
    r"\s*([^\n]{0,200}\b(?:following|below|this|these|plan|spec|design|doc|document|proposal)\b[^\n]{0,40}:)[ \t]*\n"
    r"\s*#{1,3}[ \t]+\S",
    re.I,
)


# A line a tool printed, pasted: its level first ("npm WARN …", "WARNING: …", "[ERROR] …",
# "DeprecationWarning: …", "Traceback (most recent call last):").
LOG_LINE = re.compile(
    r"\s*(?:npm (?:WARN|ERR!)|(?:WARN(?:ING)?|ERROR|FATAL|INFO|DEBUG|TRACE)\b\s*[:\]-]|\[(?:WARN(?:ING)?|ERROR|FATAL"
    r"|INFO|DEBUG|TRACE)\]|[A-Z]\w*(?:Warning|Error|Exception):|Traceback \(most recent call last\)"
    # … a linter's or compiler's finding ("  41:12  error  'x' is defined but never used", "a.ts(3,7): error
    # TS2322", "a.c:3:7: warning"), a line of `docker compose` or BuildKit output ("api-1  | …", "#8 0.31 …")
    r"|\d+:\d+\s+(?:error|warning)\s|[\w./\\-]+(?:\(\d+,\d+\)|:\d+:\d+):?\s+(?:-\s+)?(?:error|warning)\b"
    r"|[\w.-]+-\d+\s+\|\s|#\d+ \d+\.\d+\s"
    r"|(?:stdout|stderr) \| [\w./-]+ > "  # … a test runner's captured output ("stderr | a.test.ts > Suite > case")
    r"|go: (?:downloading|finding|extracting|upgraded|added|found) \S"  # … the go tool's ("go: downloading x v1")
    r"|fatal: |\[[\w.-]+@[\w.-]+ [^\]\n]*\]\s*$"  # … git's, and a shell's prompt line ("[me@host ~/repo main !19]")
    r"|\S[^\n]{0,200}\balready exists,?\s+(?:not overwriting|skipping)\b)"  # … a script's ("x already exists, skipping")
)
# … and pasted on the end of the user's own line: "Now this one (index):1 Uncaught TypeError: …", "I get
# this when I build error TS6059: File …" (the line is theirs up to the paste)
_PASTED_ON = re.compile(
    r"\s(?:\(index\):\d+|Uncaught [A-Z]\w*|error TS\d+:|[\w./-]+(?:\(\d+,\d+\)|:\d+:\d+):? (?:- )?error"
    r"|(?:stdout|stderr) \| [\w./-]+ > )"
)


_DRAWN = re.compile(r"[├└│┌┐┘┬┴┼]")  # a line of a drawn tree or table, pasted: `├── skills/`


# A prompt template's expansion that quotes what the user typed (GitHub spec-kit's `/speckit.plan …`:
# "## User Input\n\n```text\n<their words>\n```\n\nYou **MUST** consider the user input …"): the template is
# not theirs.
_TEMPLATE_INPUT = re.compile(r"\s*#{1,3}[ \t]*User Input[ \t]*\n\s*```[\w-]*\n(?P<said>.*?)\n?```", re.S | re.I)


def user_text(e: Event) -> str:
    """The user's own words of a prompt: a long paste keeps only its first lines; a slash command
    keeps its arguments, a prompt template's expansion the input it quotes; shell-prompt lines and
    logs (`LOG_LINE`) are not words."""
    text = e.text or ""
    pasted = _PASTED_DOC.match(text)
    if template := _TEMPLATE_INPUT.match(text):
        text = template["said"]
    elif pasted:  # "Implement the following plan:" and the plan, however short: the plan is not theirs
        text = pasted.group(1)
    elif len(text) > MAX_PASTE_CHARS:
        first = text.strip().splitlines()[0][:MAX_PASTE_CHARS]
        lead = PASTE_LEAD.search(first)
        text = first[: lead.end()].rstrip(": ") if lead else first
    else:  # a short paste: a fenced block, or the lines after a lead that ends its line ("… in the console:")
        text = FENCED.sub("", text)
        lead = next((m for m in PASTE_LEAD.finditer(text) if "\n" in m.group(0)), None)
        text = text[: lead.start() + len(lead.group(0).rstrip())] if lead else text
    lines = text.splitlines()
    for n, ln in enumerate(lines[:-1]):  # a quote opened and left open: what follows it is the paste
        if ln.count('"') % 2:
            lines = [*lines[:n], ln[: ln.rfind('"')]]
            break
    lines = [
        _PASTED_ON.split(SHELL_PROMPT.split(ln)[0])[0]
        for ln in lines
        if not re.match(r"^\s*(\S+\s+)?[$%#>]\s", ln) and not LOG_LINE.match(ln) and not _DRAWN.search(ln)
    ]
    text = "\n".join(lines)
    return re.sub(r"^/[\w:.-]+\s*", "", text.strip())


# "here..we dont need to preface everything": typed prompts often run sentences together with dots.
_DOTS = re.compile(r"(?<!\.)(?<!\betc)\s*(?:\.{2,}|…)\s*(?=[a-z])")


def prompt_sentences(words: str) -> list[str]:
    """The sentences of a prompt's words: Markdown sentences and list items, then lower-case
    sentences ("done. now run it") and dot-joined ones ("awkward here..we dont need…"), never split
    inside a code span (`main..HEAD`)."""
    out = []
    for sent in sentences(words):
        for part in LOWER_SENT.split(sent):
            start = 0
            for m in _DOTS.finditer(part):
                if part[: m.start()].count("`") % 2 == 0:  # not inside a code span
                    out.append(part[start : m.start()].strip())
                    start = m.end()
            out.append(part[start:].strip())
    return [s for s in out if len(s) >= 3]


MAX_AGENT_CHARS = 4_000_000  # the agent's words kept for quote checks (the latest)
MIN_QUOTE_CHARS = 24
_NOT_WORDS = re.compile(r"(?m)^[ \t]*[+>-]|[`*_#]|\\n")


def _flat(text: str) -> str:
    return " ".join(_NOT_WORDS.sub(" ", text).lower().split())


def _strings(value: object, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [value]
    if depth > 8:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v, depth + 1)] if isinstance(value, list) else []


class AgentWords:
    """What the agent has said and written so far in a session (its messages, the text of its tool
    calls: files it wrote, patches, commands). A user's sentence found in it is pasted back — a
    draft under review, a line of the agent's answer asked about — not the user's own words, so
    never a rule of theirs ("A skill should teach one repeatable workflow, not become a manual")."""

    def __init__(self) -> None:
        self._new: list[str] = []  # as the events hold them: flattened only when a quote is checked
        self._text = ""

    def add(self, e: Event) -> None:
        if e.kind is EventKind.ASSISTANT:
            self._new.append(e.text or "")
        elif e.kind is EventKind.TOOL_CALL:
            self._new += _strings(e.arguments)

    def quotes(self, sentence: str) -> bool:
        said = _flat(sentence).rstrip(".!?;: ")
        if len(said) < MIN_QUOTE_CHARS or said.count(" ") < 3:
            return False
        if self._new:
            self._text = (self._text + "\n" + "\n".join(map(_flat, self._new)))[-MAX_AGENT_CHARS:]
            self._new = []
        return said in self._text


def own_sentences(events: list[Event]) -> dict[int, tuple[str, list[str]]]:
    """Each human prompt's words (`user_text`, redacted) and its sentences in the user's own words
    (quotes of the agent left out), by the prompt's seq: what Phase 1 reads rules, facts and
    requests from, and replay too. A prompt the next one repeats whole and goes on from is empty."""
    agent = AgentWords()
    out: dict[int, tuple[str, list[str]]] = {}
    last: tuple[int, str] | None = None  # the previous prompt's seq and words, whitespace folded
    for e in events:
        if e.kind is EventKind.HUMAN:
            words = redact(user_text(e))
            folded = " ".join(words.split())
            if last and last[1] and len(folded) > len(last[1]) and folded.startswith(last[1]):
                out[last[0]] = "", []  # sent too soon, cut mid-sentence ("… aka what we"), then sent whole
            last = e.seq, folded
            said = prompt_sentences(words)
            # a quote comes with the user's own words around it ("what does this mean? <pasted>");
            # a prompt that is one line, even in the agent's words, is the user's ("Use pnpm, not npm.")
            out[e.seq] = words, [s for s in said if not agent.quotes(s)] if words.strip().count("\n") else said
        else:
            agent.add(e)
    return out
