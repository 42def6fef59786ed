"""Tune the lexical + semantic fusion weights (dsh_memory/readpath/fusion.py) on one half of the
labelled set and score them on the other half, so the reported numbers are not the ones tuned on.

The split is fixed (evaluate.held_out): questions in id order, every other one; fold 1 tunes on
q02, q04, … and scores q01, q03, … (the shipped weights came from it), fold 2 (--both) the
other way round. The search is coordinate descent over small grids, maximising the mean of R@10, Hit@1 and
Line@1 on the tuning half (R@50 is at its ceiling). Needs the `semantic` extra.

    python bench/search_eval/tune_fusion.py [--both]   # the weights found and both halves' scores
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

GRIDS = {
    "W_LINE": [0.0, 0.25, 0.5, 1.0, 2.0],
    "W_ABOVE": [0.0, 0.25, 0.5, 1.0],
    "W_SECTION": [0.0, 0.25, 0.5, 1.0, 2.0],
    "W_UNMATCHED": [0.0, 0.25, 0.5, 1.0, 2.0],
    "FLOOR": [0.2, 0.3, 0.4, 0.5],
    "SEMANTIC_SECTIONS": [0, 5, 10, 20, 40],
    "CONTENT_WORDS": [False, True],
}


def objective(m: dict) -> float:
    return (m["R@10"] + m["Hit@1"] + m["Line@1"]) / 3


START = {  # where the descent starts: no semantic weight (lexical order), the defaults otherwise
    "W_LINE": 0.0,
    "W_ABOVE": 0.0,
    "W_SECTION": 0.0,
    "W_UNMATCHED": 0.0,
    "FLOOR": 0.3,
    "SEMANTIC_SECTIONS": 10,
    "CONTENT_WORDS": False,
}


def tune(fused, qs) -> dict:
    """Coordinate descent (two sweeps) from START over GRIDS on the questions qs."""
    from dsh_memory.readpath import fusion

    best = dict(START)
    for k, v in best.items():
        setattr(fusion, k, v)
    best_score = objective(fused(qs))
    for _ in range(2):
        for name, grid in GRIDS.items():
            for v in grid:
                setattr(fusion, name, v)
                s = objective(fused(qs))
                if s > best_score + 1e-9:
                    best_score, best[name] = s, v
                print(f"  {name}={v}: {s:.4f} (best {best_score:.4f} with {best})", file=sys.stderr)
            setattr(fusion, name, best[name])
    return best


def main() -> None:
    """Fold 1 tunes on the tuning half and scores the held-out half (the shipped weights); with
    --both, fold 2 swaps the halves (a second opinion on whether the fusion generalises)."""
    from evaluate import LineIndex, evaluate, held_out, load, product, scratch_store, table

    from dsh_memory.readpath import embedder, fusion

    if embedder.get() is None:
        sys.exit("the semantic extra is not installed (pip install 'dsh-memory[semantic]')")
    first, second = held_out(load())
    folds = [(first, second)] + ([(second, first)] if "--both" in sys.argv else [])
    shipped = {k: getattr(fusion, k) for k in GRIDS}
    with scratch_store() as store:
        anchor = LineIndex(store)

        def fused(qs) -> dict:
            return evaluate({"f": lambda q: product(store, [q.question], semantic=True)}, qs)["f"]

        for n, (tune_qs, held_qs) in enumerate(folds, 1):
            best = tune(fused, tune_qs)
            print(f"fold {n}: tuned weights {best}" + (" (shipped)" if best == shipped else ""))
            for label, qs in (("tuning half", tune_qs), ("held-out half", held_qs)):
                lexical = evaluate({"lexical only": lambda q: product(store, [q.question], semantic=False)}, qs)
                both = evaluate(
                    {"lexical + semantic (fused)": lambda q: product(store, [q.question], semantic=True)}, qs
                )
                base = evaluate({"FTS5 line index (anchor)": lambda q: anchor.search(q.question)}, qs)
                print(f"fold {n}, {label}:")
                print(table({**base, **lexical, **both}, len(qs)))
        for k, v in shipped.items():
            setattr(fusion, k, v)


if __name__ == "__main__":
    main()
