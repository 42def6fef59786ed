"""Redaction benchmark: recall and false positives on the labelled corpus, and throughput.

Run:  python bench/bench_redact.py [--repeat 5] [--baseline REV] [--detect-secrets]

1. Recall over tests/fixtures/redaction/corpus.json: a secret counts as found when neither it nor
   12 characters of it (that the text holds nowhere else) survive `redact(text)`, and the same for
   `redact_obj` of a JSON record holding the text. False-positive rate: look-alikes that `redact`
   changes at all. Goals: recall ≥ 0.98, FP rate ≤ 0.03. Misses are listed per family.
2. Throughput (MB/s of UTF-8, CPU time, best of --repeat): `redact` over every JSON string of the
   fixture session logs (tests/fixtures/corpus) one by one, and over one ~2 MB document of those
   strings with the corpus texts mixed in; the anchor is a plain `re` scan of the same document
   for runs of 20+ word characters, measured in the same run.
3. --baseline REV: the redactor of git revision REV (default: the one before issue 14) on the same
   corpus and texts, when git and that revision are there. --detect-secrets: Yelp's detect-secrets
   plugins through its Python API on the corpus and a 100 kB slice, when it is installed
   (`pip install detect-secrets==1.5.0`; not a dependency).

Nothing here is a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CORPUS = REPO / "tests" / "fixtures" / "redaction" / "corpus.json"
SESSIONS = REPO / "tests" / "fixtures" / "corpus"
BASELINE = "0dd363e^"  # the redactor before issue 14

from dsh_memory.transcript.redact import redact, redact_obj  # noqa: E402

Redact = Callable[[str], str]


def leaked(text: str, secret: str, out: str) -> bool:
    if secret in out:
        return True
    rest = text.replace(secret, "\0")
    w = min(len(secret), 12)
    return any(out.count(secret[i : i + w]) > rest.count(secret[i : i + w]) for i in range(len(secret) - w + 1))


def quality(fn: Redact, obj_fn: Callable | None, corpus: dict) -> dict:
    misses: dict[str, list[str]] = collections.defaultdict(list)
    for s in corpus["secrets"]:
        text, secret = s["text"], s["secret"]
        bad = leaked(text, secret, fn(text))
        if obj_fn is not None and not bad:
            rec = {"type": "tool_result", "content": text}
            bad = leaked(json.dumps(rec), secret, json.dumps(obj_fn(rec)))
        if bad:
            misses[s["family"]].append(s["shape"])
    fps = [k["shape"] for k in corpus["lookalikes"] if fn(k["text"]) != k["text"]]
    n = len(corpus["secrets"])
    return {
        "found": n - sum(map(len, misses.values())),
        "n": n,
        "recall": 1 - sum(map(len, misses.values())) / n,
        "fp": len(fps),
        "n_look": len(corpus["lookalikes"]),
        "fp_rate": len(fps) / len(corpus["lookalikes"]),
        "misses": dict(misses),
        "fps": fps,
    }


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def session_strings() -> list[str]:
    out = []
    for p in sorted(SESSIONS.rglob("*.jsonl")):
        for line in p.read_text(errors="replace").splitlines():
            try:
                out.extend(_strings(json.loads(line)))
            except ValueError:
                continue
    return out


def cpu_best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def load_baseline(rev: str) -> types.ModuleType | None:
    try:
        src = subprocess.run(
            ["git", "show", f"{rev}:dsh_memory/transcript/redact.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if "secret_rules" in src:
        return None  # that revision already splits the rules out: not the single-file redactor
    mod = types.ModuleType("baseline_redact")
    exec(compile(src, f"{rev}:redact.py", "exec"), mod.__dict__)
    return mod


def detect_secrets_redactor() -> Redact | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
        from detect_secrets.settings import default_settings, get_plugins, get_settings
    except ImportError:
        return None
    ctx = default_settings()
    ctx.__enter__()
    get_settings().disable_filters("detect_secrets.filters.common.is_ignored_due_to_verification_policies")
    plugins = {p.secret_type: p for p in get_plugins()}

    def ds_redact(text: str) -> str:
        found = set()
        for line in text.splitlines():
            for s in scan_line(line) if line.strip() else ():
                p = plugins.get(s.type)
                if (
                    isinstance(p, HighEntropyStringsPlugin)
                    and p.calculate_shannon_entropy(s.secret_value) <= p.entropy_limit
                ):
                    continue
                if s.secret_value:
                    found.add(s.secret_value)
        for v in sorted(found, key=len, reverse=True):
            text = text.replace(v, "[REDACTED:ds]")
        return text

    ds_redact.settings = ctx  # type: ignore[attr-defined]  # keeps its settings alive with the function
    return ds_redact


def report(name: str, q: dict) -> None:
    ok = "ok" if q["recall"] >= 0.98 and q["fp_rate"] <= 0.03 else "below goal"
    print(
        f"{name}: recall {q['found']}/{q['n']} = {q['recall']:.3f} (goal ≥ 0.98), "
        f"false positives {q['fp']}/{q['n_look']} = {q['fp_rate']:.3f} (goal ≤ 0.03) — {ok}"
    )
    for family, shapes in sorted(q["misses"].items()):
        print(f"  missed [{family}] {', '.join(shapes)}")
    if q["fps"]:
        print(f"  changed look-alikes: {', '.join(q['fps'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the previous redactor ('' to skip)")
    ap.add_argument("--detect-secrets", action="store_true", help="also measure detect-secrets when installed")
    args = ap.parse_args()

    corpus = json.loads(CORPUS.read_text())
    shapes = {s["shape"] for s in corpus["secrets"]}
    families = collections.Counter(s["family"] for s in corpus["secrets"])
    print(
        f"corpus: {len(corpus['secrets'])} secrets, {len(shapes)} shapes, {len(families)} families, "
        f"{len(corpus['lookalikes'])} look-alikes"
    )
    report("redact", quality(redact, redact_obj, corpus))
    base = load_baseline(args.baseline) if args.baseline else None
    if base is not None:
        report(f"baseline {args.baseline}", quality(base.redact, base.redact_obj, corpus))
    ds = detect_secrets_redactor() if args.detect_secrets else None
    if args.detect_secrets and ds is None:
        print("detect-secrets: not installed (pip install detect-secrets==1.5.0), skipped")
    if ds is not None:
        report("detect-secrets 1.5 plugins", quality(ds, None, corpus))

    strings = session_strings()
    texts = [s["text"] for s in corpus["secrets"]] + [k["text"] for k in corpus["lookalikes"]]
    mixed: list[str] = []
    for i, s in enumerate(strings):
        mixed.append(s)
        if i % 50 == 0:
            mixed.append(texts[(i // 50) % len(texts)])
    doc = "\n".join(mixed)
    doc = (doc * (2_000_000 // len(doc) + 1))[:2_000_000]
    mb_doc = len(doc.encode()) / 1e6
    mb_str = sum(len(s.encode()) for s in strings) / 1e6
    anchor = re.compile(r"[A-Za-z0-9_]{20,}")
    t_anchor = cpu_best(lambda: anchor.findall(doc), args.repeat)
    t_doc = cpu_best(lambda: redact(doc), args.repeat)
    t_str = cpu_best(lambda: [redact(s) for s in strings], args.repeat)
    print(f"throughput (CPU time, best of {args.repeat}):")
    print(f"  anchor re scan [A-Za-z0-9_]{{20,}}: {mb_doc / t_anchor:.0f} MB/s")
    print(
        f"  redact, one {mb_doc:.1f} MB document: {mb_doc / t_doc:.1f} MB/s ({t_doc / t_anchor:.1f}x the anchor's time)"
    )
    print(f"  redact, {len(strings)} strings ({mb_str:.2f} MB) one by one: {mb_str / t_str:.1f} MB/s")
    if base is not None:
        b_doc = cpu_best(lambda: base.redact(doc), args.repeat)
        b_str = cpu_best(lambda: [base.redact(s) for s in strings], args.repeat)
        print(
            f"  baseline: document {mb_doc / b_doc:.1f} MB/s, strings {mb_str / b_str:.1f} MB/s "
            f"(redact takes {t_doc / b_doc:.2f}x / {t_str / b_str:.2f}x the baseline's time)"
        )
    if ds is not None:
        part = doc[:100_000]
        t_ds = cpu_best(lambda: ds(part), 1)
        print(f"  detect-secrets plugins: {len(part.encode()) / 1e6 / t_ds:.2f} MB/s (100 kB slice)")


if __name__ == "__main__":
    main()
