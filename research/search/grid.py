"""Leave-one-set-out grid search of fusion weights over cached rankings (`variants.py`).

    python -m research.search.grid CACHE.npz [LEXVAR.npz] --rankings a,b,c --grid 0,1,2 --k 3,5,10

For each development set held out, the grid point with the most hits@3 + sum of RR@10 on the other sets is chosen
and scored on the held-out set; the pooled held-out figures are the CV estimate. Rankings named `base@variant`
replace `base` with that array from LEXVAR.npz.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from research.search.variants import load, rank_positions


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("extra", nargs="*")
    ap.add_argument("--rankings", required=True)
    ap.add_argument("--grid", default="0,1,2,3")
    ap.add_argument("--k", default="3,5,10,20")
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--fixed", default="", help="name=weight,... added to every point")
    args = ap.parse_args()
    c = load(args.cache)
    extra = {}
    for path in args.extra:
        z = np.load(path)
        extra.update({k: z[k] for k in z.files})
    names = args.rankings.split(",")
    fixed = [kv.split("=") for kv in args.fixed.split(",") if kv]
    q, n = c.per_article["lex_article"].shape

    def scores(name: str) -> np.ndarray:
        return extra[name] if "@" in name else c.per_article[name]

    orders = {nm: rank_positions(scores(nm), args.depth, nm.startswith("lex")) for nm in names + [f for f, _ in fixed]}
    gold = np.zeros((q, n + 1), dtype=bool)
    for i, g in enumerate(c.golds):
        gold[i, g] = True
    ins = ~c.oos
    sets = np.array(c.sets)
    grid = [float(x) for x in args.grid.split(",")]
    ks = [float(x) for x in args.k.split(",")]
    rows = np.arange(q)[:, None]
    results = []
    for k in ks:
        rr = 1.0 / (k + np.arange(1, args.depth + 1))
        contrib = {}
        for nm in orders:
            m = np.zeros((q, n + 1))
            np.add.at(m, (rows, np.where(orders[nm] < 0, n, orders[nm])), rr[None, :])
            m[:, n] = 0
            contrib[nm] = m
        base = np.zeros((q, n + 1))
        for f, w in fixed:
            base += float(w) * contrib[f]
        for ws in itertools.product(grid, repeat=len(names)):
            if not any(ws) and not fixed:
                continue
            fused = base.copy()
            for w, nm in zip(ws, names, strict=True):
                fused += w * contrib[nm]
            fused[:, n] = -1
            top = np.argsort(-fused, axis=1, kind="stable")[:, :10]
            topscore = np.take_along_axis(fused, top, 1)
            found = np.take_along_axis(gold, top, 1) & (topscore > 0)
            first = np.where(found.any(1), found.argmax(1) + 1, 0)
            hit = (first > 0) & (first <= 3) & ins
            rrv = np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0) * ins
            results.append(((k, *ws), hit, rrv))
    set_names = sorted(set(c.sets))
    tot_h = tot_r = 0.0
    chosen = []
    for held in set_names:
        train = sets != held
        test = sets == held
        best = max(results, key=lambda r: r[1][train].sum() + r[2][train].sum())
        tot_h += best[1][test].sum()
        tot_r += best[2][test].sum()
        chosen.append((held, best[0]))
    nin = int(ins.sum())
    best = max(results, key=lambda r: r[1].sum() + r[2].sum())
    print("rankings", names, "fixed", fixed)
    print(f"LOSO CV: R@3 {tot_h / nin:.4f} MRR@10 {tot_r / nin:.4f}  (n={nin})")
    print(f"in-sample best {best[0]}: R@3 {best[1].sum() / nin:.4f} MRR@10 {best[2].sum() / nin:.4f}")
    from collections import Counter

    print("fold choices:", Counter(ch for _, ch in chosen).most_common(4))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
