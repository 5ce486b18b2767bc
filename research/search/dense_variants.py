"""Centring, whitening and dense pseudo-relevance feedback of the USE vectors, on a norm without glosses.

    python -m research.search.dense_variants INDEX_DIR NORM_NAME EVAL.jsonl...

INDEX_DIR is an index of one plain norm (`plain_constitution.py`, then `python -m panama_law import`); gold
article numbers in the eval files are read as articles of NORM_NAME. Abstaining is off: the figures compare
rankings. Every transform is fitted on the index's own passage and article vectors, never on questions.
Results and the decision are in unglossed.md.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from panama_law.contract import MAX_RESULTS
from panama_law.evaluate import EvalItem, evaluate, load_items
from panama_law.index import disk as index
from panama_law.retrieve.search import SearchConfig, Searcher, Signals

RANKING_ONLY = SearchConfig(abstain_below=-1e9, abstain_foreign=False)
Transform = Callable[[np.ndarray], np.ndarray]


def items_for(path: Path, norm: str) -> list[EvalItem]:
    return [
        EvalItem(it.id, it.question, frozenset(f"{norm}, artículo {g}" if isinstance(g, int) else g for g in it.gold))
        for it in load_items(path)
    ]


def report(label: str, searcher: Searcher, sets: dict[str, list[EvalItem]]) -> None:
    pooled = [it for items in sets.values() for it in items]
    per_set = " ".join(
        f"{name}:{r['recall_at_3']:.3f}/{r['mrr_at_10']:.3f}"
        for name, r in ((n, evaluate(searcher, items)) for n, items in sets.items())
    )
    r = evaluate(searcher, pooled)
    print(f"{label:24s} pooled {r['recall_at_3']:.3f}/{r['mrr_at_10']:.3f}  {per_set}", flush=True)


def linear(mu: np.ndarray, w: np.ndarray) -> Transform:
    def apply(x: np.ndarray) -> np.ndarray:
        y = (x.astype(np.float64) - mu) @ w
        y /= np.linalg.norm(y, axis=-1, keepdims=True)
        out: np.ndarray = y.astype(np.float32)
        return out

    return apply


class Transformed(Searcher):
    """The engine with query, passage and article vectors mapped by one transform."""

    def __init__(self, loaded: index.LoadedIndex, f: Transform) -> None:
        dim = f(loaded.article_vectors[:1]).shape[1]
        moved = dataclasses.replace(
            loaded,
            passage_vectors=f(loaded.passage_vectors),
            article_vectors=f(loaded.article_vectors),
            gloss_vectors=np.zeros((0, dim), np.float32),
        )
        super().__init__(moved, RANKING_ONLY)
        self._f = f

    def query_vector(self, query: str, extra: str | None = None) -> np.ndarray:
        moved: np.ndarray = self._f(super().query_vector(query, extra)[None, :])[0]
        return moved


class Feedback(Searcher):
    """Rank once, move the query vector toward the mean article vector of the first `k`, rank again."""

    def __init__(self, loaded: index.LoadedIndex, alpha: float, k: int) -> None:
        super().__init__(loaded, RANKING_ONLY)
        self.alpha, self.k = alpha, k
        self._moved: np.ndarray | None = None

    def query_vector(self, query: str, extra: str | None = None) -> np.ndarray:
        return self._moved if self._moved is not None else super().query_vector(query, extra)

    def signals(self, query: str, shown: int = MAX_RESULTS) -> tuple[Signals, np.ndarray, np.ndarray, np.ndarray]:
        first, *_ = super().signals(query, shown)
        q = super().query_vector(query) + self.alpha * self.index.article_vectors[first.ranked[: self.k]].mean(0)
        self._moved = (q / np.linalg.norm(q)).astype(np.float32)
        try:
            return super().signals(query, shown)
        finally:
            self._moved = None


def main(argv: list[str]) -> int:
    loaded = index.load(Path(argv[0]))
    sets = {Path(p).stem: items_for(Path(p), argv[1]) for p in argv[2:]}
    report("baseline", Searcher(loaded, RANKING_ONLY), sets)
    fit = np.vstack([loaded.passage_vectors, loaded.article_vectors]).astype(np.float64)
    mu = fit.mean(0)
    u, s, _ = np.linalg.svd(np.cov((fit - mu).T))
    report("centre", Transformed(loaded, linear(mu, np.eye(fit.shape[1]))), sets)
    for eps, keep in ((1e-2, None), (1e-3, None), (1e-3, 256), (1e-3, 128)):
        w = (u @ np.diag(1 / np.sqrt(s + eps)))[:, :keep]
        report(f"whiten eps{eps:g} k{keep or fit.shape[1]}", Transformed(loaded, linear(mu, w)), sets)
    for alpha in (0.3, 0.6, 1.0):
        for k in (2, 3, 5):
            report(f"feedback a{alpha} k{k}", Feedback(loaded, alpha, k), sets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
