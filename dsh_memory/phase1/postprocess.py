"""Deterministic clean-up of what any model wrote for one session, checked against its transcript.

Applied to every provider's answer, line by line, in this order:

1. boilerplate goes ("as an AI…", "I am a coding agent…", "here to assist you");
2. a line that loops over its own sentences keeps one copy of each; duplicate and near-duplicate
   lines (same words, or one line inside another) keep the first;
3. a line cut off mid-word or mid-sentence (unbalanced backticks, a dangling "the"/"and"/comma,
   a last word found nowhere in the transcript nor elsewhere in the answer) is trimmed back to
   its last full sentence, or dropped;
4. a line goes when fewer than half of its content words, or none of its `code spans`, occur in
   the transcript;
5. attribution follows the event roles: "the user ran/fixed…" that only the agent's messages and
   tools show, or "the user said '…'" quoting the agent, become "the agent …"; a wish given to the
   user ("the user prefers / wants / requires …", "User preference: …") that only the rest of the
   session holds (a page or a file the agent read) goes; the extractor's own first person ("I
   fixed…") becomes "The agent";
6. in the raw memory every line `clean.why_not_memory` names goes; a recap loses its markers;
7. headings left without content go; the text is capped at whole lines.

Who said what comes from the rendered transcript read back into its tagged blocks (`[user]`,
`[tool]`, `[result …]`, …: `blocks`): tags start at column 0 and the renderer escapes tags inside
non-human text.

Then the scope of each item of the raw memory (`scope_items`): the session's project unless the
user said otherwise. An item is tagged `[scope: global]` when the user's own words behind it (the
words it quotes, or else the user's sentences sharing at least half of its content words) state it
as general (`dsh_memory.scope.stated_as_general`). A `[scope: global]` the model wrote is kept only
when those words back it: a rule the user gave for one repository never leaks into the others.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

from dsh_memory.phase1.clean import CODE, is_marker, why_not_memory
from dsh_memory.phase1.near import Seen, near
from dsh_memory.phase1.outcome import argv_line
from dsh_memory.scope import is_tagged_global, stated_as_general, tag, untag

BOILERPLATE = re.compile(
    r"\bas an ai\b|\bi am (a|an) (coding |helpful |ai )?(agent|assistant|ai)\b"
    r"|\bi'?m (a|an) (coding |helpful |ai )?(agent|assistant|ai)\b|here to (assist|help)\b"
    r"|\blanguage model\b|how can i (help|assist)|\bi (can|will) help you\b",
    re.I,
)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
QUOTE = re.compile(r"\"([^\"\n]{8,})\"|“([^”\n]{8,})”")
SENTENCE = re.compile(r"(?<=[.!?])\s+")
HEADING = re.compile(r"^\s*#{1,6}\s")
BULLET = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
STOP = set(
    """about above after again also because been before being between both could does doing down during each
    from further have having here into just more most must once only other over same should some such than
    that their them then there these they this those through under until very were what when where which while
    will with would your user users agent session said says asked wants prefers preference memory future task
    outcome note rule command commands always never""".split()
)
DANGLING = set("the a an and or to of with for in on at by from as is are was be that this its their your".split())
AGENT_VERBS = (
    "ran|run|executed|edited|fixed|pinned|removed|updated|deployed|loaded|moved|implemented|installed|modified|"
    "changed|tagged|built|diagnosed|added|created|wrote|used|greeted|found|replaced|upgraded|downgraded"
)
USER_ACTS = re.compile(rf"\b([Tt]he )?[Uu]ser (has |had )?({AGENT_VERBS})\b")
USER_SAID = re.compile(r"\b([Tt]he )?[Uu]ser (said|says|asked|stated|wrote|noted|mentioned)\b")
# A line that gives the user a wish: "the user prefers / wants / requires …", "User preference: …".
USER_WISH = re.compile(
    r"\b[Uu]ser(?:'s)?\s+(?:standing\s+)?(?:prefer\w*|want\w*|requir\w*|lik(?:e|es|ed)\b|expect\w*|insist\w*"
    r"|instruct\w*|demand\w*|rules?\b|wish\w*)"
)
FIRST_PERSON = re.compile(r"(^|(?<=[-*+]\s)|(?<=[.!?;,]\s)|(?<=:\s))I('ll|'ve|'m| )(?=\w|\s)")
PRONOUNS = re.compile(r"\b(I|my|me|myself)\b")
MIN_GROUNDED = 0.5
_TAG = re.compile(r"^\[(user|assistant|tool|result|hidden|compaction|status|delta|note)\b([^\]]*)\](.*)$")
_OMITTED = re.compile(r"^\[… .*omitted.*…\]$")
_CALL = re.compile(r"^[^()\s]+\((.*)\)$", re.S)  # a tool block: `name(argument summary)`
_COMMAND_ARG = re.compile(r'^(?:command|cmd)=(\[.*?\]|"(?:[^"\\]|\\.)*")', re.S)


@dataclass
class Block:
    tag: str  # user | assistant | tool | result | hidden | …
    text: str


def blocks(text: str) -> list[Block]:
    """The tagged blocks of a rendered transcript (the header lines before the first tag and the
    renderer's own omission markers dropped)."""
    out: list[Block] = []
    for line in (text or "").split("\n"):
        m = _TAG.match(line)
        if m:
            out.append(Block(m.group(1), m.group(3).lstrip()))
        elif _OMITTED.match(line.strip()):
            out.append(Block("note", line.strip()))  # never part of the block before it
        elif out:
            out[-1].text += "\n" + line
    for b in out:
        b.text = b.text.strip()
    return out


def command_of(b: Block) -> str | None:
    """The shell command line of a tool block, if it ran one."""
    call = _CALL.match(b.text)
    m = _COMMAND_ARG.match(call.group(1).strip()) if call else None
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    return argv_line(value)


@dataclass
class Source:
    """The transcript, split by who said what, in the forms the checks need."""

    user: str
    agent: str  # assistant text + tool calls and results
    words: set[str]  # every word of the transcript, lower-cased
    flat: str  # the transcript and its list-form commands, white space collapsed, lower-cased

    @classmethod
    def of(cls, transcript_text: str) -> Source:
        said = blocks(transcript_text)
        user = "\n".join(b.text for b in said if b.tag == "user")
        agent = "\n".join(b.text for b in said if b.tag != "user")
        commands = "\n".join(line for b in said if b.tag == "tool" and (line := command_of(b)))  # list-form commands
        words = {w.lower() for w in WORD.findall(transcript_text)}
        return cls(user, agent + "\n" + commands, words, _flat(transcript_text + "\n" + commands))


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace('\\"', '"')).lower()


