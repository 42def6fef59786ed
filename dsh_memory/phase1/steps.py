"""The evidence writer: memory built from the session's evidence; the model writes one sentence.

A 1.5B model asked for the whole `memory_save` schema loops, invents preferences, attributes the
agent's actions to the user and runs out of tokens mid-word. So such a model only writes a
one-sentence recap and a slug (`SUMMARY_TOOL`, ≈ 300 prompt tokens, ≤ 224 output tokens), checked
against the evidence (a sentence that is not grounded is replaced by the user's own request); the
raw memory (kind headings that Phase 2 merges mechanically) and the rollout summary are rendered
deterministically from the evidence (`evidence.gather`) and that sentence.
"""

from __future__ import annotations

import re

from dsh_memory.errors import LLMOutputError, LLMTruncatedError
from dsh_memory.llm.base import ToolSpec
from dsh_memory.phase1.chinese import is_chinese
from dsh_memory.phase1.clean import says_little, why_not_memory
from dsh_memory.phase1.codemap import SCRATCH, code_map_lines
from dsh_memory.phase1.evidence import Command, Evidence, Shield
from dsh_memory.phase1.facts import MAX_FACTS, sentences
from dsh_memory.phase1.postprocess import BOILERPLATE, PRONOUNS, Source, cut_reason, grounded
from dsh_memory.phase1.prompt import ExtractionOutput, cwd_line
from dsh_memory.transcript.redact import redact

# Headings of the raw memory; Phase 2 (consolidation/mechanical.py) groups bullets by them.
RULES = "## Rules and preferences (the user's words)"
FACTS = "## Project facts (the user's words)"
SHIELDS = "## Failure shields"
COMMANDS = "## Commands that worked"
FINDINGS = "## Agent findings"
CODE_MAP = "## Code map (files the session changed)"
TRIPWIRES = "## Warnings in the project's files"
PROCEDURE = "## Procedure"
CHECKS = "- Checks that passed:"  # the commands line a project's sessions merge into one
DOCUMENTED = "- The project's agent instructions list:"  # … and the one of its instruction files' commands

SUMMARY_MAX_CHARS = 200
MAX_STEPS_SHOWN = 12
MAX_RECAP_CHARS = 4000  # a recap is searched, not injected: what matters fits, the rest is the transcript's
STEP_MAX_TOKENS = 224  # the grammar caps strings at 1 char per token: ≈ 170 characters of recap

SUMMARY_TOOL = ToolSpec(
    name="session_recap",
    description="Recap one coding-agent session in one sentence and name it.",
    parameters={
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "maxLength": SUMMARY_MAX_CHARS,
                "description": "One sentence: what the agent did for the user and whether it worked.",
            },
            "slug": {"type": "string", "maxLength": 40, "description": "2-5 lowercase words joined by hyphens."},
        },
        "required": ["summary", "slug"],
        "additionalProperties": False,
    },
)

SYSTEM = (
    "You label recorded coding-agent sessions for a memory index. Use only words and names from the "
    "facts you are given. Call the agent 'the agent' and the person 'the user'. No greetings, no advice."
)


def _quote(s: str) -> str:
    return '"' + s.replace('"', "'").strip() + '"'


def _code(s: str) -> str:
    s = s.strip()
    return f"`{s}`" if "`" not in s else _quote(s.replace("`", "'"))


def digest(ev: Evidence, cwd: str | None) -> str:
    """The facts the model sees: short, all copied from the session."""
    lines = [cwd_line(cwd)]
    lines += [f"- The user asked: {_quote(r)}" for r in ev.requests[:3]]
    lines += [f"- The user said: {_quote(r.text)}" for r in ev.rules[:3]]
    if ev.commands:
        lines.append("- Commands that worked: " + ", ".join(_code(c.line) for c in ev.commands))
    if ev.edited:
        lines.append("- Files edited: " + ", ".join(_code(p) for p in ev.edited[:6]))
    if ev.outcome:
        lines.append(f"- The agent's last message: {_quote(ev.outcome[:400])}")
    return "\n".join(lines)


