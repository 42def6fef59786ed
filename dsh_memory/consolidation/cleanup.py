"""Deterministic clean-up of the handbook files any Phase 2 writes (model or mechanical merge):
Phase 1's line rules (`phase1/postprocess.py`) minus grounding, repeated lines kept once per task
group (two projects may share a rule). The vocabulary that tells a cut word from a real one is
the consolidation's input (raw memories, notes, the current files). Nothing is cut inside a line.
"""

from __future__ import annotations

from collections import Counter

from dsh_memory.phase1.postprocess import (
    BOILERPLATE,
    WORD,
    _near,
    cut_reason,
    is_content,
    norm,
    trim_to_sentence,
    unloop,
)


def clean_handbook(text: str, vocabulary_text: str) -> str:
    vocab = {w.lower() for w in WORD.findall(vocabulary_text or "")}
    counts = Counter(w.lower() for w in WORD.findall(text or ""))
    out: list[str] = []
    seen: list[str] = []
    fence = False
    for raw in (text or "").split("\n"):
        line = raw.rstrip()
        if line.strip().startswith("```"):
            fence = not fence
        if fence or line.strip().startswith("```") or not is_content(line) or line.strip() == "v1":
            if line.startswith("# "):  # a new task group: the same bullet may hold in two projects
                seen = []
            out.append(line)
            continue
        if BOILERPLATE.search(line):
            continue
        line = unloop(line)
        if cut_reason(line, vocab, counts):
            trimmed = trim_to_sentence(line, vocab, counts)
            if trimmed is None:
                continue
            line = trimmed
        key = norm(line)
        if len(key) >= 12 and any(_near(key, k) for k in seen):
            continue
        seen.append(key)
        out.append(line)
    return "\n".join(out).rstrip() + "\n" if any(s.strip() for s in out) else ""
