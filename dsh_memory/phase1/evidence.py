"""What a session holds that a future agent should know, read from its events.

The evidence writer (`phase1/steps.py`) builds memory from this alone, and every provider's no-op
gate reads it. It is read from the session's events after the watermark, never from the rendered
transcript, so the budget's omitted middle and the renderer's markers never become memory. Each
string is a redacted copy of what the session says, picked by deterministic rules: the user's
standing rules (`user_words.py`) with the agent's restatement, commands that build, test or run
the project, also through a subagent (`commands.py`), failure shields (`shields.py`), the agent's
facts and conclusions (`facts.py`), the code map and what the agent wrote down for later sessions
(`codemap.py`), tripwires (`tripwires.py`), the plan (below), the outcome and the requests.
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from pydantic import BaseModel, Field

from dsh_memory.models import EventKind, Session
from dsh_memory.phase1.chinese import is_chinese, said_of_the_thing
from dsh_memory.phase1.clean import CODE, TASK_VERB, clip, clip_prose, is_table_row, says_little, second_person
from dsh_memory.phase1.codemap import Change, changes, created_by, documented, edits_of, gist, saved_notes
from dsh_memory.phase1.command_line import in_folder
from dsh_memory.phase1.commands import Command, Run, commands, is_build_command, normalize_command, said_to_work
from dsh_memory.phase1.facts import (
    _PATHLIKE,
    BULLET,
    best_facts,
    conclusions,
    fact_score,
    fixed_later,
    lead_lists,
    prose,
    sentences,
)
from dsh_memory.phase1.narrow import scratch_runs
from dsh_memory.phase1.outcome import ESCALATED, failed, informative_error, ran_in, script_of, shell_line
from dsh_memory.phase1.paths import relative
from dsh_memory.phase1.postprocess import STOP
from dsh_memory.phase1.sentence_kinds import ACK, CAUSE, FIRST_PERSON, HEDGE, PROGRESS, STATE, STATUS_MARK
from dsh_memory.phase1.shields import Shield, advised, shields
from dsh_memory.phase1.that_day import NEXT_RUN, OF_THAT_DAY
from dsh_memory.phase1.tripwires import read_path, tripwires
from dsh_memory.phase1.typed import own_sentences
from dsh_memory.phase1.user_words import (
    DEICTIC,
    GUESS,
    MAX_RULE_CHARS,
    OF_THE_WORK,
    QUESTION,
    USER_FACT,
    rule_text,
    said_again,
)
from dsh_memory.transcript.redact import redact

ALTERNATIVES = re.compile(r"`[^`\n]+`(?:\s*(?:/|\bor\b)\s*`[^`\n]+`)+")  # "a quick `go run`/`go test`"

MAX_RULES = 6
MAX_TRIVIAL_USER_CHARS = 400  # the no-op gate: more user text than this may hold something
# Asked for a procedure, not a word of the domain ("items from the checklist of recruitment", "a stored procedure")
PROCEDURE_ASK = re.compile(
    r"\b(?:remember (?:this|the|these) (?:steps|process|procedure)|for next time|the steps are|step by step"
    r"|(?:write|save|record|make|give|keep|turn (?:this|it) into)(?: me| us)? (?:a|the) (?:procedure|checklist|runbook)"
    r"|as a (?:checklist|procedure|runbook)|(?:the|this|that|a) procedure (?:for|to)\b)",
    re.I,
)
# A call that never ran: the user turned it down (Claude Code's answer; Codex's "… rejected by
# user"), or the harness cancelled it because a call beside it failed ("Sibling tool call errored").
NOT_RUN = re.compile(
    r"\s*(?:<tool_use_error>)?\s*(?:The user doesn't want to proceed with this tool use\b|"
    r"[^\n]{0,60}\brejected by (?:the )?user\b|Sibling tool call errored\b|Cancelled: parallel tool call\b)"
)
# The title of what a prompt pastes after its words ("Implement the following plan:\n\n# Plan: X").
_TITLE = re.compile(r"^#{1,3}[ \t]+(?:(?:Plan|Task|Spec|Goal)[ \t]*:[ \t]*)?(\S[^\n]{2,120})$", re.M)
# A script fetched and run at once (`curl … | sh`, `sh -c "$(wget …)"`, `bash <(curl …)`): what a page
# or a README told the agent, never a check or a setup step a next session is told to repeat.
RUNS_A_DOWNLOAD = re.compile(
    r"\b(?:curl|wget|fetch|iwr|invoke-webrequest)\b[^|;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+)?"
    r"(?:(?:ba|z|da|k|fi)?sh|python3?|node|perl|ruby|iex)\b|[$<]\(\s*(?:curl|wget)\b",
    re.I,
)
AGENT_TOOLS = {"task", "agent", "spawn_agent"}  # subagents: their prompt can name the command they run
EDIT_TOOLS = {"edit", "write", "multiedit", "apply_patch", "str_replace", "create", "notebookedit"}


class Rule(BaseModel):
    text: str  # the user's words
    agent: str = ""  # the agent's restatement right after, when it gave one


class Evidence(BaseModel):
    """What one session (delta) holds, copied from its events; see the module docstring."""

    cwd: str | None = None
    rules: list[Rule] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    shields: list[Shield] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    user_facts: list[str] = Field(default_factory=list)  # the user's statements about the project
    requests: list[str] = Field(default_factory=list)
    edited: list[str] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)  # the files changed and what they define
    documented: list[str] = Field(default_factory=list)  # commands written into CLAUDE.md, AGENTS.md…
    agent_notes: list[str] = Field(default_factory=list)  # the agent's own saved memory notes
    tripwires: list[str] = Field(default_factory=list)  # warnings in the project's files it read
    conclusions: list[str] = Field(default_factory=list)  # the turns' last words that name things (the recap's)
    plan: list[str] = Field(default_factory=list)  # what it set out to do: task lists, plans (the recap's)
    outcome: str = ""
    procedure: list[str] = Field(default_factory=list)
    tool_calls: int = 0
    user_chars: int = 0
    first_prompt: str = ""

    def source_text(self) -> str:
        """Every string the evidence holds: what the writer's clean-up checks its lines against."""
        parts = [r.text + "\n" + r.agent for r in self.rules] + [c.line for c in self.commands]
        parts += [f"{s.command}\n{s.error}\n{s.cause}\n{s.fix}" for s in self.shields]
        parts += self.facts + self.conclusions + self.user_facts + self.requests + self.edited + self.procedure
        parts += [c.path + " " + " ".join(c.symbols) for c in self.changes] + self.documented + self.agent_notes
        parts += [*self.tripwires, *self.plan, self.outcome, self.first_prompt]
        return "\n".join(parts)