def ask_recap(llm, ev: Evidence, cwd: str | None, max_tokens: int) -> tuple[str, str, list[str], tuple[int, int]]:
    """(summary, slug, notes, (input, output tokens)) from the one model step; empty strings when
    it gave nothing usable."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": digest(ev, cwd) + "\n\nRecap this session with session_recap."},
    ]
    try:
        completion = llm.complete(messages, tool=SUMMARY_TOOL, max_tokens=min(max_tokens, STEP_MAX_TOKENS))
    except LLMTruncatedError as exc:
        completion = exc.partial
        if completion is None:
            return "", "", ["recap step cut off"], (0, 0)
    except LLMOutputError as exc:
        return "", "", [f"recap step unusable: {exc}"], (0, 0)
    args = next((c.arguments for c in completion.tool_calls if c.name == SUMMARY_TOOL.name), {}) or {}
    summary = " ".join(str(args.get("summary") or "").split())
    if summary.count("`") % 2:  # a stray backtick: drop them all rather than the sentence
        summary = summary.replace("`", "")
    if not summary.endswith((".", "!", '"', ")")):  # cut at the grammar's cap: keep its full sentences
        done = re.split(r"(?<=[.!])\s+", summary)[:-1]
        summary = " ".join(done) if done else summary
    slug = str(args.get("slug") or "").strip()
    usage = (completion.usage.input_tokens, completion.usage.output_tokens)
    return summary, slug, list(completion.notes), usage


def _remedy(s: Shield) -> str:
    """What overcame the failure, or (nothing in the session did) what the agent advised."""
    return f"the agent's fix: {s.fix.rstrip('.')}" if s.advised else f"fixed by {s.fix}"


def _shield_line(s: Shield) -> str:
    line = f"- {_code(s.command)} failed: {_code(s.error)}"
    if s.cause:
        line += f" ({s.cause.rstrip('.')})"
    return f"{line}; {_remedy(s)}."


def _span(c: Command) -> str:
    m = re.match(r"^cd\s+(\S+)\s*&&\s*(.+)$", c.line)  # `cd DIR && command`: said apart as "(in `DIR`)"
    d, line = (m.group(1), m.group(2)) if m else ("", c.line)
    what = f" (runs `{c.script}`)" if c.script else ""
    return _code(line) + what + (f" (in `{d}`)" if d else "") + (f" (through the `{c.via}` subagent)" if c.via else "")


def command_lines(commands: list[Command]) -> list[str]:
    """One line for the checks that passed (`bun run test`, `bun run lint` — what to run before
    finishing, together) and one for how the project was set up and run, in the order they first
    worked (a run that failed until a setup step had run comes after it); a `cd DIR &&` said apart
    as "(in `DIR`)"."""
    out = []
    checks = [_span(c) for c in commands if c.check]
    fixers = [c for c in commands if c.fixes and checks]  # said with the checks whose findings they rewrite
    if checks:
        out.append(f"{CHECKS} " + ", ".join(checks + [f"{_span(c)} (fixes what they find)" for c in fixers]))
    runs = [_span(c) + (f" (ran {c.runs}×)" if c.runs > 1 else "") for c in commands if not c.check and c not in fixers]
    if runs:
        out.append("- Set up and run with: " + ", then ".join(runs))
    return out


def documented_line(commands: list[str]) -> str:
    """The commands an agent instruction file gives, each with what it is for when the file says
    (`cmd # why`): a list to pick from ("`mvn verify` — build with all tests; `mvn test -P fast` — no
    regression tests"), not steps in order (a file's blocks list `dev`, `build`, `lint` alike); a
    version manager's selection (`nvm use 20`) first."""
    said = (c.split(" # ", 1) for c in commands)
    return f"{DOCUMENTED} " + "; ".join(
        _code(c[0].strip()) + (f" — {c[1].strip()}" if len(c) > 1 and c[1].strip() else "") for c in said
    )


def raw_memory(ev: Evidence, task: str) -> str:
    out: list[str] = []
    if ev.rules or ev.agent_notes:
        out += [
            RULES,
            *(f"- The user: {_quote(r.text)}" + (f" — {r.agent}" if r.agent else "") for r in ev.rules),
            *(f"- Noted for later sessions: {n}" for n in ev.agent_notes),
        ]
    if ev.user_facts:
        out += [FACTS, *(f"- The user: {_quote(f)}" for f in ev.user_facts)]
    if ev.commands or ev.documented:
        out += [COMMANDS, *command_lines(ev.commands)]
        if ev.documented:
            out.append(documented_line(ev.documented))
    if ev.shields:
        out += [SHIELDS, *(_shield_line(s) for s in ev.shields)]
    if ev.tripwires:
        out += [TRIPWIRES, *(f"- {w}" for w in ev.tripwires)]
    if ev.facts:
        out += [FINDINGS, *(f"- {f}" for f in ev.facts[:MAX_FACTS])]
    code_map = code_map_lines(ev.changes)
    if code_map:
        out += [CODE_MAP, *code_map]
    if ev.procedure:
        out.append(f"{PROCEDURE}: {task}")
        out += [f"{i}. {step}" for i, step in enumerate(ev.procedure, 1)]
    return "\n".join(out)


def _outcome(ev: Evidence) -> str:
    """The agent's last message as a recap: its plain sentences (no first or second person, no
    table rows or markers), at most ~600 characters."""
    out, used = [], 0
    for s in sentences(ev.outcome):
        if why_not_memory(s) or PRONOUNS.search(s) or s.endswith(":") or len(s) < 12:
            continue
        if used + len(s) > 600:
            break
        out.append(s)
        used += len(s) + 1
    return " ".join(out)


def rollout_summary(ev: Evidence, task: str) -> str:
    """The session's recap (searched, not injected): its task, what happened, its procedure, plan
    and outcome, then the facts the handbook had no room for and the turns' conclusions in what
    is left of MAX_RECAP_CHARS (a long session's recap grew to 7,000 characters of them)."""
    out = ["## Task", task]
    steps = [f"- Ran {_code(c.line)}: passed" for c in ev.commands]
    steps += [f"- {_code(s.command)} failed ({_code(s.error)}); {_remedy(s)}" for s in ev.shields]
    steps += [f"- Edited {_code(p)}" for p in ev.edited if not SCRATCH.match(p)][:MAX_STEPS_SHOWN]
    if steps:
        out += ["", "## What happened", *steps[:MAX_STEPS_SHOWN]]
    if ev.procedure:  # the steps the user asked to remember, searchable with the session
        out += ["", "## Procedure", *(f"{i}. {step}" for i, step in enumerate(ev.procedure, 1))]
    plan = ["", "## Plan", *(f"- {p}" for p in ev.plan)] if ev.plan else []  # in the agent's words
    outcome = _outcome(ev)
    tail = ["", "## Outcome", outcome] if outcome else []
    room = MAX_RECAP_CHARS - _size(out + plan + tail)
    more = _fit("## Also found", [f"- {f}" for f in ev.facts[MAX_FACTS:]], room)  # what the handbook had no room for
    conclusions = _fit("## Conclusions", [f"- {c}" for c in ev.conclusions], room - _size(more))
    return "\n".join(out + more + plan + conclusions + tail)


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _fit(heading: str, lines: list[str], room: int) -> list[str]:
    """`heading` and the first of `lines` that fit in `room` characters with it, whole; [] if none do."""
    out = ["", heading]
    for line in lines:
        if _size([*out, line]) > room:
            break
        out.append(line)
    return out if len(out) > 2 else []


def _fallback_task(ev: Evidence) -> str:
    """The recap's task when the model's sentence cannot be used: the user's first request that
    says something ("continue", "yes, go on" say nothing of the task)."""
    said = [ev.first_prompt, *ev.requests]
    first = next((p for p in said if not says_little(p)), ev.first_prompt)
    first = " ".join(sentences(first)[:2])[:300] or "(no request)"
    return f"The user asked: {_quote(first)}"


# Words that name no session ("coding-agent-session-1", "session-12345": a small model's placeholders)
_GENERIC_SLUG = {
    *("session", "sessions", "task", "agent", "coding", "chat", "conversation", "user", "work", "untitled"),
    *("recap", "summary", "rollout"),  # "session-recap"
}


def slug_ok(slug: str, src) -> bool:
    """At least half of the slug's words (3+ letters) occur in the transcript, one names something
    (not only `_GENERIC_SLUG` words), and a number in it (3+ digits) is the transcript's too (not
    "code-review-1234567890")."""
    parts = re.split(r"[^a-z0-9]+", slug.lower())
    words = [w for w in parts if len(w) >= 3 and not w.isdigit()]
    named = set(words) - _GENERIC_SLUG
    numbers = [w for w in parts if len(w) >= 3 and w.isdigit()]
    return bool(named) and sum(w in src.words for w in words) * 2 >= len(words) and all(n in src.flat for n in numbers)


def check_recap(summary: str, src) -> str | None:
    """Why the model's recap sentence cannot be used as is, or None."""
    s = summary.strip()
    if len(s) < 20:
        return "empty or too short"
    if not s.endswith((".", "!", ")", '"')):
        return "cut off"
    if BOILERPLATE.search(s) or PRONOUNS.search(s):
        return "boilerplate or first person"
    if cut_reason(s, src.words, {}) or not grounded(s, src):
        return "not grounded in the transcript"
    return None


def _request(ev: Evidence) -> str:
    return (ev.requests or [ev.first_prompt[:120]])[0]


def grounds(ev: Evidence, cwd: str | None) -> str:
    """What this writer's lines may say: the evidence, the digest the model read, and what is
    rendered from the evidence alone (its template words, "passed", "fixed by"). The model's recap
    sentence is checked against it (`check_recap`) and so is every line by the clean-up, so a
    sentence accepted here is not dropped there."""
    return digest(ev, cwd) + "\n" + ev.source_text() + "\n" + rendered(ev)


def users_words(ev: Evidence) -> str:
    """The user's words the evidence holds, one `[user]` block each: what this writer's items are
    scoped by (`postprocess.scope_items`). Its grounds are no transcript, so a line there that
    starts with `[user]` (the agent's message, a file it wrote) is nobody's words."""
    said = [r.text for r in ev.rules] + ev.user_facts + ev.requests + [ev.first_prompt]
    return "\n".join(f"[user] {' '.join(s.split())}".replace('"', "'") for s in said if s.strip())  # as `_quote`


def rendered(ev: Evidence) -> str:
    """The raw memory and the recap without the model's sentence: all this writer writes alone."""
    return raw_memory(ev, _request(ev)) + "\n" + rollout_summary(ev, "")


def extract_in_steps(llm, ev: Evidence, ground: str, *, cwd: str | None, max_tokens: int):
    """The ExtractionOutput for one non-trivial session (see the module docstring); `ground` is
    `grounds(ev, cwd)`, which the caller's clean-up reads too."""
    summary, slug, notes, (tokens_in, tokens_out) = ask_recap(llm, ev, cwd, max_tokens)
    src = Source.of(ground)
    if not slug_ok(slug, src):
        notes.append(f"slug {slug[:60]!r} not from the transcript: made from the request")
        asked = (ev.requests or [ev.first_prompt])[0]
        slug = " ".join(asked.split()[:6])
        if is_chinese(slug):  # (no spaces between its words: the names it holds, `pnpm test`, the CI badge)
            slug = " ".join(re.findall(r"[A-Za-z][\w.-]+", asked)[:6]) or slug
    why = check_recap(summary, src)
    if why:
        notes.append(f"recap sentence not used ({why}): the user's request instead — {summary[:200]!r}")
        summary = _fallback_task(ev)
    return ExtractionOutput(
        raw_memory=redact(raw_memory(ev, _request(ev))),
        rollout_summary=redact(rollout_summary(ev, summary)),
        rollout_slug=redact(slug),
        model=getattr(llm, "model", ""),
        provider=getattr(llm, "provider", ""),
        notes=notes,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
    )