def norm(line: str) -> str:
    s = BULLET.sub("", line.strip()).strip()
    return re.sub(r"\s+", " ", s).strip(" .;:!?").lower()


def content_words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text) if len(w) >= 4 and w.lower() not in STOP]


def is_content(line: str) -> bool:
    s = line.strip()
    return bool(s) and not HEADING.match(s) and not s.startswith(("```", "---"))


def unloop(line: str) -> str:
    """One copy of each sentence of a line (a model looping inside one line)."""
    m = BULLET.match(line)
    prefix, body = (m.group(1), line[m.end() :]) if m else ("", line)
    parts = SENTENCE.split(body)
    if len(parts) < 2:
        return line
    kept: list[str] = []
    for p in parts:
        if not any(near(norm(p), norm(k)) for k in kept):
            kept.append(p)
    return prefix + " ".join(kept)


def cut_reason(line: str, vocab: set[str], answer_words: dict[str, int]) -> str | None:
    s = line.rstrip()
    if s.count("`") % 2:
        return "unbalanced backticks"
    tail = re.sub(r"[\s*_]+$", "", s)
    if tail.endswith((",", "(", "[", "{", "/", "=", "→", "->", " -", ":")) and not HEADING.match(s):
        return "ends mid-sentence"
    last = WORD.findall(tail[-40:])
    if last and tail.endswith(last[-1]):
        w = last[-1].lower()
        if w in DANGLING:
            return "ends on a dangling word"
        if len(w) >= 3 and w not in vocab and answer_words.get(w, 0) <= 1:
            return "ends mid-word"
    return None