def trivial_reason(evidence: Evidence) -> str | None:
    """The no-op gate: why the session holds nothing durable (no tool used, no rule, preference or
    project fact from the user, little user text: a greeting, a general question), or None when it
    may. Such a session produces no memory and costs no model call, whatever the writer."""
    if evidence.tool_calls or evidence.rules or evidence.user_facts:
        return None
    if evidence.user_chars > MAX_TRIVIAL_USER_CHARS:
        return None
    if not evidence.user_chars:
        return "no human prompt"
    return "no tool use and no rule or preference from the user"


# What a restatement may not bring that the rule does not say: a command line or a URL (the agent's
# next message may relay a page or a file it read, and it would ride on the user's rule).
_NOT_RESTATED = re.compile(r"`[^`\n]*\s[^`\n]*`|\b[a-z][a-z0-9+.-]*://\S+", re.I)


def _agent_restatement(text: str, rule: str) -> str:
    """The agent's first sentence after a user's rule, when it restates it: it shares a word with
    the rule that is no cue ("never", "always", `STOP`), states something (no progress, no first or
    second person, no guess) and brings no command line or URL the rule does not hold."""
    said = {w.lower() for w in re.findall(r"[A-Za-z][\w.-]{3,}", rule)} - STOP
    # a list's item is what the agent did or found ("- Tabbed main panel (PDL Editor + Logs)"), not its word on the rule
    items = [ln for ln in text.splitlines() if BULLET.match(ln)]
    for s in sentences(text)[:3]:
        if any(s[:40] in ln for ln in items):
            continue
        if any(m.group(0) not in rule for m in _NOT_RESTATED.finditer(s)):
            continue
        s = ACK.sub("", s).strip()
        short = len(s) < 25 or len(s.split()) < 5  # "Sample comment style now.": a caption, no sentence
        if short or s.endswith(("?", ":")) or PROGRESS.match(s) or FIRST_PERSON.search(CODE.sub("", s)):
            continue
        if re.match(r"(?:yes|no|yep|nope|yeah)\b", s, re.I):
            continue  # "Yes, it's feasible, …": the answer to a question the prompt also asked
        if not said & {w.lower().strip(".`") for w in re.findall(r"[A-Za-z][\w.-]{3,}", s)}:
            continue
        if second_person(s) or is_table_row(s) or s.startswith("#") or STATUS_MARK.search(s) or HEDGE.search(s):
            continue  # (a report's heading or ticked line says what was done: "## ✅ Commit created"; a guess)
        if is_chinese(s) and not said_of_the_thing(s):
            continue  # … said in Chinese: its next step ("先確認 …"), its narration
        return clip_prose(s[0].upper() + s[1:], 200)
    return ""


