"""Near-duplicate checks of the clean-up: `phase1/near.Seen` against the pairwise check it
replaced (each line against every kept one), on the same lines, in one run.

Lines of 14 words drawn from 3,000 (seeded), every tenth a repeat; both sides keep the same
lines (checked). Prints seconds for each and the ratio Seen ÷ pairwise per size; goal: Seen stays
about linear (its 4× size costs ≈ 4× its time) while the anchor grows ≈ 16×.

    python bench/bench_clean.py [--sizes 500 2000 5000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsh_memory.phase1.near import Seen, near  # noqa: E402


def lines(n: int) -> list[str]:
    rng = random.Random(n)
    words = [f"word{i}" for i in range(3000)]
    out: list[str] = []
    for i in range(n):
        out.append(rng.choice(out) if out and i % 10 == 0 else " ".join(rng.choices(words, k=14)))
    return out


def pairwise(keys: list[str]) -> list[str]:
    kept: list[str] = []
    for key in keys:
        if not any(near(key, k) for k in kept):
            kept.append(key)
    return kept


def indexed(keys: list[str]) -> list[str]:
    seen, kept = Seen(), []
    for key in keys:
        if not seen.near(key):
            seen.add(key)
            kept.append(key)
    return kept


def timed(fn, keys):
    started = time.perf_counter()
    kept = fn(keys)
    return time.perf_counter() - started, kept


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000])
    args = ap.parse_args()
    print("| lines | pairwise (anchor) s | Seen s | Seen ÷ anchor |")
    print("|---|---|---|---|")
    for n in args.sizes:
        keys = lines(n)
        anchor, kept_a = timed(pairwise, keys)
        took, kept_b = timed(indexed, keys)
        assert kept_a == kept_b, "Seen kept other lines than the pairwise check"
        print(f"| {n} | {anchor:.2f} | {took:.3f} | {took / anchor:.4f} |")


if __name__ == "__main__":
    main()
