"""Leave-one-norm-out fit of the four USE-era fusion weights for norms without glosses, each norm alone in its
index (the plain Constitution and the dev laws 2, 3, 4, 8, 9), every norm weighted equally (its mean hits@3 +
mean RR@10), grid points rescaled to the shipped weight sum (only ratios matter for a norm alone).

    python -m research.search.lono PLAIN.npz ALONE.npz...
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

from research.search.cvpool import RANKS, contribs, score
from research.search.variants import load


def main(paths: list[str]) -> int:
    grid = [g for g in itertools.product((0, 0.75, 1.5, 2.25, 3), repeat=4) if any(g)]
    grid = list(dict.fromkeys(tuple(round(w * 5.25 / sum(g), 4) for w in g) for g in grid))
    shipped = grid.index((0.0, 2.25, 0.0, 3.0))
    per = []
    for p in paths:
        c = load(p)
        q, n = c.per_article["lex_article"].shape
        gold = np.zeros((q, n), dtype=bool)
        for i, g in enumerate(c.golds):
            gold[i, g] = True
        con = contribs(c, 5.0)
        ins = ~c.oos
        res = np.array([[h[ins].mean(), r[ins].mean()] for h, r in (score(c, con, ws, gold) for ws in grid)])
        per.append((Path(p).stem, res))
    for held, (name, res) in enumerate(per):
        obj = sum(r[:, 0] + r[:, 1] for j, (_, r) in enumerate(per) if j != held)
        best = int(np.argmax(obj))
        print(
            f"{name:14s} held out: chosen {dict(zip(RANKS, grid[best], strict=False))} -> "
            f"{res[best, 0]:.3f}/{res[best, 1]:.3f}"
            f"  shipped {res[shipped, 0]:.3f}/{res[shipped, 1]:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
