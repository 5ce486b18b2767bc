"""Score fusion instead of rank fusion: each ranking's per-article scores z-normalised per question (over all
articles), weighted sum; leave-one-set-out over the same grid as `grid.py`.

    python -m research.search.scorefuse CACHE.npz EXTRA.npz... --rankings a,b,c,d
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from research.search.variants import load


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("extra", nargs="*")
    ap.add_argument("--rankings", required=True)
    ap.add_argument("--grid", default="0,1,2,3")
    ap.add_argument("--log-lex", action="store_true")
    args = ap.parse_args()
    c = load(args.cache)
    extra = {}
    for p in args.extra:
        z = np.load(p)
        extra.update({k: z[k] for k in z.files})
    names = args.rankings.split(",")
    mats = {}
    for nm in names:
        s = (extra[nm] if "@" in nm else c.per_article[nm]).astype(np.float64)
        if nm.startswith("lex") and args.log_lex:
            s = np.log1p(np.maximum(s, 0))
        mu = s.mean(1, keepdims=True)
        sd = s.std(1, keepdims=True) + 1e-9
        mats[nm] = (s - mu) / sd
    q, n = mats[names[0]].shape
    gold = np.zeros((q, n), dtype=bool)
    for i, g in enumerate(c.golds):
        gold[i, g] = True
    ins = ~c.oos
    sets = np.array(c.sets)
    results = []
    for ws in itertools.product([float(x) for x in args.grid.split(",")], repeat=len(names)):
        if not any(ws):
            continue
        fused = np.zeros_like(mats[names[0]])
        for w, nm in zip(ws, names, strict=True):
            fused += w * mats[nm]
        top = np.argsort(-fused, axis=1)[:, :10]
        found = np.take_along_axis(gold, top, 1)
        first = np.where(found.any(1), found.argmax(1) + 1, 0)
        hit = (first > 0) & (first <= 3) & ins
        rr = np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0) * ins
        results.append((ws, hit, rr))
    th = tr = 0.0
    for held in sorted(set(c.sets)):
        train, test = sets != held, sets == held
        best = max(results, key=lambda r: r[1][train].sum() + r[2][train].sum())
        th += best[1][test].sum()
        tr += best[2][test].sum()
    nin = ins.sum()
    best = max(results, key=lambda r: r[1].sum() + r[2].sum())
    print(
        f"score fusion LOSO CV: R@3 {th / nin:.4f} MRR@10 {tr / nin:.4f}; in-sample {best[0]} "
        f"{best[1].sum() / nin:.4f} {best[2].sum() / nin:.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
