"""The agent's sentences that are facts about the project, and the turns' conclusions.

`evidence.gather` hands over every sentence the agent wrote (with its turn position); these rules
pick the ones that state something lasting about the project — a code span or path plus a fact cue
("lives in", "is generated", "requires"), never one of `sentence_kinds` (progress narration, the
worktree's state at that moment, first person, a guess …), a question or a table row — and the
turns' last words that name things.
A sentence that introduces a list of names is read with its items as one fact.
"""

from __future__ import annotations

import re

from dsh_memory.phase1.chinese import HAN_RANGE, KANA, is_chinese, is_chinese_fact, said_of_the_thing
from dsh_memory.phase1.clean import CODE, FENCED, TASK_VERB, TEST_FILE, clip_prose, is_table_row, why_not_memory
from dsh_memory.phase1.near import restates
from dsh_memory.phase1.sentence_kinds import (
    ABOUT_A_TEST,
    CHANGE_NOUN,
    CLAUSE,
    CUT_OFF,
    DANGLING,
    DELEGATED,
    FAULT_NAMED,
    FIRST_PERSON,
    FRAGMENT,
    GAP,
    HEDGE,
    HYPOTHETICAL,
    LIMIT,
    NARRATION,
    PATH_LED,
    PROGRESS,
    QUOTED,
    SHOUTED,
    STATE,
    STATUS_MARK,
    WARNING,
    WAS,
    WHERE_LED,
    breaks,
)
from dsh_memory.phase1.that_day import OF_THAT_DAY, SYMPTOM, VERDICT_LEAD

MAX_FACTS = 8  # in the raw memory (the handbook); the recap keeps up to MAX_RECAP_FACTS
MAX_RECAP_FACTS = 32
MAX_CONCLUSION_CHARS = 2600  # the recap's share of the turns' conclusions (recaps stay well under 4,000)
MAX_FACT_CHARS = 260  # a longer fact ends at its last clause that fits (`clean.clip_prose`)

# Sentence ends: not after "e.g."; after a closing quote too ('… create "checkpoints." The …'); before
# a capital, a code span or a file's name ("Already works today. load.go loops …").
_SENT = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'”)]))(?<!\be\.g\.)(?<!\bi\.e\.)\s+(?=[A-Z`\"'(\[*]|[a-z][\w-]*\.[a-z]{1,5}\b)|\n+"
    r"|(?<=[。！？；])\s*(?=\S)"  # Chinese (and Japanese) full stops, with no space after them
    rf"|(?<=[.!?;])\s+(?=[{HAN_RANGE}])"  # … or typed as ASCII before a Chinese sentence ("不做; 不然 …")
)
BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")  # a list item's marker
_EMPH = re.compile(r"\*\*([^*]+)\*\*|(?<![\w*/])\*(?=[A-Za-z])([^*\n`]+?)(?<=[\w:.!?)])\*(?![\w*/])")
_PATHLIKE = re.compile(  # (not a date: "from 04/27 to 05/03")
    r"(?<![\w/])(?!\d{1,4}/\d{1,4}(?:/\d{1,4})?\b)(?:\.{0,2}/)?[\w.-]+/[\w./-]+|\b[\w-]+\.(?:py|ts|tsx|js|jsx|json|md|toml|ya?ml|go|rs|sh|css|lock|cfg|ini|env)\b"
)
_IDENT = re.compile(r"\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b|\b[A-Z][a-z]+[A-Z]\w+\b")

FACT_CUE = re.compile(
    r"\b(lives? in|lives? under|is in|are in|is at|are at|defined in|located|handled (?:by|in)|comes? from|reads?|"
    r"loads?|uses|requires?|needs?|must|(?<!-)only|never|always|cannot|can't|doesn't|does not|isn't|is not|aren't|"
    r"ignores?|fails?|because|so that|instead of|is generated|auto-generated|gitignored|not on path|expects?|"
    r"is called|calls|runs|wraps|delegates?|mirrors?|points? (?:to|at)|is configured|configured in|is stored|stores?|"
    r"(?:is|are) (?:built|made|created|defined|implemented|rendered|generated|handled|loaded|written|set|kept|"
    r"registered|owned|managed|served) (?:by|in|from|at|under|via)|pinned|passes with|works with|works when|"
    r"unrelated (?:changes|edits|modifications|files)|(?:are|is) unrelated)\b",
    re.I,
)
# A sentence that introduces a list ("Version lives in 5 files to keep in sync:") and its items.
_LEAD_LIST = re.compile(
    r"^(?P<lead>[^\n]{20,200}):[ \t]*\n(?P<items>(?:[ \t]*(?:[-*+]|\d+[.)])[ \t]+[^\n]{1,160}(?:\n|$)){2,10})", re.M
)
_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\n]+\)")


