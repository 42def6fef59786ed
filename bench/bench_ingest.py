"""Ingestion benchmark: discovery, render+redact throughput, transcript size vs Codex-style JSON.

Run:  python bench/bench_ingest.py [--sessions 10000] [--sample 300] [--budget-tokens 24000]

1. Discovery of N generated DSH sessions (clones of the DSH fixtures under fresh ids in a
   temp DSH_HOME) when nothing changed since the previous scan. Goal: <= 1 s for 10,000.
2. Render+redact throughput of the fixture logs (tests/fixtures/corpus) plus a sample of the generated sessions,
   compared with a plain `json.loads` of every line of the same logs (ratio = our time / theirs).
   Reading (`readers.load`) is timed separately.
3. Tokens of our budgeted transcript vs a Codex-style phase-1 input for the same sessions: the
   session's surviving items serialized as compact JSON ResponseItems (user/assistant messages,
   function_call with JSON-string arguments, function_call_output; reasoning, developer and
   injected context dropped, as Codex does), then redacted. Goal: ratio <= 0.20 for sessions
   over 5k tokens, with every human prompt still present in our transcript.
4. Human prompts kept on the conformance corpus (tests/fixtures/conformance: real Claude Code
   transcripts and Codex rollouts, expected.json counted by hand): a prompt is kept when the
   reader finds it and the budgeted transcript shows it as a [user] block. Goal: 100%, and nothing
   else counted as human. Also the token ratio of those sessions vs Codex-style JSON.

Nothing here is a test: it prints numbers. The temp dir is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FIXTURES = REPO / "tests" / "fixtures" / "corpus"  # the in-repo fixture corpus
CONFORMANCE = REPO / "tests" / "fixtures" / "conformance"  # real transcripts, prompts counted by hand

from dsh_memory import readers  # noqa: E402
from dsh_memory.models import EventKind, Session, SessionRef  # noqa: E402
from dsh_memory.settings import SourceRoots  # noqa: E402
from dsh_memory.transcript.redact import redact  # noqa: E402
from dsh_memory.transcript.render import render_transcript  # noqa: E402
from dsh_memory.transcript.tokens import count_tokens, tokenizer_name  # noqa: E402


def _templates() -> list[Path]:
    """Readable, root, plain DSH fixture logs (the scan's picks), smallest first."""
    roots = SourceRoots(dsh_sessions=FIXTURES / "dsh" / "plain" / "sessions")
    out = []
    for ref in readers.discover(roots, ("dsh",)):
        try:
            s = readers.load(ref)
        except Exception:
            continue
        if s.is_root and s.human_prompts:
            out.append(ref.path)
    return sorted(out, key=lambda p: p.stat().st_size)


def generate(home: Path, n: int, templates: list[Path]) -> None:
    """n session dirs in 100 project dirs; each log is a template with a fresh header id."""
    bodies = []
    for t in templates:
        first, rest = t.read_bytes().split(b"\n", 1)
        bodies.append((json.loads(first), rest))
    sessions = home / "sessions"
    for i in range(n):
        header, rest = bodies[i % len(bodies)]
        sid = str(uuid.UUID(int=i + 1, version=4))
        d = sessions / f"--home-bench-proj{i % 100:03d}--" / sid
        d.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**header, "id": sid}, ensure_ascii=False).encode()
        (d / "session.v4.jsonl").write_bytes(line + b"\n" + rest)


def bench_discovery(home: Path, n: int) -> None:
    roots = SourceRoots(dsh_sessions=home / "sessions")
    t0 = time.perf_counter()
    refs = readers.discover(roots, ("dsh",))
    cold = time.perf_counter() - t0
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        again = readers.discover(roots, ("dsh",))
        runs.append(time.perf_counter() - t0)
    assert len(refs) == len(again) == n, (len(refs), n)
    floor = []
    for _ in range(5):  # the floor on this machine: a bare scandir walk with one stat per log
        t0 = time.perf_counter()
        for project in os.scandir(home / "sessions"):
            for sdir in os.scandir(project.path):
                for f in os.scandir(sdir.path):
                    f.stat()
        floor.append(time.perf_counter() - t0)
    med = statistics.median(runs)
    print(
        f"[1] discovery of {n} DSH sessions, nothing changed: median {med:.3f} s over 5 runs "
        f"(min {min(runs):.3f}, first scan {cold:.3f} s) — goal <= 1 s: {'OK' if med <= 1 else 'MISSED'}; "
        f"bare os.scandir+stat walk: median {statistics.median(floor):.3f} s"
    )


