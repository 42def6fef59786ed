"""The quality metrics of bench/bench_quality.py, computed from a memory root and the sessions.

Written independently of the pipeline's own post-processing (dsh_memory/phase1/postprocess.py),
so the pipeline is never graded by the code that cleans its output.

- fact recall: a fact is found when one of its alternatives is found by the product's search
  (`dsh_memory.readpath.search`: one query → mode `any`; several → `all_within_lines`, 3 lines)
  in MEMORY.md, memory_summary.md or a rollout summary.
- groundedness: share of memory bullets whose content words (≥ 4 letters, not stop words nor
  the connective words of a memory format: "failed", "edited", "cause"…; provenance tags aside) occur
  in the source transcript at least 80 % of the time (raw memory and rollout summary bullets
  against their session; MEMORY.md, summary and skill bullets against all sessions).
- repeated lines: per file, every extra copy of a sentence (≥ 20 characters) of a content line
  (headings excluded): a line looping over three sentences counts three.
- cut-off lines: unbalanced backticks, or ending on a dangling word ("the", "and", a comma…), or
  on a word that occurs nowhere else (in the sources nor elsewhere in memory): "User prefe".
- boilerplate: "as an AI", "I am a coding agent", "here to assist"…
- point of view: first person outside quotes ("I used…"), or "the user ran/fixed/…".
- trivial sessions with memory: a session labelled trivial that left a raw block or a summary.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
STOP = set(
    """
    about above after again against also because been before being below between both but could does
    doing down during each from further have having here into itself just more most much must once only
    other over same should some such than that their them then there these they this those through
    under until very were what when where which while will with would your yours that's it's
    user users agent agents session sessions said says asked wants wanted prefers preference preferences
    memory future task tasks outcome outcomes done work worked works note notes rule rules command
    commands keywords scope applies reuse sources source updated used uses using
    failed edited editing again happened cause
    checks passed changed defines noted later instructions project subagent
    """.split()
)
DANGLING = set("the a an and or to of with for in on at by from as is are was be that this its their your".split())
BOILERPLATE = re.compile(
    r"\bas an ai\b|\bi am (a|an) (coding )?(agent|assistant|ai)\b|\bi'?m (a|an) (coding )?(agent|assistant|ai)\b"
    r"|here to (assist|help) you|\blanguage model\b|how can i (help|assist)",
    re.I,
)
QUOTED = re.compile(r"`[^`]*`|\"[^\"]*\"|“[^”]*”")
FIRST_PERSON = re.compile(r"(^|[\s(])(I|I'm|I've|I'll|I'd|my|me)\b")
USER_ACTS = re.compile(
    r"\b(the )?user (has |had )?(ran|run|executed|edited|fixed|pinned|removed|updated|deployed|loaded|moved|"
    r"implemented|installed|modified|changed|tagged|built|diagnosed|greeted)\b",
    re.I,
)
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
PROVENANCE = re.compile(r"\s*\[(source|sources): [^\]]*\]\s*$")
GOALS = {
    "fact_recall": (">=", 0.80),
    "groundedness": (">=", 0.90),
    "repeated_lines": ("<=", 0),
    "cut_off_lines": ("<=", 0),
    "boilerplate_lines": ("<=", 0),
    "pov_errors": ("<=", 0),
    "trivial_with_memory": ("<=", 0),
    "forbidden_hits": ("<=", 0),
    "skills_found": (">=", 1.0),
    "phase2_seconds": ("<=", 120),
}


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if len(w) >= 4 and w not in STOP]


def source_text(session: Any) -> str:
    parts = [session.id, session.cwd or "", session.title or ""]
    for ev in session.events:
        parts.append(ev.text or "")
        if ev.tool_name:
            parts.append(ev.tool_name)
        if ev.arguments not in (None, ""):
            parts.append(ev.arguments if isinstance(ev.arguments, str) else json.dumps(ev.arguments))
    return "\n".join(parts)


def is_content(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(("#", "---", "```")) and s != "v1"


def bullets(text: str) -> list[str]:
    """Content bullets; provenance (a `[source: slug]` tag, a rollout summary reference) is no claim."""
    out = []
    for ln in text.splitlines():
        m = BULLET.match(PROVENANCE.sub("", ln))
        if m and m.group(1).strip() and "rollout_summaries/" not in ln and "session=" not in ln:
            out.append(m.group(1).strip())
    return out


def grounded(bullet: str, vocab: set[str]) -> bool | None:
    cw = content_words(bullet)
    if not cw:
        return None
    return sum(w in vocab for w in cw) / len(cw) >= 0.8


def repeated(text: str) -> list[str]:
    """Every extra copy of a sentence (≥ 20 characters) of a content line, within one file."""
    units = []
    for ln in text.splitlines():
        ln = PROVENANCE.sub("", ln)
        if is_content(ln):
            for s in re.split(r"(?<=[.!?])\s+", ln.strip(" -*+\t")):
                s = re.sub(r"\s+", " ", s.strip()).lower()
                if len(s) >= 20:
                    units.append(s)
    return [s for s, n in Counter(units).items() for _ in range(n - 1)]


def cut_off(text: str, vocab: set[str]) -> list[str]:
    out, fence = [], False
    body_words = Counter(words(text))
    for ln in text.splitlines():
        s = ln.rstrip()
        if s.strip().startswith("```"):
            fence = not fence
            continue
        if fence or not is_content(s):
            continue
        if s.count("`") % 2:
            out.append(s)
            continue
        tail = s.rstrip()
        if tail.endswith(("*", "_")):  # emphasis closed, or a glob (cwd=*): not a cut
            continue
        last = WORD.findall(tail[-40:])
        if tail.endswith((",", "(", "[", "{", "/", "=", "→", "->")) or tail.endswith(" -"):
            out.append(s)
        elif last and tail.endswith(last[-1]):
            w = last[-1].lower()
            if w in DANGLING or (len(w) >= 3 and w not in vocab and body_words[w] <= 1):
                out.append(s)
    return out


def pov_errors(text: str) -> list[str]:
    out = []
    for ln in text.splitlines():
        if not is_content(ln):
            continue
        bare = QUOTED.sub("", ln)
        if FIRST_PERSON.search(bare) or USER_ACTS.search(bare):
            out.append(ln.strip())
    return out


def found(store: Any, alternatives: list[list[str]]) -> bool:
    from dsh_memory.readpath.search import search

    for alt in alternatives:
        mode = "any" if len(alt) == 1 else "all_within_lines"
        res = search(store, alt, mode=mode, within_lines=3, max_results=50)
        if any(_in_scope(m.path) for m in res.matches):
            return True
    return False


def _in_scope(path: str) -> bool:
    if path in ("MEMORY.md", "memory_summary.md"):
        return True
    return path.startswith("rollout_summaries/") and "/.retired/" not in path


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def measure(store: Any, labels: dict[str, dict], done: dict, roots: Any) -> dict:
    """All metrics for one run (`done` = bench_quality.run_pipeline's result)."""
    from dsh_memory import readers
    from dsh_memory.storage.store_format import parse_front_matter

    sources = {r.id: source_text(readers.load(r)) for r in readers.discover(roots) if r.id in labels}
    vocab = {sid: set(words(t)) for sid, t in sources.items()}
    every = set().union(*vocab.values()) if vocab else set()
    summaries: dict[str, list[tuple[str, str]]] = {}
    for info in store.list_rollout_summaries():
        sid = str((info.provenance or {}).get("session_id") or "")
        summaries.setdefault(sid, []).append((info.rel, parse_front_matter(_read(store.root / info.rel))[1]))
    files: list[tuple[str, str, set[str]]] = []  # (name, text, vocabulary it must be grounded in)
    for sid in labels:
        if done["raw"].get(sid):
            files.append((f"raw:{sid[:8]}", done["raw"][sid], vocab.get(sid, set())))
        for rel, body in summaries.get(sid, []):
            files.append((rel, body, vocab.get(sid, set())))
    for rel in ("MEMORY.md", "memory_summary.md"):
        files.append((rel, _read(store.root / rel), every))
    for skill in sorted((store.root / "skills").glob("*/SKILL.md")):
        files.append((str(skill.relative_to(store.root)), _read(skill), every))

    all_text = "\n".join(t for _, t, _ in files)
    total_b = grounded_b = 0
    ungrounded, dups, cuts, boiler, pov = [], [], [], [], []
    for name, text, voc in files:
        for b in bullets(text):
            g = grounded(b, voc)
            if g is None:
                continue
            total_b += 1
            grounded_b += g
            if not g:
                ungrounded.append(f"{name}: {b[:120]}")
        dups += [f"{name}: {d[:120]}" for d in repeated(text)]
        cuts += [f"{name}: {c[-80:]}" for c in cut_off(text, voc | every)]
        boiler += [f"{name}: {ln.strip()[:120]}" for ln in text.splitlines() if BOILERPLATE.search(ln)]
        pov += [f"{name}: {p[:120]}" for p in pov_errors(text)]

    facts, missed = 0, []
    for sid, lab in labels.items():
        for f in lab.get("facts", []):
            facts += 1
            if not found(store, f["any"]):
                missed.append(f"{sid[:8]} {f['id']}")
    forbidden = [
        f"{sid[:8]}: {s}"
        for sid, lab in labels.items()
        for s in lab.get("forbidden", [])
        if s.lower() in all_text.lower()
    ]
    trivial = [
        sid for sid, lab in labels.items() if lab.get("trivial") and (done["raw"].get(sid) or summaries.get(sid))
    ]
    skill_texts = [_read(p).lower() for p in (store.root / "skills").glob("*/SKILL.md")]
    want_skills = [lab["skill"] for lab in labels.values() if lab.get("skill")]
    skills_ok = sum(any(all(w.lower() in t for w in want) for t in skill_texts) for want in want_skills)
    runs = done["runs"]
    secs = [r["seconds"] for r in runs.values()]
    model_secs = [r["seconds"] for r in runs.values() if r["outcome"] == "extracted" or r["tokens_out"]]
    return {
        "sessions": len(labels),
        "outcomes": dict(Counter(r["outcome"] for r in runs.values())),
        "errors": {sid[:8]: r["error"] for sid, r in runs.items() if r["error"]},
        "fact_recall": round((facts - len(missed)) / facts, 3) if facts else 1.0,
        "facts": facts,
        "missed_facts": missed,
        "groundedness": round(grounded_b / total_b, 3) if total_b else 1.0,
        "bullets": total_b,
        "ungrounded": ungrounded,
        "repeated_lines": len(dups),
        "repeated": dups,
        "cut_off_lines": len(cuts),
        "cut_off": cuts,
        "boilerplate_lines": len(boiler),
        "boilerplate": boiler,
        "pov_errors": len(pov),
        "pov": pov,
        "trivial_with_memory": len(trivial),
        "trivial_sessions": [s[:8] for s in trivial],
        "forbidden_hits": len(forbidden),
        "forbidden": forbidden,
        "skills_found": round(skills_ok / len(want_skills), 3) if want_skills else 1.0,
        "skills_written": len(skill_texts),
        "seconds_per_session_mean": round(sum(secs) / len(secs), 1) if secs else 0.0,
        "seconds_per_session_max": max(secs, default=0.0),
        "seconds_per_model_session_mean": round(sum(model_secs) / len(model_secs), 1) if model_secs else 0.0,
        "phase1_seconds": round(sum(secs), 1),
        "phase2_seconds": done["phase2"]["seconds"],
        "phase2_outcome": done["phase2"]["outcome"],
        "phase2_error": done["phase2"]["error"],
        "memory_md_chars": len(_read(store.root / "MEMORY.md")),
    }


def _meets(value: float, op: str, goal: float) -> bool:
    return value >= goal if op == ">=" else value <= goal


def table(m: dict) -> str:
    """One table: every metric, its goal, value ÷ goal (for the ≥ goals) and pass/fail."""
    rows = [("metric", "value", "goal", "ratio", "ok")]
    for key, (op, goal) in GOALS.items():
        v = m.get(key, 0)
        ratio = f"{v / goal:.2f}" if op == ">=" and goal else ("-" if v <= goal else f"{v} over")
        rows.append((key, str(v), f"{op} {goal}", ratio, "yes" if _meets(v, op, goal) else "NO"))
    for key in (
        "seconds_per_session_mean",
        "seconds_per_model_session_mean",
        "seconds_per_session_max",
        "phase1_seconds",
        "peak_rss_mib",
        "bullets",
        "skills_written",
        "memory_md_chars",
    ):
        rows.append((key, str(m.get(key, "")), "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        f"quality bench: {m.get('sessions')} sessions via {m.get('provider')}/{m.get('model')}; "
        f"outcomes {m.get('outcomes')}; Phase 2 {m.get('phase2_outcome')}"
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for key in ("missed_facts", "ungrounded", "repeated", "cut_off", "boilerplate", "pov", "forbidden", "errors"):
        items = m.get(key) or []
        if items:
            shown = list(items.items()) if isinstance(items, dict) else items
            lines.append(f"{key}: " + "; ".join(str(x) for x in shown[:12]) + (" …" if len(shown) > 12 else ""))
    return "\n".join(lines)