def unemphasized(text: str) -> str:
    """`text` without Markdown emphasis (`**x**`, `*x*`; not a glob's `src/*.ts`)."""
    return _EMPH.sub(lambda m: m[1] or m[2], text)


def prose(text: str) -> str:
    """A message without its fenced blocks: what the agent says, not the code, data or examples it
    shows ("# - Rate limiter at src/middleware/rate-limit.ts uses Redis" in a sample file)."""
    return FENCED.sub("\n", text or "")


def sentences(text: str) -> list[str]:
    """Sentences and list items of a message, Markdown links and emphasis made plain text."""
    # emphasis off first: "**What's suspicious?** If …" is two sentences
    parts = _SENT.split(unemphasized(_LINK.sub(r"\1", text or "")))
    said = (BULLET.sub("", s.strip().lstrip("> ")).replace("**", "").strip().strip("*").strip() for s in parts)
    return [s for s in said if len(s) >= 3]


def lead_lists(text: str) -> list[str]:
    """A sentence that introduces a list, with its items, as one sentence ("Version lives in 5
    files to keep in sync: `a.json`, `b.json`, …"): only lists whose every item names something (a
    code span or a path) in a few words, introduced by a statement (a fact cue, not a proposal); a
    list of prose steps is not one fact."""
    out = []
    for m in _LEAD_LIST.finditer(text or ""):
        items = [unemphasized(BULLET.sub("", ln)).strip().rstrip(".;,") for ln in m["items"].splitlines()]
        items = [i for i in items if i]
        lead = unemphasized(BULLET.sub("", m["lead"].strip().lstrip("#").strip()))  # not "2. **`x.go`**: …"
        if not FACT_CUE.search(lead) or HYPOTHETICAL.search(lead):
            continue  # no statement ("Auto-approve these:") or a proposal ("the step would be:")
        if all(len(i) <= 100 and (CODE.search(i) or _PATHLIKE.search(i)) for i in items):
            out.append(f"{lead}: " + ", ".join(items))
    return out


_SLASHED = re.compile(r"[A-Za-z]+/[A-Za-z]+")  # "lat/lon", "adding/removing", "SSH/curl": a pair of words


def named(s: str) -> list[str]:
    """The things a sentence names: code spans, paths and file names (not two words with a slash
    between them outside a code span), identifiers."""
    plain = CODE.sub(" x ", s)
    paths = [p for p in _PATHLIKE.findall(plain) if not _SLASHED.fullmatch(p)]
    return CODE.findall(s) + paths + _IDENT.findall(plain)


# A file's diff said under its name: "— +4 lines (font imports)", "(new file)", ": 8 include paths swapped"
_DIFF_REPORT = re.compile(
    r"[+-]\d+ lines?\b|\(?new file\)?|\d+ (?:insertions|deletions)"
    r"|\d+ [\w-]+(?: [\w-]+){0,3} (?:swapped|updated|changed|removed|added|renamed|replaced|fixed|moved|deleted)\b"
)


