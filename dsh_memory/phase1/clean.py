"""The lines that never become memory, whoever wrote them (Phase 1's `postprocess`, Phase 2's
writers): omission and cut markers, bare exploration commands (how the agent looked, not what it
learned), Markdown table fragments, copy addressed to the reader ("you can now…") and code review
findings (`[medium] …`, `P1: …`). Memory an agent obeys must be knowledge, and said whole: a
sentence too long for its bound ends at a clause, never mid-thought (`clip_prose`); a line that
must be cut says so (`clip`: at a word, outside code spans, with a visible "…").
"""

from __future__ import annotations

import re

MARKER = re.compile(
    r"\[(…|\.\.\.)[^\]]*\b(omitted|truncated|elided|cut)\b|\b(chars|characters|events|lines) omitted\b|^\s*(?:[-*+]\s+)?\[…",
    re.I,
)
EXPLORATION = re.compile(
    r"^(ls|ll|find|fd|cat|bat|nl|head|tail|less|more|grep|egrep|rg|ag|sed -n|awk|wc|pwd|cd|echo|tree|stat|du|which|"
    r"ps|pgrep|lsof|top|printenv|uname|whoami|hostname|"
    r"file|sort|git (?:-C \S+ )?(status|log|diff|show|branch|blame|ls-files|ls-tree|rev-parse|rev-list|merge-base|remote|"
    r"fsck|cat-file|show-ref|for-each-ref|reflog|describe|count-objects)|gh (pr|issue|run) (view|list)"
    r"|gh api)\b"
)
CODE = re.compile(r"`([^`\n]+)`")  # a code span
# A fenced block (```, ~~~, or a longer fence around shorter ones), closed or open to the end of the
# message: code, JSON or a sample shown, not said (facts.prose), or pasted, not typed (typed.user_text)
FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
# A test file, in the layouts languages use (`tests/`, `__tests__/`, `test_x.py`, `x.test.ts`, `x_test.go`).
TEST_FILE = re.compile(r"(^|/)(tests?|__tests__|spec)/|(^|/)test_[^/]*$|[._-](test|spec)\.\w+$|_test\.\w+$")
# A sentence that asks for work ("fix the test", "add a flag"): a task, not a rule or a fact.
TASK_VERB = re.compile(
    r"^(finish|implement|fix|add|create|build|make|update|write|review|revise|change|rename|refactor|remove|delete|"
    r"move|put|set|run|try|look|find|check|investigate|research|help|show|give|explain|tell|open|commit|push|merge|"
    r"rebase|deploy|install|test|debug|restart|continue|go|do|let|can|could|would|please|confirm|verify|read|"
    r"flesh|draft|outline|summarize|summarise)\b",
    re.I,
)
_SOURCE = re.compile(r"\[source:[^\]]*\]|\[scope:[^\]]*\]")
_TABLE = re.compile(r"^\s*(?:[-*+]\s+)?\|[^|\n]*\||^\s*(?:[-*+]\s+)?\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$")
_YOU = re.compile(r"\b(you|your|yours|yourself)\b", re.I)
_RULE_LEAD = re.compile(
    r"^\W*(?:always|never|don'?t|do not|must|make sure|you (?:should|must|need to|have to))\b", re.I
)
_RULE_YOU = re.compile(  # a rule's generic "you": it leads with the rule, or "… before you commit"
    _RULE_LEAD.pattern + r"|\b(?:before|when|if|unless|after|until) you\b", re.I
)
_YOURS = re.compile(r"\b(?:your|yours|yourself)\b", re.I)  # "will run your fans": the reader's own things
_OFFER = re.compile(r"[,;:]\s*you (?:can|could|may|might)\b", re.I)  # "If you lose it, you can follow …": to the user
_WORDS = re.compile(r"[A-Za-z]{2,}")


# A code review's finding ("[medium] `x` makes…", "P1: …"): the state of a change under review.
REVIEW_FINDING = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\[(?:low|medium|high|critical|minor|major|nit)\]|\[?P[0-3]\]?:)", re.I
)


def is_marker(line: str) -> bool:
    return bool(MARKER.search(line or ""))


def is_table_row(line: str) -> bool:
    return bool(_TABLE.match(line or ""))