def _corpus(home: Path, sample: int) -> list[SessionRef]:
    refs: list[SessionRef] = []
    for sub in ("plain", "zstd"):
        refs += readers.discover(SourceRoots(dsh_sessions=FIXTURES / "dsh" / sub / "sessions"), ("dsh",))
    refs += readers.discover(
        SourceRoots(
            codex_sessions=FIXTURES / "codex" / "sessions", claude_projects=FIXTURES / "claude-code" / "projects"
        ),
        ("codex", "claude"),
    )
    generated = readers.discover(SourceRoots(dsh_sessions=home / "sessions"), ("dsh",))
    step = max(1, len(generated) // max(1, sample))
    return refs + generated[::step][:sample]


def _raw_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.suffix in (".zst", ".zstd"):
        import zstandard

        out, dec = [], zstandard.ZstdDecompressor()
        while data:  # every (independent) frame
            obj = dec.decompressobj()
            out.append(obj.decompress(data))
            data = obj.unused_data if obj.eof else b""
        data = b"".join(out)
    return [line for line in data.split(b"\n") if line.strip()]


def codex_style_json(session: Session) -> str:
    """The session as Codex's phase 1 would upload it: filtered ResponseItems, compact JSON, redacted."""
    items: list[dict] = []
    for e in session.events:
        if e.seq < session.inherited_cut:
            continue
        if e.kind is EventKind.HUMAN:
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": e.text}]})
        elif e.kind is EventKind.ASSISTANT:
            items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": e.text}]})
        elif e.kind is EventKind.TOOL_CALL:
            args = e.arguments if isinstance(e.arguments, str) else json.dumps(e.arguments, ensure_ascii=False)
            items.append(
                {
                    "type": "function_call",
                    "name": e.tool_name or "",
                    "arguments": args,
                    "call_id": e.tool_call_id or f"call_{e.seq}",
                }
            )
        elif e.kind is EventKind.TOOL_RESULT:
            items.append(
                {"type": "function_call_output", "call_id": e.tool_call_id or f"call_{e.seq}", "output": e.text}
            )
    return redact(json.dumps(items, ensure_ascii=False, separators=(",", ":")))


def bench_render(refs: list[SessionRef], budget: int) -> None:
    lines = {r.path: _raw_lines(r.path) for r in refs}
    nbytes = sum(len(b) for ls in lines.values() for b in ls)
    t0 = time.perf_counter()
    for ls in lines.values():
        for b in ls:
            try:
                json.loads(b)
            except ValueError:  # the damaged-line fixtures
                pass
    t_json = time.perf_counter() - t0

    sessions: list[Session] = []
    t0 = time.perf_counter()
    for r in refs:
        try:
            sessions.append(readers.load(r))
        except Exception:
            continue
    t_load = time.perf_counter() - t0
    sessions = [s for s in sessions if s.events]
    render_transcript(sessions[0], budget_tokens=budget)  # load the tokenizer outside the timing

    t0 = time.perf_counter()
    transcripts = [render_transcript(s, budget_tokens=budget) for s in sessions]
    t_render = time.perf_counter() - t0
    mb = nbytes / 1e6
    print(f"[2] {len(refs)} logs ({mb:.1f} MB of JSONL, {len(sessions)} with events), budget {budget} tokens:")
    print(f"    json.loads of every line: {t_json:.3f} s ({mb / t_json:.0f} MB/s)")
    print(f"    readers.load:             {t_load:.3f} s ({mb / t_load:.1f} MB/s)")
    print(
        f"    render+redact+budget:     {t_render:.3f} s ({mb / t_render:.1f} MB/s of source log, "
        f"{1000 * t_render / len(sessions):.1f} ms/session) — ratio vs json.loads {t_render / t_json:.1f}x "
        f"(load+render {(t_load + t_render) / t_json:.1f}x)"
    )

    rows = []  # (ours, codex-style, session, transcript)
    missing_prompts = 0
    for s, tr in zip(sessions, transcripts, strict=True):
        rows.append((tr.tokens, count_tokens(codex_style_json(s)), s, tr))
        missing_prompts += sum(1 for p in s.human_prompts if p.seq >= s.inherited_cut and redact(p.text) not in tr.text)
    print(
        f"[3] transcript tokens ({tokenizer_name()}) vs Codex-style filtered JSON of the same sessions "
        f"(goal <= 0.20 for > 5k); human prompts missing from our transcripts: {missing_prompts}"
    )
    groups = [
        ("all sessions", rows),
        ("large (Codex-style > 5k tokens)", [r for r in rows if r[1] > 5000]),
        ("small (<= 5k)", [r for r in rows if r[1] <= 5000]),
    ]
    for name, group in groups:
        if not group:
            continue
        ours, theirs = sum(r[0] for r in group), sum(r[1] for r in group)
        med = statistics.median(r[0] / r[1] for r in group if r[1])
        print(
            f"    {name:32s} n={len(group):4d}: ours {ours:>9,} vs {theirs:>9,} → ratio {ours / theirs:.3f} "
            f"({'OK' if ours / theirs <= 0.20 else 'MISSED'}), per-session median {med:.2f}"
        )
    for ours, theirs, s, tr in sorted(rows, key=lambda r: -r[1])[:1]:
        print(
            f"    largest: {s.id[:8]} Codex-style {theirs:,} → ours {ours:,} ({tr.tool_outputs_shortened} outputs "
            f"shortened, {tr.events_omitted} events omitted, all {tr.human_prompts} prompts kept)"
        )


def bench_conformance(budget: int) -> None:
    """Human prompts kept (found by the reader and shown in the budgeted transcript) vs expected.json."""
    expected = json.loads((CONFORMANCE / "expected.json").read_text())
    want = kept = extra = 0
    by_source: dict[str, list[int]] = {}
    ours = theirs = 0
    t0 = time.perf_counter()
    for key, exp in sorted(expected.items()):
        path = CONFORMANCE / key
        st = path.stat()
        ref = SessionRef(
            id=exp["session_id"], source=exp["source"], path=path, size=st.st_size, mtime_ns=st.st_mtime_ns
        )
        s = readers.load(ref)
        tr = render_transcript(s, budget_tokens=budget)
        found = [e.text[:60] for e in s.human_prompts]
        hits = 0
        for head in exp["human_prompts"]:
            if head in found and tr.text.count("[user] " + redact(head)) >= 1:
                found.remove(head)
                hits += 1
        extra += len(found)  # counted as human, not in the hand count
        want, kept = want + len(exp["human_prompts"]), kept + hits
        row = by_source.setdefault(exp["source"], [0, 0, 0])
        row[0], row[1], row[2] = row[0] + 1, row[1] + hits, row[2] + len(exp["human_prompts"])
        theirs_one = count_tokens(codex_style_json(s))
        if theirs_one > 5000:
            ours, theirs = ours + tr.tokens, theirs + theirs_one
    share = kept / want if want else 1.0
    print(
        f"[4] conformance corpus ({len(expected)} sessions, {time.perf_counter() - t0:.1f} s): human prompts kept "
        f"{kept}/{want} = {share:.1%} (goal 100%: {'OK' if kept == want and not extra else 'MISSED'}); "
        f"counted as human but not in the hand count: {extra}"
    )
    for source, (n, hits, total) in sorted(by_source.items()):
        print(f"    {source:6s} n={n:3d}: {hits}/{total} prompts kept")
    if theirs:
        print(f"    sessions > 5k tokens: ours {ours:,} vs Codex-style {theirs:,} → ratio {ours / theirs:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=300, help="generated sessions added to the render corpus")
    ap.add_argument("--budget-tokens", type=int, default=24_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    try:
        t0 = time.perf_counter()
        templates = _templates()
        generate(tmp / "dsh", args.sessions, templates)
        print(
            f"generated {args.sessions} DSH sessions from {len(templates)} fixture templates in "
            f"{time.perf_counter() - t0:.1f} s under {tmp}"
        )
        bench_discovery(tmp / "dsh", args.sessions)
        bench_render(_corpus(tmp / "dsh", args.sample), args.budget_tokens)
        bench_conformance(args.budget_tokens)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
