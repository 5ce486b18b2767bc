"""Offline fusion of cached rankings (`research/search/cache.py`): the engine's weighted RRF replayed in numpy,
with extra rankings (e5-small passages and articles) and a leave-one-set-out grid search.

    python -m research.search.variants CACHE.npz
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

RANKS = ("lex_passage", "lex_article", "dense_passage", "dense_article", "e5_passage", "e5_article")


@dataclass
class Cache:
    per_article: dict[str, np.ndarray]  # ranking → (questions, articles) scores
    golds: list[list[int]]
    sets: list[str]
    oos: np.ndarray
    glossed: np.ndarray
    dense_max: np.ndarray
    lex_max: np.ndarray
    meta: dict[str, Any]


def group_max(values: np.ndarray, groups: np.ndarray, n: int, floor: float) -> np.ndarray:
    out = np.full((values.shape[0], n), floor, dtype=np.float32)
    for g in range(n):
        cols = np.flatnonzero(groups == g)
        if cols.size:
            out[:, g] = np.maximum(out[:, g], values[:, cols].max(1))
    return out


def load(path: str, gloss_offset: float = 0.2) -> Cache:
    z = np.load(path, allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    pa = z["passage_article"]
    n = len(z["glossed"])
    n_p = len(pa)
    lex_p = z["lex_p"]
    lp = group_max(lex_p[:, :n_p], pa, n, 0.0)
    dp = group_max(z["dense_p"], pa, n, -1.0)
    if "gloss_article" in z.files and len(z["gloss_article"]):
        ga = z["gloss_article"]
        lp = np.maximum(lp, group_max(lex_p[:, n_p:], ga, n, 0.0))
        dp = np.maximum(dp, group_max(z["dense_g"] - gloss_offset, ga, n, -1.0))
    e5q = z["e5_q"]
    per = {
        "lex_passage": lp,
        "lex_article": z["lex_a"],
        "dense_passage": dp,
        "dense_article": z["dense_a"],
        "e5_passage": group_max(e5q @ z["e5_p"].T, pa, n, -1.0),
        "e5_article": e5q @ z["e5_a"].T,
    }
    return Cache(
        per,
        meta["golds"],
        meta["sets"],
        np.array(meta["oos"]),
        z["glossed"],
        z["dense_p"].max(1),
        z["lex_a"].max(1),
        meta,
    )


def rank_positions(scores: np.ndarray, depth: int, positive: bool) -> np.ndarray:
    """(questions, depth) article positions by descending score; -1 where a lexical score is not positive."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    if positive:
        top = np.take_along_axis(scores, order, 1)
        order = np.where(top > 0, order, -1)
    return order


def fuse(
    c: Cache,
    weights: dict[str, float],
    rrf_k: float,
    depth: int = 30,
    glossed_weights: dict[str, float] | None = None,
    orders: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    q, n = c.per_article["lex_article"].shape
    fused = np.zeros((q, n + 1))
    rr = 1.0 / (rrf_k + np.arange(1, depth + 1))
    for name in RANKS:
        w_u = weights.get(name, 0.0)
        w_g = (glossed_weights or {}).get(name, 0.0)
        if w_u == 0 and w_g == 0:
            continue
        order = orders[name] if orders else rank_positions(c.per_article[name], depth, name.startswith("lex"))
        w = np.where(c.glossed, w_g, w_u)
        wcol = np.append(w, 0.0)[order]  # -1 → the dummy column
        np.add.at(fused, (np.arange(q)[:, None], np.where(order < 0, n, order)), wcol * rr[None, :])
    return fused[:, :n]


def metrics(
    c: Cache, fused: np.ndarray, mask: np.ndarray, answered: np.ndarray | None = None
) -> tuple[float, float, int]:
    """(hits@3, sum of RR@10, count) over in-scope questions in `mask`; a question not `answered` scores 0."""
    top = np.argsort(-fused, axis=1, kind="stable")[:, :10]
    hits = rr = 0.0
    count = 0
    for i in np.flatnonzero(mask & ~c.oos):
        count += 1
        if answered is not None and not answered[i]:
            continue
        gold = set(c.golds[i])
        ranks = [r for r, p in enumerate(top[i], 1) if p in gold and fused[i, p] > 0]
        if ranks:
            hits += ranks[0] <= 3
            rr += 1.0 / ranks[0]
    return hits, rr, count


def main(argv: list[str]) -> int:
    c = load(argv[0])
    base = {"lex_article": 2.25, "dense_article": 3.0}
    all_mask = np.ones(len(c.sets), dtype=bool)
    h, r, n = metrics(c, fuse(c, base, 5.0), all_mask)
    print("baseline fusion (pre-abstain)", round(h / n, 4), round(r / n, 4), n)
    for name in RANKS:
        h, r, n = metrics(c, fuse(c, {name: 1.0}, 5.0), all_mask)
        print(f"{name:14s} alone", round(h / n, 4), round(r / n, 4))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