def trim_to_sentence(line: str, vocab: set[str], answer_words: dict[str, int]) -> str | None:
    """The line up to its last complete sentence, or None when nothing complete is left."""
    m = BULLET.match(line)
    prefix, body = (m.group(1), line[m.end() :]) if m else ("", line)
    parts = SENTENCE.split(body)
    while len(parts) > 1:
        parts.pop()
        candidate = prefix + " ".join(parts)
        if len(" ".join(parts)) >= 12 and cut_reason(candidate, vocab, answer_words) is None:
            return candidate
    return None


def grounded(line: str, src: Source) -> bool:
    spans = [c.strip() for c in CODE.findall(line) if len(c.strip()) >= 3]
    if spans and not any(_flat(c) in src.flat for c in spans):
        return False
    words = content_words(CODE.sub(" ", line)) + [w for c in spans for w in content_words(c)]
    return not words or sum(w in src.words for w in words) / len(words) >= MIN_GROUNDED


def _share(words: list[str], text: str) -> float:
    low = text.lower()
    return sum(w in low for w in words) / len(words) if words else 0.0


def not_the_users_wish(line: str, src: Source) -> bool:
    """A wish the line gives the user ("the user prefers …") that what the user said does not hold
    and the rest of the session does (a page, a file, a command's output the agent read)."""
    m = USER_WISH.search(line)
    if not m:
        return False
    rest = content_words(CODE.sub(lambda c: c.group(1), line[m.end() :]))
    return bool(rest) and _share(rest, src.agent) >= 0.5 and _share(rest, src.user) < 0.5


def attribute(line: str, src: Source) -> str:
    """Who did or said it, from the event roles (see the module docstring)."""
    m = USER_ACTS.search(line)
    if m:
        rest = content_words(CODE.sub(lambda c: c.group(1), line[m.end() :]))
        if rest and _share(rest, src.agent) >= 0.5 and _share(rest, src.agent) > _share(rest, src.user):
            line = _to_agent(line, m)
    m = USER_SAID.search(line)
    q = QUOTE.search(line, m.end()) if m else None
    if m and q:
        quoted = _flat(q.group(1) or q.group(2))
        if quoted not in _flat(src.user) and quoted in _flat(src.agent):
            line = _to_agent(line, m)
    elif m:  # "the user said: <their words, unquoted>": quote them
        rest = line[m.end() :].lstrip(" :")
        if len(rest) >= 8 and _flat(rest) in _flat(src.user):
            line = line[: m.end()] + ": " + '"' + rest.replace('"', "'") + '"'
    if PRONOUNS.search(QUOTE.sub("", CODE.sub("", line))):
        b = BULLET.match(line)
        body = line[b.end() :] if b else line
        if len(body) >= 8 and _flat(body) in _flat(src.user):  # the user's own words, unattributed
            return (b.group(1) if b else "") + 'The user said: "' + body.replace('"', "'") + '"'
        parts = re.split(r"(\"[^\"]*\"|`[^`]*`)", line)  # never rewrite inside quotes or code
        line = "".join(p if p[:1] in ('"', "`") else _agent_voice(p) for p in parts)
    return line


def _agent_voice(text: str) -> str:
    text = FIRST_PERSON.sub(_third_person, text)
    text = re.sub(r"\bmyself\b", "itself", text)
    text = re.sub(r"\b[Mm]y\b", "its", text)
    return re.sub(r"\bme\b", "the agent", text)


def _to_agent(line: str, m: re.Match) -> str:
    """`line` with the word "user" of match `m` replaced by "agent" (same case)."""
    at = line.lower().index("user", m.start())
    word = "Agent" if line[at] == "U" else "agent"
    return line[:at] + word + line[at + 4 :]


def _third_person(m: re.Match) -> str:
    start = m.start() == 0 or m.string[: m.start()].rstrip().endswith((".", "!", "?", ":", "-", "*", "+"))
    word = {"'ll": "the agent will", "'ve": "the agent has", "'m": "the agent is", " ": "the agent "}[m.group(2)]
    return (m.group(1) or "") + (word[0].upper() + word[1:] if start else word)