def says_little(text: str) -> bool:
    """Fewer than three words: "continue", "yes, go on", an issue number alone say nothing of a task."""
    return len(_WORDS.findall(text)) < 3


def second_person(line: str) -> bool:
    """Addressed to the reader, outside quotes and code (the user's quoted words may say "you"):
    a recap told to the user ("your already-open tab"), not a rule's generic "you" ("always run
    the tests before you commit") unless it offers the reader a choice ("if you …, you can …") or
    speaks of the reader's own things outside a rule ("… will run your fans … when you need …")."""
    plain = re.sub(r"\"[^\"]*\"|“[^”]*”|`[^`]*`", " ", line or "")
    if not _YOU.search(plain):
        return False
    return not _RULE_YOU.search(plain) or bool(
        _OFFER.search(plain) or (_YOURS.search(plain) and not _RULE_LEAD.search(plain))
    )


_BARE = re.compile(r"^\s*(?:[-*+]\s+)?(?=\S+\s+[-~/.]|\S+\s+\S*/)")  # a command word, then a flag or a path


def is_exploration(line: str) -> bool:
    """A bullet that is essentially an exploration command: its first command span is one and,
    once its spans, its source tag and whatever follows an arrow are taken out, at most six words
    are left; or a bare one (`ls ~/.cursor/skills # must show 4 dirs`, copied from a code block).
    A line about another command is not (a shield fixed by `gh pr view …`)."""
    bare = _SOURCE.sub("", line or "")
    if _BARE.match(bare) and EXPLORATION.match(bare.strip().lstrip("-*+ ")):
        return True
    spans = CODE.findall(line or "")
    if not spans or not EXPLORATION.match(spans[0].strip()):
        return False
    rest = CODE.sub(" ", _SOURCE.sub(" ", (line or "").split("→")[0]))
    return len(_WORDS.findall(rest)) <= 6


def clip(s: str, n: int = 260) -> str:
    """`s` on one line, at most `n` characters, cut at a word and never inside a code span."""
    s = " ".join(s.split())
    if len(s) <= n:
        return s
    cut = s[:n].rsplit(" ", 1)[0]
    if cut.count("`") % 2:
        cut = cut[: cut.rfind("`")].rstrip()
    return cut.rstrip(",;:") + "…"


# Where a sentence may end early and still say a whole thing: after a sentence, at "; " or a dash,
# or before an aside in parentheses.
_CLAUSE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*])|;\s+|\s+[—–]\s+|\s+(?=\()")


def clip_prose(s: str, n: int) -> str:
    """`s` on one line within `n` characters, said whole: as it is when it fits, else up to its
    last sentence or clause end (". ", "; ", " — ", before a parenthesis) outside code spans, quotes
    and parentheses that keeps at least 40 characters; "" when none does (half a sentence
    is no memory: "the plugin lives (it has its own…" says half a thing)."""
    s = " ".join((s or "").split())
    if len(s) <= n:
        return s
    head = ""
    for m in _CLAUSE_END.finditer(s, 0, n + 1):
        cut = s[: m.start()].rstrip(" ,;:—–-")
        if len(cut) < 40 or cut.count("`") % 2 or cut.count('"') % 2 or cut.count("(") != cut.count(")"):
            continue
        head = cut
    if not head:
        return ""
    return head if head.endswith((".", "!", "?")) else head + "."


def clip_marked(s: str, n: int) -> str:
    """`s` within `n` characters for a line that must say something (an index line's gist): whole
    or up to a clause end (`clip_prose`), else `clip`ped with its visible "…", an open quote closed
    after it — never half a sentence that does not say it was cut."""
    whole = clip_prose(s, n)
    if whole:
        return whole
    cut = clip(s, n - 2)
    return cut + '"' if cut.count('"') % 2 else cut


def why_not_memory(line: str) -> str | None:
    """Why a memory line must not be written (see the module docstring), or None."""
    if is_marker(line):
        return "omission marker"
    if is_table_row(line):
        return "table fragment"
    if is_exploration(line):
        return "exploration command"
    if second_person(line):
        return "second person"
    if REVIEW_FINDING.match(line or ""):
        return "review finding"
    return None