def fact_score(s: str, cue: re.Pattern = FACT_CUE) -> int:
    """How much a sentence of the agent reads as a lasting fact about the project (0: not one):
    a plain statement (no narration, person, table or marker) with a `cue` and something specific."""
    plain = CODE.sub(" x ", s)
    if not (40 <= len(s) <= 400) or s.endswith(("?", ":")) or PROGRESS.match(s) or is_table_row(s):
        return 0
    if s.startswith("#"):
        return 0  # a heading, or a comment of code shown unfenced ("# Response has extreme values …")
    if s.endswith("!") and not WARNING.match(s):
        return 0  # the agent's excitement at what it just found, not a warning said with force
    if STATUS_MARK.search(s) or QUOTED.fullmatch(s) or SHOUTED.search(plain):
        return 0  # … or a quotation: a prompt's or a file's words, not the agent's
    if CUT_OFF.search(plain) or plain.count('"') % 2 or plain.count("(") != plain.count(")"):
        return 0  # … or one cut off, or garbled ("… values far 0 or1 normalized) that produce …")
    if KANA.search(plain):
        return 0  # Japanese: no cues of its own here, and the English ones fire by accident on a name in it
    if is_chinese(plain):  # the agent answered in Chinese: its own cues and kinds
        specific = len(named(s)) if is_chinese_fact(s, cause=cue is not FACT_CUE) else 0
        return (1 + min(specific, 3)) if specific else 0
    if WHERE_LED.match(s) and CODE.search(s):
        return 0 if STATE.search(plain) else 2  # not "Branch: `x` (27 commits ahead of main)"
    led = PATH_LED.match(s)  # "`src/lib/tree.ts` — the tree builder": where something lives
    if led:
        rest, path = s[led.end() :], s[1 : s.index("`", 1)]
        # … but not what was done to it ("— Passes `ctx` to all 3 call sites", "— was corrupted, now …",
        # "— Same remapping for the `x` route"), nor what a test file tests ("— 18 unit tests covering …")
        said = rest[:1].upper() + rest[1:]  # "— removed `<h1>` from the grid" as "Removed …"
        if (
            NARRATION.match(said)
            or TASK_VERB.match(rest)
            or FRAGMENT.match(said)
            or FRAGMENT.match(s)  # … nor a plan's step for it ("— Convert JSON strings to typed ID …")
            or WAS.match(rest)
            or DANGLING.match(rest)
            or STATE.search(CODE.sub(" x ", rest))  # … nor the change said as one ("— Fallback changed from …")
            or OF_THAT_DAY.search(s)  # … nor a linter's finding in it ("`page.tsx`: `A`, `B` unused.")
        ):
            return 0
        if _DIFF_REPORT.match(rest):
            return 0  # … nor its diff's size or count
        if FAULT_NAMED.match(rest) or CHANGE_NOUN.search(rest):
            return 0  # … nor a review's finding or a plan's change under its file ("— Silent data loss …",
            # "— interface method removal")
        if len(rest) < 20 or TEST_FILE.search(path) or re.match(r"(?:Same|Also)\b|[^.]{0,60}→", rest):
            return 0  # … nor a plan's change to it ("`SetParentColors` → real push instead of …")
        return 2
    if s[0].islower() and not re.match(
        r"[\w-]+[./_]\w", s
    ):  # (a file or a name may lead: "gemini-extension.json loads …")
        return 0  # a list item without its lead ("right prompt via `YASH_PS1R` when …", "public `policy` examples …")
    if NARRATION.match(s) or TASK_VERB.match(s) or FRAGMENT.match(s) or DELEGATED.search(s) or " — " in s[:60]:
        return 0  # what was just done or is to do ("Reworked…", "Add X to Y"), a feature list item
    if FIRST_PERSON.search(plain) or why_not_memory(s) or s.count("`") % 2:
        return 0
    if ABOUT_A_TEST.search(s) and not re.search(r"\bbecause\b", s):
        return 0  # … but why a test failed can be how the project works ("… because `BaseSettings` reads `.env`")
    if not cue.search(plain):
        return 0
    outside = re.sub(r"\([^()]*\)", " ", plain)
    if len(re.findall(r"[A-Za-z]{2,}", outside)) < 4 and not cue.search(outside):
        return 0  # a name and its aside: "`sync_params` type (requires migration)", "`x`: `a`, `b` (URL only)"
    if cue is FACT_CUE and (HEDGE.search(plain) or DANGLING.match(s)):
        return 0  # a guess under investigation, or a sentence that needs the one before it
    if cue is FACT_CUE and STATE.search(plain) and not (LIMIT.search(plain) or breaks(plain)):
        return 0  # how the worktree stood at that moment, not how the project works
    if cue is FACT_CUE and SYMPTOM.search(s):
        return 0  # … or a symptom of the bug at hand, a step of one run
    if cue is FACT_CUE and OF_THAT_DAY.search(s):
        return 0  # … or where one run's output went, a tracker's status: no limit or failure makes it last
    specific = len(named(s))
    return (1 + min(specific, 3)) if specific else 0


# A line number: true of the file as it was that day, wrong once it changes ("load.go:119 loops …",
# "`engine.ts:260-267`", "the call on line ~267", "`:702-705` `escape` only …").
_NUM = r"\d+(?:[-–]\d+)?"  # a line or a range
_LINES = rf"lines? ~?{_NUM}(?:(?:,\s*(?:and\s+)?|\s+and\s+){_NUM})*"  # "lines 48, 58 and 61"
_LINE_REF = re.compile(
    r"(\.(?:py|ts|tsx|js|jsx|mjs|go|rs|rb|java|kt|c|h|cc|cpp|cs|swift|php|md|mdx|ya?ml|toml|json|sh|bash|zsh|fish|nu|"
    rf"ps1|lua|sql|vue|svelte|css|scss|ex|exs|erl|heex|scala|dart|hs|ml|zig|xml|html))(?::{_NUM}(?::\d+)?(?:(?:\s*,\s*{_NUM})+(?=\)))?\b"  # "(git.go:156, 340-344)"
    rf"|\s*[/,]\s*{_NUM}(?=\)))"  # "(git.go, 340-344)"
    rf"|\s*\((?:at |on )?{_LINES}\)|(\()(?:at |on )?{_LINES}\s*[-–—:;,]\s*"  # "(line 81 - only warns)": "(only warns)"
    rf"|\s+(?:at|on) {_LINES}\b|`:{_NUM}`\s*"
)