def clean_text(text: str, src: Source, max_chars: int, memory: bool) -> tuple[str, list[str]]:
    """One field cleaned (see the module docstring), and what went. `memory`: the raw memory, where
    every line `clean.why_not_memory` names goes; a rollout summary (a recap) loses its markers only."""
    notes: list[str] = []
    answer_words = Counter(w.lower() for w in WORD.findall(text or ""))
    out: list[str] = []
    seen = Seen()
    fence = False
    for raw in (text or "").replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if line.strip().startswith("```"):
            fence = not fence
        if fence or not is_content(line):  # a fence line is no content either
            out.append(line)
            continue
        if BOILERPLATE.search(line):
            notes.append("boilerplate")
            continue
        not_memory = why_not_memory(line) if memory else ("omission marker" if is_marker(line) else None)
        if not_memory:
            notes.append(f"{not_memory} dropped")
            continue
        line = unloop(line)
        why = cut_reason(line, src.words, answer_words)
        if why:
            trimmed = trim_to_sentence(line, src.words, answer_words)
            notes.append(f"cut-off line {'trimmed' if trimmed else 'dropped'} ({why})")
            if trimmed is None:
                continue
            line = trimmed
        if not grounded(line, src):
            notes.append("ungrounded line dropped")
            continue
        if not_the_users_wish(line, src):
            notes.append("a wish the user never said dropped")
            continue
        line = attribute(line, src)
        key = norm(line)
        if seen.near(key):
            notes.append("duplicate line dropped")
            continue
        seen.add(key)
        out.append(line)
    return cap_lines(_drop_empty_headings(out), max_chars), notes


def _drop_empty_headings(lines: list[str]) -> list[str]:
    out: list[str] = []
    for i, line in enumerate(lines):
        if HEADING.match(line.strip()):
            level = len(line.strip()) - len(line.strip().lstrip("#"))
            nxt = next((r for r in lines[i + 1 :] if r.strip()), "")
            nxt_level = len(nxt.strip()) - len(nxt.strip().lstrip("#")) if HEADING.match(nxt.strip()) else 0
            if not nxt or (nxt_level and nxt_level <= level):
                continue
        out.append(line)
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n").split("\n") if text.strip() else []


def cap_lines(lines: list[str], max_chars: int) -> str:
    """The head of `lines`, whole lines within `max_chars`, never ending on a heading."""
    out, used = [], 0
    for line in lines:
        if used + len(line) + 1 > max_chars:
            break
        out.append(line)
        used += len(line) + 1
    while out and HEADING.match(out[-1].strip() or "#"):
        out.pop()
    return "\n".join(out).strip()


# --- scope ---------------------------------------------------------------------------------------
QUOTED = re.compile(r"\"([^\"\n]{6,})\"|“([^”\n]{6,})”")
MIN_SHARE = 0.5
_SENTENCE_OR_LINE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")


def _folded(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def backing_words(item: str, user_sentences: list[str]) -> list[str]:
    """The user's sentences an item rests on: those it quotes, else those sharing ≥ half of its
    content words (at least two)."""
    quotes = [_folded(a or b) for a, b in QUOTED.findall(item)]
    said = [s for s in user_sentences if any(q in _folded(s) or _folded(s) in q for q in quotes)]
    if said:
        return said
    words = set(content_words(QUOTED.sub(" ", untag(item))))
    if len(words) < 2:
        return []
    shared = [(s, len(words & set(content_words(s)))) for s in user_sentences]
    return [s for s, n in shared if n >= 2 and n / len(words) >= MIN_SHARE]


def scope_items(raw_memory: str, transcript_text: str) -> tuple[str, list[str]]:
    """(raw memory with `[scope: global]` on the items the user stated as general, notes)."""
    if not raw_memory.strip():
        return raw_memory, []
    said = [s.strip() for b in blocks(transcript_text) if b.tag == "user" for s in _SENTENCE_OR_LINE.split(b.text)]
    users = [s for s in said if len(s) >= 3]  # the user's sentences and lines
    out, notes, tagged, refused = [], [], 0, 0
    for line in raw_memory.split("\n"):
        if not BULLET.match(line):
            out.append(untag(line) if is_tagged_global(line) else line)
            continue
        general = any(stated_as_general(s) for s in backing_words(line, users))
        if is_tagged_global(line) and not general:
            refused += 1
        tagged += general
        out.append(tag(line) if general else untag(line))
    if tagged:
        notes.append(f"scope: {tagged} item(s) global (the user's words)")
    if refused:
        notes.append(f"scope: {refused} global tag(s) of the model not backed by the user's words: kept in the project")
    return "\n".join(out), notes