def gather(session: Session, since_seq: int | None = None) -> Evidence:
    """The evidence of `session`'s events after `since_seq` (all of them when None)."""
    events = [e for e in session.events if (since_seq is None or e.seq > since_seq) and e.seq >= session.inherited_cut]
    cwd = session.cwd
    ev = Evidence(cwd=redact(cwd) if cwd else cwd)  # `cwd` itself stays raw: paths are made relative to it
    results = {e.tool_call_id: e for e in events if e.kind is EventKind.TOOL_RESULT and e.tool_call_id}
    runs: list[Run] = []
    spoken: list[tuple[int, str, int]] = []  # (seq, sentence, turn) of the agent's messages
    edits: list[tuple[int, str, str]] = []  # (seq, path, what a small edit changed)
    texts: list[tuple[str, str]] = []  # (path, text written there)
    reads: list[tuple[str, str]] = []  # (path, what a read of it returned)
    planned: list[str] = []  # the agent's task lists, plans and subagent tasks
    created: set[str] = set()  # the files the session created
    saved: list[str] = []  # what it saved through a memory tool
    pending_rules: list[Rule] = []
    turns: list[tuple[bool, list[str]]] = [(False, [])]  # (asked for a procedure, its steps that worked)
    last_msg: dict[int, int] = {}  # turn index -> seq of its last assistant message
    own = own_sentences(events)
    for i, e in enumerate(events):
        turn = len(turns) - 1
        turn_ok = turns[-1][1]
        if e.kind is EventKind.HUMAN:
            words, prompt = own[e.seq]
            # asked in the user's words, not a word of a pasted plan ("… verbose checklists")
            turns.append((bool(PROCEDURE_ASK.search(words)), []))
            ev.user_chars += len(words)
            # "Implement the following plan:" and the pasted plan's title is what was asked
            found = _TITLE.search(e.text or "") if words.rstrip().endswith(":") else None
            title = f" {redact(found[1].strip())}" if found else ""
            said = words.rstrip() + title
            if says_little(said) and (e.text or "").lstrip().startswith("/"):  # "8107": "/erk:plan-implement 8107"
                said = redact((e.text or "").strip().splitlines()[0])
            ev.first_prompt = ev.first_prompt or clip(said, 400)
            pending_rules = []
            for n, s in enumerate(prompt):
                if text := rule_text(prompt, n):
                    said_before = next((o for o in ev.rules if said_again(text, o.text)), None)
                    if said_before is None:
                        ev.rules.append(r := Rule(text=text))
                        pending_rules.append(r)
                    elif len(text) > len(said_before.text):  # the fuller wording of the same rule
                        said_before.text = text
                elif ran := said_to_work(s):  # a run on the user's machine the session never saw
                    if len(ev.user_facts) < MAX_RULES and (fact := f"this worked: `{ran}`") not in ev.user_facts:
                        ev.user_facts.append(fact)
                elif (
                    USER_FACT.match(s)
                    and not DEICTIC.match(s)  # "This is not appropriate …": said of the work at hand
                    and not QUESTION.search(s)
                    and "?" not in s  # "so this is aligned with what X does ? this is the research below:"
                    and not s.endswith(":")  # … and what it introduces is pasted
                    and not TASK_VERB.match(s)  # "Confirm dashboard changes are complete": a task
                    and not GUESS.search(s)  # a guess, in a discussion ("… which is probably causing this")
                    and not OF_THE_WORK.search(s)
                    # how the checkout stood ("… is up to date"), where a branch was ("… v1 is at b8d967c")
                    and not STATE.search(CODE.sub(" x ", s))
                    and not OF_THAT_DAY.search(s)
                    and len(s) <= MAX_RULE_CHARS
                    and (CODE.search(s) or _PATHLIKE.search(s))
                ):
                    if s not in ev.user_facts and len(ev.user_facts) < MAX_RULES:
                        ev.user_facts.append(clip(s, 220))
                elif len(s) >= 12 and len(ev.requests) < 6:
                    ev.requests.append(clip(s + title if n == len(prompt) - 1 and s.endswith(":") else s, 200))
        elif e.kind is EventKind.ASSISTANT:
            text = redact(e.text or "")
            if not text.strip():
                continue
            ev.outcome = text
            for r in pending_rules:
                r.agent = _agent_restatement(text, r.text)
            pending_rules = []
            last_msg[turn] = e.seq
            said = prose(text)
            spoken += [(e.seq, s, turn) for s in sentences(said) + lead_lists(said)]
        elif e.kind is EventKind.TOOL_CALL:
            ev.tool_calls += 1
            name = (e.tool_name or "").lower()
            result = results.get(e.tool_call_id)
            if result is None and i + 1 < len(events) and events[i + 1].kind is EventKind.TOOL_RESULT:
                result = events[i + 1]
            output = (result.text or "") if result is not None else ""
            if NOT_RUN.match(output):
                continue  # turned down or cancelled: it neither ran nor failed (nor edited)
            planned += plan_items(name, e.arguments)
            line, arguments = shell_line(e), e.arguments
            if line is not None and line.startswith("apply_patch"):  # Codex's patch through its shell tool
                name, line, arguments = "apply_patch", None, line
            read = read_path(name, arguments, line)
            bad = failed(result) if line is not None or read else False
            if read and result is not None and not bad:
                reads.append((redact(relative(read.strip(), cwd)), output))
            if line is not None:
                line = normalize_command(redact(in_folder(line, ran_in(e))), cwd)  # where it ran, if not here
                error = informative_error(redact(output)) if bad else ""  # (no result: not failed)
                script = redact(script_of(line, output)) if not bad else ""
                escalated = bool(ESCALATED.search(str(e.arguments)))
                background = isinstance(e.arguments, dict) and e.arguments.get("run_in_background") is True
                runs.append(Run(e.seq, line, bad, error, escalated, script=script, background=background))
                if not bad:
                    turn_ok.append(f"`{line}`")
                continue
            if name in AGENT_TOOLS and isinstance(e.arguments, dict):
                prompt = str(e.arguments.get("prompt") or "")
                bad = bool(re.search(r"\b(failed|failing|errors?)\b", output[:300], re.I)) and not re.search(
                    r"\b(passed|succeeded|all checks)\b", output[:300], re.I
                )
                via = str(e.arguments.get("subagent_type") or e.arguments.get("agent_type") or "")[:40]
                prompt = ALTERNATIVES.sub(" ", prompt)  # it ran one of them, or none: which, nothing says
                spans = CODE.findall(prompt) + prompt.splitlines()
                # a prompt's line may say what to expect of it: "gofmt -l color/ (empty output)", "… (if available)"
                lines = (re.sub(r"\s+\([A-Za-z][^()`]*\)$", "", s.strip().removeprefix("$ ")) for s in spans)
                cmds = dict.fromkeys(normalize_command(redact(s), cwd) for s in lines)
                runs += [Run(e.seq, cmd, bad, "", False, via=via) for cmd in cmds if is_build_command(cmd)]
                continue
            if not failed(result):  # (a write refused, then made again, is one note)
                saved += [redact(n) for n in saved_notes(name, arguments)]
            if name not in EDIT_TOOLS:
                continue
            created.update(redact(relative(p.strip(), cwd)) for p in created_by(name, arguments, output))
            for path, written in edits_of(name, arguments):
                path = redact(relative(path.strip(), cwd))
                edits.append((e.seq, path, redact(gist(arguments))))
                texts.append((path, redact(written)))
                turn_ok.append(f"edit `{path}`")
    ev.edited = list(dict.fromkeys(path for _, path, _ in edits))
    ev.procedure = next((ok[:12] for asked, ok in turns if asked and len(ok) >= 3), [])
    assistant = [(seq, s, last_msg[t] == seq) for seq, s, t in spoken]  # (seq, sentence, in a turn's last message)
    ev.outcome = clip(ev.outcome, 1200)
    for r, scratch in zip(runs, scratch_runs([r.line for r in runs]), strict=True):
        r.scratch = scratch
    ev.commands = [c for c in commands(runs) if not RUNS_A_DOWNLOAD.search(c.line)]
    ev.changes = changes(texts, cwd, created)
    documented_commands, ev.agent_notes = documented(texts)
    ran = {c.line for c in ev.commands}
    ev.documented = [
        c
        for c in documented_commands
        if c.split(" # ")[0] not in ran and len(c) <= 160 and not RUNS_A_DOWNLOAD.search(c)
    ][:MAX_RULES]  # whole
    notes = list(dict.fromkeys(ev.agent_notes + saved))[:MAX_RULES]
    ev.agent_notes = [n for n in (clip_prose(n, 320) for n in notes) if n]
    ev.tripwires = [redact(w) for w in tripwires(reads, ev.edited)]
    ev.plan = [redact(p) for p in best_items(planned)]

    def cause(failed_seq: int, worked_seq: int, failure: str) -> str:
        """The agent's first sentence between a failure and the run that worked that explains it:
        a cause cue and a word of the failing command or its error."""
        named = _words(failure)
        for seq, s, _ in assistant:
            # Addressed to the user, said of the thing: "Your ssh-agent has…" → "The ssh-agent has…"
            s = re.sub(r"\bYour\b", "The", re.sub(r"\byour\b", "the", s))
            if failed_seq < seq <= worked_seq and fact_score(s, CAUSE) and named & _words(s) and not NEXT_RUN.search(s):
                return s
        return ""

    ev.shields = shields(runs, edits, cause)
    ev.shields += advised(runs, assistant, cause, ev.shields)
    explained = {s.cause for s in ev.shields}
    changed = [(seq, f"{path}\n{written}") for (seq, path, _), (_, written) in zip(edits, texts, strict=True)]
    closed = fixed_later(assistant, changed)  # a gap the session closed after saying it
    said = [a for a in assistant if a[1] not in closed]
    ev.facts = best_facts([a for a in said if a[1] not in explained])
    ev.conclusions = conclusions(said, set(ev.facts))  # the recap shows every fact already
    ev.rules = ev.rules[:MAX_RULES]
    return ev


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][\w-]{3,}", text)}


