"""Phase 1 for a small local model: the memory is built from the transcript's evidence, the model
only writes one short, checkable sentence.

A 1.5B model asked for the whole `memory_save` schema loops, invents preferences, attributes the
agent's actions to the user and runs out of tokens mid-word. Here:

1. `evidence.gather` copies out the user's rules and facts (verbatim, quoted), the commands and
   their outcome, failure shields (error → the agent's explanation → what fixed it), the agent's
   findings and last word, and a procedure when the user asked for one to be kept;
2. one model step (`SUMMARY_TOOL`, ≈ 300 prompt tokens, ≤ 96 output tokens): a one-sentence recap
   of the task and its outcome plus a slug, checked against the transcript (a sentence that is not
   grounded is replaced by the user's own request);
3. the raw memory (kind headings that Phase 2 merges mechanically) and the rollout summary are
   rendered deterministically from 1 and 2.
"""

from __future__ import annotations

import re

from dsh_memory.errors import LLMOutputError, LLMTruncatedError
from dsh_memory.llm.base import ToolSpec
from dsh_memory.phase1.evidence import Evidence, Shield

# Headings of the raw memory; Phase 2 (consolidation/mechanical.py) groups bullets by them.
RULES = "## Rules and preferences (the user's words)"
FACTS = "## Project facts (the user's words)"
SHIELDS = "## Failure shields"
COMMANDS = "## Commands that worked"
FINDINGS = "## Agent findings"
PROCEDURE = "## Procedure"
KINDS = (RULES, FACTS, SHIELDS, COMMANDS, FINDINGS, PROCEDURE)

SUMMARY_MAX_CHARS = 200
MAX_FINDINGS = 4
MAX_COMMANDS = 6
MAX_STEPS_SHOWN = 12
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


_FIRST = re.compile(r"(^|(?<=[.!?:;]\s))I('ll|'ve|'m| )")


def third_person(sentence: str) -> str:
    """An agent sentence with its "I" made "the agent" (it is quoted nowhere)."""

    def sub(m: re.Match) -> str:
        word = {"'ll": "the agent will", "'ve": "the agent has", "'m": "the agent is", " ": "the agent "}[m.group(2)]
        return m.group(1) + (word[0].upper() + word[1:] if not m.group(1) else word)

    s = _FIRST.sub(sub, sentence.strip())
    s = re.sub(r"(?<=\s)I(?=\s)", "the agent", s)
    s = re.sub(r"\bmyself\b", "itself", s)
    s = re.sub(r"\bme\b", "the agent", s)
    return re.sub(r"\b(my|My)\b", "its", s)


def digest(ev: Evidence, cwd: str | None) -> str:
    """The facts the model sees: short, all copied from the transcript."""
    lines = [f"Working directory: {cwd or '(unknown)'}"]
    lines += [f"- The user asked: {_quote(r)}" for r in ev.requests[:3]]
    lines += [f"- The user said: {_quote(r)}" for r in (ev.rules + ev.user_facts)[:3]]
    if ev.commands:
        shown = [f"{_code(c.line)} ({'ok' if c.ok else 'failed'})" for c in ev.commands[:MAX_COMMANDS]]
        lines.append("- Commands run: " + ", ".join(shown))
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


def _shield_line(s: Shield) -> str:
    line = f"- {_code(s.command)} failed: {_code(s.error)}"
    if s.explanation:
        line += f". Cause (the agent): {third_person(s.explanation).rstrip('.')}"
    if s.fixed_by:
        after = f" after editing {', '.join(_code(p) for p in s.edited[:3])}" if s.edited else ""
        line += f". Worked again{after}: {_code(s.fixed_by)}"
    return line if line.endswith((".", "`", '"')) else line + "."


