"""Leave-one-set-out fit of the fusion weights of norms without glosses on the pooled development data:
the plain Constitution's 13 question sets (its index alone, no glosses) and the dev laws, each on an index beside
the glossed Constitution (its own questions; the Constitution's questions on those indexes are the guard that
weights lifting a law do not bury the Constitution's answers). Glossed weights stay as shipped.

    python -m research.search.cvpool PLAIN_CACHE.npz LAW_CACHE.npz... [--grid ...] [--k 5]

Units held out: each Constitution set (on the plain index) and each law. The choice maximises, on the rest,
hits@3 + sum of RR@10 over plain-Constitution and law questions, each law's questions weighted by LAW_WEIGHT so
that 30 questions of a law count as much as a Constitution set, plus CONST_GUARD x the Constitution's hits on the
law indexes.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

from research.search.variants import Cache, load, rank_positions

RANKS = ("lex_passage", "lex_article", "dense_passage", "dense_article")
GLOSSED = {"lex_passage": 2.0, "lex_article": 0.0, "dense_passage": 2.0, "dense_article": 0.5}


def contribs(c: Cache, k: float, depth: int = 30) -> dict[str, np.ndarray]:
    q, n = c.per_article["lex_article"].shape
    rr = 1.0 / (k + np.arange(1, depth + 1))
    out = {}
    for nm in RANKS:
        order = rank_positions(c.per_article[nm], depth, nm.startswith("lex"))
        m = np.zeros((q, n + 1))
        np.add.at(m, (np.arange(q)[:, None], np.where(order < 0, n, order)), rr[None, :])
        out[nm] = m[:, :n]
    return out


def score(
    c: Cache, con: dict[str, np.ndarray], ws: tuple[float, ...], gold: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    fused = np.zeros_like(con[RANKS[0]])
    for nm, w in zip(RANKS, ws, strict=False):
        wa = np.where(c.glossed, GLOSSED[nm], w)
        if wa.any():
            fused += con[nm] * wa[None, :]
    top = np.argsort(-fused, axis=1, kind="stable")[:, :10]
    g = np.take_along_axis(gold, top, 1) & (np.take_along_axis(fused, top, 1) > 0)
    first = np.where(g.any(1), g.argmax(1) + 1, 0)
    return (first > 0) & (first <= 3), np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)


def main() -> int:  # noqa: C901 - one experiment read top to bottom
    ap = argparse.ArgumentParser()
    ap.add_argument("plain")
    ap.add_argument("laws", nargs="*")
    ap.add_argument("--grid", default="0,0.75,1.5,2.25,3")
    ap.add_argument("--k", type=float, default=5.0)
    ap.add_argument("--law-weight", type=float, default=3.0)
    ap.add_argument("--guard", type=float, default=0.25)
    ap.add_argument("--total", type=float, default=0.0, help="rescale every grid point to this weight sum")
    ap.add_argument("--show", default="", help="grid points to print per unit kind: a,b,c,d;a,b,c,d")
    args = ap.parse_args()
    grid = list(itertools.product([float(x) for x in args.grid.split(",")], repeat=4))
    grid = [g for g in grid if any(g)]
    if args.total:
        # Only the ratios matter within one norm; the total sets how an unglossed norm competes with glossed ones.
        grid = list(dict.fromkeys(tuple(round(w * args.total / sum(g), 4) for w in g) for g in grid))
    units = []  # (name, hits[grid], rr[grid], weight, is_guard)
    caches = [(Path(args.plain).stem, load(args.plain))] + [(Path(p).stem, load(p)) for p in args.laws]
    for cname, c in caches:
        q, n = c.per_article["lex_article"].shape
        gold = np.zeros((q, n), dtype=bool)
        for i, g in enumerate(c.golds):
            gold[i, g] = True
        con = contribs(c, args.k)
        res = [score(c, con, ws, gold) for ws in grid]
        H = np.array([r[0] for r in res])
        R = np.array([r[1] for r in res])
        sets = np.array(c.sets)
        ins = ~c.oos
        for s in sorted(set(c.sets)):
            m = (sets == s) & ins
            is_law = s.startswith("ley_de_prueba")
            if cname.startswith("cache_plain"):
                units.append((f"plain:{s}", H[:, m].sum(1), R[:, m].sum(1), m.sum(), 1.0, False))
            elif is_law:
                units.append((f"law:{cname}:{s}", H[:, m].sum(1), R[:, m].sum(1), m.sum(), args.law_weight, False))
            else:
                units.append((f"guard:{cname}:{s}", H[:, m].sum(1), R[:, m].sum(1), m.sum(), args.guard, True))

    def objective(keep: np.ndarray) -> np.ndarray:
        tot = np.zeros(len(grid))
        for i, (_name, h, r, _cnt, w, guard) in enumerate(units):
            if keep[i]:
                tot += w * (h if guard else h + r)
        return tot

    cur = (0.0, 2.25, 0.0, 3.0)
    cur_i = grid.index(cur) if cur in grid else None
    cv = {"plain": [0, 0, 0], "law": [0, 0, 0], "guard": [0, 0, 0]}
    base = {"plain": [0, 0, 0], "law": [0, 0, 0], "guard": [0, 0, 0]}
    held_units = [i for i, u in enumerate(units) if not u[5]]
    for i in held_units:
        name = units[i][0]
        # hold out this unit (for a law, also its Constitution guard questions on its index)
        keep = np.array(
            [
                not (
                    j == i
                    or (name.startswith("law:") and units[j][5] and units[j][0].split(":")[1] == name.split(":")[1])
                )
                for j in range(len(units))
            ]
        )
        best = int(np.argmax(objective(keep)))
        kind = name.split(":")[0]
        cv[kind][0] += units[i][1][best]
        cv[kind][1] += units[i][2][best]
        cv[kind][2] += units[i][3]
        if cur_i is not None:
            base[kind][0] += units[i][1][cur_i]
            base[kind][1] += units[i][2][cur_i]
            base[kind][2] += units[i][3]
    best = int(np.argmax(objective(np.ones(len(units), dtype=bool))))
    for kind in ("plain", "law"):
        h, r, n = cv[kind]
        bh, br, bn = base[kind]
        print(
            f"{kind:6s} CV R@3 {h / max(n, 1):.4f} MRR {r / max(n, 1):.4f} (n={n}) | "
            f"shipped weights R@3 {bh / max(bn, 1):.4f} MRR {br / max(bn, 1):.4f}"
        )
    g_best = sum(u[1][best] for u in units if u[5])
    g_cur = sum(u[1][cur_i] for u in units if u[5]) if cur_i is not None else None
    g_n = sum(u[3] for u in units if u[5])
    chosen = dict(zip(RANKS, grid[best], strict=False))
    print("all-data choice", chosen, f"guard hits {g_best}/{g_n} vs shipped {g_cur}")
    for point in [tuple(float(x) for x in p.split(",")) for p in args.show.split(";") if p]:
        i = min(range(len(grid)), key=lambda j: sum(abs(a - b) for a, b in zip(grid[j], point, strict=False)))
        row = []
        for kind in ("plain", "law", "guard"):
            us = [u for u in units if u[0].startswith(kind)]
            n = sum(u[3] for u in us)
            row.append(f"{kind} {sum(u[1][i] for u in us) / n:.4f}/{sum(u[2][i] for u in us) / n:.4f}")
        laws = [f"{u[0].split(':')[1][-4:]}:{int(u[1][i])}" for u in units if u[0].startswith("law")]
        print("point", point, " | ".join(row), laws)
    for kind in ("plain", "law"):
        h = sum(u[1][best] for u in units if u[0].startswith(kind))
        r = sum(u[2][best] for u in units if u[0].startswith(kind))
        n = sum(u[3] for u in units if u[0].startswith(kind))
        print(f"  in-sample {kind}: R@3 {h / max(n, 1):.4f} MRR {r / max(n, 1):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