def without_lines(s: str) -> str:
    """`s` without its line numbers (`_LINE_REF`): "`load.go:119` loops" → "`load.go` loops"."""
    return _LINE_REF.sub(lambda m: m[1] or m[2] or "", s)


def best_facts(assistant: list[tuple[int, str, bool]]) -> list[str]:
    """The agent's best fact sentences: specific ones first, those of a turn's last message (its
    conclusions) before its narration, one per subject, without line numbers (`_LINE_REF`); a long
    one up to its last whole clause within MAX_FACT_CHARS, or not at all."""
    scored = []
    for n, (_seq, said, last) in enumerate(assistant):
        s = without_lines(said)
        verdict = VERDICT_LEAD.match(s)
        if verdict:  # … what the verdict checked, said as a sentence of its own
            s = s[verdict.end() : verdict.end() + 1].upper() + s[verdict.end() + 1 :]
        score = fact_score(s)
        whole = clip_prose(s, MAX_FACT_CHARS) if score else ""
        if whole and (len(s) <= MAX_FACT_CHARS or fact_score(whole)):  # what is left of a long one is a fact
            bonus = (1 if last else 0) + (2 if LIMIT.search(CODE.sub(" x ", s)) else 0)
            scored.append((score + bonus, n, whole))
    out: list[str] = []
    for _, _, s in sorted(scored, key=lambda t: (-t[0], t[1])):
        if any(restates(s, o) for o in out):
            continue
        out.append(s)
        if len(out) >= MAX_RECAP_FACTS:
            break
    return out


def conclusions(assistant: list[tuple[int, str, bool]], kept: set[str]) -> list[str]:
    """What the turns concluded, for the recap (searchable, not injected): the sentences of each
    turn's last message that name something (a code span, a path, an identifier), said of the
    thing (no person, no narration, nothing that is never memory nor of that day), the most
    specific first within MAX_CONCLUSION_CHARS, then in session order."""
    pool = []
    for n, (_seq, s, last) in enumerate(assistant):
        plain = CODE.sub(" x ", s)
        if not last or not (30 <= len(s) <= 300) or s.endswith(("?", ":")) or s in kept:
            continue
        if FIRST_PERSON.search(plain) or re.match(
            r"(let me|now|next|ok(ay)?|sure|done|great|perfect|and|but|so)\b", s, re.I
        ):
            continue
        if OF_THAT_DAY.search(s):
            continue  # a run's progress ("Epoch 13/80 — …"), a check's result, a tracker's status
        if is_chinese(plain) and not said_of_the_thing(s):
            continue  # … said in Chinese: the agent's narration, the day's state ("工作區乾淨")
        specific = len(named(s))
        if specific and not why_not_memory(s) and s.count("`") % 2 == 0:
            pool.append((specific, n, s))
    out, used = [], 0
    for _, n, s in sorted(pool, key=lambda t: (-t[0], t[1])):
        if used + len(s) <= MAX_CONCLUSION_CHARS and s not in (o for _, o in out):
            out.append((n, s))
            used += len(s)
    return [s for _, s in sorted(out)]


def fixed_later(assistant: list[tuple[int, str, bool]], changed: list[tuple[int, str]]) -> set[str]:
    """The sentences that say what the code lacks or still does wrong (`GAP`) about a thing the
    session changed after saying it — a file it names, or a name its edit wrote: the gap the
    session then closed ("`getRecentEvaluations` doesn't include `parent_id`", then the edit that
    adds it) is false in the next session, unless it says what the gap breaks (as `STATE`).
    `changed`: (seq, path and text written) per edit."""
    out: set[str] = set()
    for seq, s, _ in assistant:
        plain = CODE.sub(" x ", s)
        gap = GAP.search(plain)
        if not gap or (gap.start() and CLAUSE.search(plain[: gap.start()])) or breaks(plain):
            continue  # … but what such a gap breaks is a lesson ("… still declares `X` — the CLI fails")
        if gap[0].lower() in ("today", "currently") and re.search(r"\balready\b", plain, re.I):
            continue  # "Already works today": nothing for the change to close
        names = {n.strip() for n in named(without_lines(s))}  # (`user.ex:237`: `user.ex`)
        names = {n for n in names if len(n) >= 4}
        if names and any(n in text for q, text in changed if q > seq for n in names):
            out.add(s)
    return out