# --- the plan -------------------------------------------------------------------------------------
# What the session set out to do, in the agent's own words: its task lists (`TodoWrite`,
# `TaskCreate`, Codex's `update_plan`), its plans (`ExitPlanMode`, `.claude/plans/*.md`) and the
# tasks it handed to subagents. A session that ends without a summary says what it did nowhere
# else; the recap keeps these items (searchable, not injected).
MAX_PLAN_CHARS = 900
MAX_FROM_ONE = 3  # items taken from one plan or one subagent prompt
TODO_TOOLS = {"todowrite", "taskcreate", "update_plan"}
PLAN_TOOLS = {"exitplanmode"}
_PLAN_FILE = re.compile(r"(^|/)\.claude/plans/[^/]+\.md$")
_NAMES = re.compile(r"`[^`\n]+`|[\w.-]+/[\w./-]+|\b[\w-]+\.[a-z]{1,4}\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ x]\]\s+)?(.{12,})$")


def plan_items(tool: str, arguments: Any) -> list[str]:
    """The items one tool call plans: a todo list's entries, a plan's list items that name
    something, a subagent task's description with its prompt's first items that name something."""
    if not isinstance(arguments, dict):
        return []
    if tool in TODO_TOOLS:
        todos = arguments.get("todos") or arguments.get("plan")
        if isinstance(todos, list):
            said = [str(t.get("content") or t.get("step") or "") for t in todos if isinstance(t, dict)]
            return [s.strip() for s in said if s.strip()]
        subject, about = str(arguments.get("subject") or ""), str(arguments.get("description") or "")
        return [f"{subject}: {about}" if subject and about else subject or about] if subject or about else []
    if tool in PLAN_TOOLS:
        return _named_items(str(arguments.get("plan") or ""))
    if tool == "write" and _PLAN_FILE.search(str(arguments.get("file_path") or "")):
        return _named_items(str(arguments.get("content") or ""))
    if tool in AGENT_TOOLS:
        what = str(arguments.get("description") or "").strip()
        items = _named_items(str(arguments.get("prompt") or arguments.get("message") or ""))
        return ([f"Subagent: {what}"] if what else []) + items
    return []


def _named_items(text: str) -> list[str]:
    """A plan's list items that name something (its first MAX_FROM_ONE)."""
    items = (m.group(1) for m in map(_ITEM.match, text.splitlines()) if m and _NAMES.search(m.group(1)))
    return [item.strip().replace("**", "") for item in islice(items, MAX_FROM_ONE)]


def best_items(items: list[str]) -> list[str]:
    """The plan's items for the recap: those naming something first, each once, within
    MAX_PLAN_CHARS, in the session's order."""
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        item = clip(" ".join(item.split()), 220)
        if item.lower() not in (s.lower() for s in seen):
            seen[item] = n
    ranked = sorted(seen, key=lambda s: (not _NAMES.search(s), seen[s]))
    out, used = [], 0
    for item in ranked:
        if used + len(item) > MAX_PLAN_CHARS:
            continue
        out.append(item)
        used += len(item)
    return sorted(out, key=seen.__getitem__)