def raw_memory(ev: Evidence, task: str) -> str:
    out: list[str] = []
    if ev.rules:
        out += [RULES, *(f"- The user said: {_quote(r)}" for r in ev.rules)]
    if ev.user_facts:
        out += [FACTS, *(f"- The user said: {_quote(f)}" for f in ev.user_facts)]
    if ev.shields:
        out += [SHIELDS, *(_shield_line(s) for s in ev.shields)]
    ok = [c for c in ev.ok_commands if not c.startswith(("cat ", "ls", "grep ", "pip show", "sed -n"))]
    if ok:
        heads = {c.line: c.result_head for c in ev.commands if c.ok}
        out.append(COMMANDS)
        for c in ok[:MAX_COMMANDS]:
            out.append(f"- {_code(c)}" + (f" → {heads[c]}" if heads.get(c) else ""))
    explained = {s.explanation for s in ev.shields}
    findings = [f for f in ev.findings if f not in explained][:MAX_FINDINGS]
    if findings:
        out += [FINDINGS, *(f"- {third_person(f)}" for f in findings)]
    if ev.procedure:
        out.append(f"{PROCEDURE}: {task}")
        out += [f"{i}. {step}" for i, step in enumerate(ev.procedure, 1)]
    return "\n".join(out)


def rollout_summary(ev: Evidence, task: str) -> str:
    out = ["## Task", task, "", "## What happened"]
    steps: list[str] = []
    for c in ev.commands:
        step = f"- Ran {_code(c.line)}: " + ("ok" if c.ok else f"failed ({_code(c.first_error)})")
        if c.ok and c.result_head:
            step += f" ({c.result_head})"
        if not steps or steps[-1] != step:
            steps.append(step)
    steps += [f"- edit: {_code(p)}" for p in ev.edited]
    out += steps[:MAX_STEPS_SHOWN]
    if ev.outcome:
        out += ["", "## Outcome", third_person(ev.outcome.split("\n")[0][:600])]
    return "\n".join(out)


def _fallback_task(ev: Evidence) -> str:
    from dsh_memory.phase1.evidence import sentences

    first = " ".join(sentences(ev.first_prompt)[:2])[:300] or "(no request)"
    return f"The user asked: {_quote(first)}"


def slug_ok(slug: str, src) -> bool:
    """At least half of the slug's words (3+ letters) occur in the transcript."""
    words = [w for w in re.split(r"[^a-z0-9]+", slug.lower()) if len(w) >= 3 and not w.isdigit()]
    return bool(words) and sum(w in src.words for w in words) * 2 >= len(words)


def check_recap(summary: str, src) -> str | None:
    """Why the model's recap sentence cannot be used as is, or None."""
    from dsh_memory.phase1.postprocess import BOILERPLATE, PRONOUNS, cut_reason, grounded

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


def extract_in_steps(llm, ev: Evidence, *, cwd: str | None, max_tokens: int):
    """The ExtractionOutput for one non-trivial session (see the module docstring)."""
    from dsh_memory.phase1.output import ExtractionOutput
    from dsh_memory.phase1.postprocess import Source
    from dsh_memory.transcript.redact import redact

    summary, slug, notes, (tokens_in, tokens_out) = ask_recap(llm, ev, cwd, max_tokens)
    src = Source.of(digest(ev, cwd) + "\n" + ev.user_text + ev.agent_text)
    if not slug_ok(slug, src):
        notes.append(f"slug {slug[:60]!r} not from the transcript: made from the request")
        slug = " ".join((ev.requests or [ev.first_prompt])[0].split()[:6])
    why = check_recap(summary, src)
    if why:
        notes.append(f"recap sentence not used ({why}): the user's request instead — {summary[:200]!r}")
        summary = _fallback_task(ev)
    return ExtractionOutput(
        raw_memory=redact(raw_memory(ev, (ev.requests or [ev.first_prompt[:120]])[0])),
        rollout_summary=redact(rollout_summary(ev, summary)),
        rollout_slug=redact(slug),
        model=getattr(llm, "model", ""),
        provider=getattr(llm, "provider", ""),
        notes=notes,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
    )
