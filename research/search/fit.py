"""Fit the search's fusion weights, the glosses' discount and the abstain models on labelled development files.

`python -m research.search.fit fusion|glosses|abstain FILE...` print JSON tables that reproduce the constants in
`panama_law.retrieve.search.SearchConfig` (the weights of norms without glosses: `fit_unglossed`). Only development
files belong here; held-out files are for `python -m panama_law eval` alone, after the constants are fixed.

Both fits are chosen by repeated stratified 5-fold cross-validation of the whole procedure (choose on the training
folds, count on the test fold), so a setting that only fits a few questions shows up as a CV loss.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from panama_law import embedding
from panama_law.evaluate import EvalItem, load_items
from panama_law.index.disk import LoadedIndex
from panama_law.retrieve.query import query_terms
from panama_law.retrieve.search import ABSTAIN_FEATURES, RANKINGS, SearchConfig, Searcher, Signals

# Refusing an answerable question costs the user more than being shown a weak source the model is told to treat
# with care: the abstain cut minimizes REFUSE_COST x (in-scope refused) + (out-of-scope answered).
REFUSE_COST = 4.0

RRF_KS = (3.0, 5.0, 10.0, 20.0, 60.0)
WEIGHT_GRID = (0.0, 0.5, 1.0, 2.0)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A question's `Signals` plus the candidate abstain signals the shipped model does not read, computed here
    rather than on every query (`candidate_signals`).

    `coverage` is the share of the question's own content terms (stemmed, stopwords removed) that occur anywhere
    in one norm (the norm that uses most of them): the Constitution never says "metrobus", "sancocho" or
    "apostillar", and a question made of such words is rarely about it. `expansion_terms` counts the formal terms
    the Constitution's lexicon added (repeats included). `gloss_max` is the closest gloss's cosine."""

    sig: Signals
    gloss_max: float
    coverage: float
    expansion_terms: int


def candidate_signals(searcher: Searcher, query: str) -> Candidate:
    """`Searcher.signals` for `query` and the candidate signals beside it (one more encoding of the question)."""
    sig = searcher.signals(query)[0]
    q = query_terms(query, searcher.config.expansion_weight, everyday=bool((~searcher.glossed).any()))
    gloss_vectors = searcher.index.gloss_vectors
    gloss_max = 0.0
    if len(gloss_vectors):
        with embedding.one_blas_thread():
            gloss_max = float((gloss_vectors @ searcher.query_vector(query, q.expansion)).max())
    return Candidate(sig, gloss_max, searcher.article_bm25.best_group_coverage(q.own), len(q.added))


# Candidate abstain signals: the model's inputs (`Signals.features`) and the ones it does not read.
CANDIDATES: dict[str, Callable[[Candidate], float]] = {
    "dense_max": lambda c: c.sig.dense_max,
    "coverage": lambda c: c.coverage,
    "log1p(expansion_terms)": lambda c: math.log1p(c.expansion_terms),
    "log1p(lex_max)": lambda c: c.sig.log_lex_max,
    "gloss_max": lambda c: c.gloss_max,
}
# Abstain rules that need no fitting (`scope`): a question set in another country.
SCOPE_RULES: dict[str, Callable[[Signals], bool]] = {
    "foreign": lambda s: s.foreign,
}
RULE_SETS: tuple[tuple[str, ...], ...] = ((), ("foreign",))
FEATURE_SETS: tuple[tuple[str, ...], ...] = (
    ("dense_max",),
    ("dense_max", "log1p(lex_max)"),
    ("dense_max", "coverage"),
    ("dense_max", "coverage", "log1p(expansion_terms)"),
    ("dense_max", "log1p(lex_max)", "coverage", "log1p(expansion_terms)"),
    ("dense_max", "coverage", "log1p(expansion_terms)", "gloss_max"),
    ("gloss_max", "coverage", "log1p(expansion_terms)"),
)


# --- fusion ----------------------------------------------------------------------------------------------------------


def hit_and_rr(top: Sequence[str], gold: frozenset[str]) -> tuple[float, float]:
    """(hit@3, reciprocal rank@10) of the first gold key in `top`, the top ten keys in rank order."""
    rank = next((r for r, key in enumerate(top[:10], 1) if key in gold), None)
    return float(rank is not None and rank <= 3), 1.0 / rank if rank else 0.0


def fused_metrics(
    sigs: Sequence[Signals],
    golds: Sequence[frozenset[str]],
    numbers: Sequence[str],
    k: float,
    w: Sequence[float],
    glossed: np.ndarray,
    w_unglossed: Sequence[float],
) -> np.ndarray:
    """Per question: (hit@3, reciprocal rank@10) of the fusion with rrf_k `k` and weights `w` (RANKINGS order) for
    articles of norms with glosses; the others keep `w_unglossed` (RANKINGS order), as `Searcher.weight` does."""
    out = np.zeros((len(sigs), 2))
    for i, (sig, gold) in enumerate(zip(sigs, golds, strict=True)):
        fused: dict[int, float] = {}
        for name, weight, other in zip(RANKINGS, w, w_unglossed, strict=True):
            for place, pos in enumerate(sig.rankings.get(name, []), 1):
                fused[pos] = fused.get(pos, 0.0) + (weight if glossed[pos] else other) / (k + place)
        top = [numbers[p] for p, v in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:10] if v > 0]
        out[i] = hit_and_rr(top, gold)
    return out


def select_by_cv(parts: np.ndarray, repeats: int) -> tuple[np.ndarray, int]:
    """`parts` is (settings, questions, 2) of (hit@3, reciprocal rank@10). Repeated 5-fold CV of "choose the
    setting with the best recall@3 + MRR@10 on the training folds": the summed test-fold metrics, and the
    setting chosen on all questions."""
    table = parts.sum(2)
    rng = np.random.default_rng(0)
    n = parts.shape[1]
    cv_total = np.zeros(2)
    for _ in range(repeats):
        perm = rng.permutation(n)
        for fold in range(5):
            test = perm[fold::5]
            train = np.setdiff1d(np.arange(n), test)
            cv_total += parts[int(np.argmax(table[:, train].mean(1))), test].sum(0)
    return cv_total, int(np.argmax(table.mean(1)))


def fit_fusion(searcher: Searcher, items: list[EvalItem], repeats: int = 10) -> dict[str, Any]:
    """The fusion weights of norms with glosses; articles of a norm without glosses keep `w_unglossed_*`."""
    in_scope = [i for i in items if i.gold]
    sigs = [searcher.signals(i.question)[0] for i in in_scope]
    golds = [i.gold_keys for i in in_scope]
    numbers = [a.key for a in searcher.articles]
    grid = [(k, w) for k in RRF_KS for w in itertools.product(WEIGHT_GRID, repeat=len(RANKINGS)) if any(w)]
    glossed = searcher.glossed
    w_unglossed = [searcher.config.weight(name, glossed=False) for name in RANKINGS]
    parts = np.array([fused_metrics(sigs, golds, numbers, k, w, glossed, w_unglossed) for k, w in grid])
    n = len(in_scope)
    cv_total, best = select_by_cv(parts, repeats)
    cfg = searcher.config
    current_key = (cfg.rrf_k, tuple(cfg.weight(name) for name in RANKINGS))
    current = grid.index(current_key) if current_key in grid else None

    def pair(values: np.ndarray) -> dict[str, float]:
        return {"recall_at_3": round(float(values[0]), 4), "mrr_at_10": round(float(values[1]), 4)}

    return {
        "in_scope": n,
        "objective": "recall@3 + MRR@10",
        "cross_validated": pair(cv_total / repeats / n),
        "chosen": {"rrf_k": grid[best][0], "weights": dict(zip(RANKINGS, grid[best][1], strict=True))},
        "chosen_in_sample": pair(parts[best].mean(0)),
        "current_config_in_sample": pair(parts[current].mean(0)) if current is not None else None,
    }


# --- glosses ---------------------------------------------------------------------------------------------------------

GLOSS_OFFSETS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25)
GLOSS_SCALES = (0.3, 0.5, 0.7, 1.0)


def _ranked_metrics(searcher: Searcher, items: Sequence[EvalItem]) -> np.ndarray:
    """Per in-scope question: (hit@3, reciprocal rank@10) of the fused ranking, abstention aside."""
    out = np.zeros((len(items), 2))
    for i, item in enumerate(items):
        top = [searcher.articles[p].key for p in searcher.signals(item.question)[0].ranked[:10]]
        out[i] = hit_and_rr(top, item.gold_keys)
    return out


def fit_glosses(loaded: LoadedIndex, items: list[EvalItem], repeats: int = 10) -> dict[str, Any]:
    """How much a gloss counts against an article's own passages: the dense offset subtracted from a gloss's
    cosine and the factor on its BM25 score, with rrf_k, by repeated 5-fold CV on recall@3 + MRR@10.

    A gloss is written in a caller's words, so a caller's question sits closer to it than to any article text
    in the same style; without a discount, a glossed norm outranks an unglossed one on everyday words. Use
    questions from a glossed norm and from one without glosses together, so both sides of that trade count."""
    in_scope = [i for i in items if i.gold]
    grid = [(k, off, sc) for k in (3.0, 5.0) for off in GLOSS_OFFSETS for sc in GLOSS_SCALES]
    base = SearchConfig()
    parts = np.array(
        [
            _ranked_metrics(
                Searcher(loaded, replace(base, rrf_k=k, gloss_dense_offset=off, gloss_lex_scale=sc)), in_scope
            )
            for k, off, sc in grid
        ]
    )
    n = len(in_scope)
    cv_total, best = select_by_cv(parts, repeats)
    table = parts.sum(2)
    return {
        "in_scope": n,
        "glosses": len(loaded.glosses),
        "objective": "recall@3 + MRR@10",
        "cross_validated": [round(float(v), 4) for v in cv_total / repeats / n],
        "chosen": {"rrf_k": grid[best][0], "gloss_dense_offset": grid[best][1], "gloss_lex_scale": grid[best][2]},
        "chosen_in_sample": [round(float(v), 4) for v in parts[best].mean(0)],
        "top": [
            {
                "rrf_k": grid[i][0],
                "offset": grid[i][1],
                "scale": grid[i][2],
                "in_sample": parts[i].mean(0).round(4).tolist(),
            }
            for i in np.argsort(-table.mean(1), kind="stable")[:8]
        ],
    }


# --- abstain ---------------------------------------------------------------------------------------------------------


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Class-balanced, L2-regularized logistic regression by Newton steps on standardized features.

    Returns weights and bias on the raw (unstandardized) features."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    cw = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    reg = l2 * np.r_[np.ones(len(w) - 1), 0.0]
    for _ in range(100):
        p = 1 / (1 + np.exp(-z @ w))
        grad = z.T @ (cw * (p - y)) + reg * w
        hess = (z * (cw * p * (1 - p))[:, None]).T @ z + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    coef = w[:-1] / sd
    return coef, float(w[-1] - np.sum(w[:-1] * mu / sd))


def threshold(scores: np.ndarray, y: np.ndarray, refuse_cost: float = REFUSE_COST) -> float:
    """The abstain cut (abstain when score < cut) that minimizes refuse_cost x in-scope refused + out-of-scope
    answered, placed halfway between the two scores it separates; among equal costs, the lowest cut (fewest
    refusals). On separable data that is halfway between the lowest in-scope score and the highest out-of-scope
    score below it."""
    order = np.sort(np.unique(scores))
    cuts = np.r_[order[0] - 1e-6, (order[:-1] + order[1:]) / 2, order[-1] + 1e-6]
    inside, outside = scores[y == 1], scores[y == 0]
    costs = [refuse_cost * np.sum(inside < c) + np.sum(outside >= c) for c in cuts]
    return float(cuts[int(np.argmin(costs))])


def cross_validate(
    x: np.ndarray,
    y: np.ndarray,
    refuse_cost: float = REFUSE_COST,
    folds: int = 5,
    repeats: int = 20,
    flagged: np.ndarray | None = None,
) -> tuple[float, float]:
    """Repeated stratified k-fold CV of fit + threshold; mean in-scope lost and out-of-scope abstained per repeat.

    `flagged` questions are abstained on by a rule whatever the model says (`SCOPE_RULES`); the model and its cut
    are still fitted on every training question (fitting them only on the questions the rules leave did no better
    in CV, and this way the rules leave the model's constants as they were)."""
    rng = np.random.default_rng(0)
    rule = np.zeros(len(y), dtype=bool) if flagged is None else flagged
    lost = abstained = 0
    for _ in range(repeats):
        pos, neg = rng.permutation(np.flatnonzero(y == 1)), rng.permutation(np.flatnonzero(y == 0))
        for k in range(folds):
            test = np.r_[pos[k::folds], neg[k::folds]]
            train = np.setdiff1d(np.arange(len(y)), test)
            coef, bias = fit_logistic(x[train], y[train])
            cut = threshold(x[train] @ coef + bias, y[train], refuse_cost)
            abstain = (x[test] @ coef + bias < cut) | rule[test]
            lost += int(np.sum(abstain & (y[test] == 1)))
            abstained += int(np.sum(abstain & (y[test] == 0)))
    return lost / repeats, abstained / repeats


def _rule_mask(sigs: Sequence[Signals], rules: Sequence[str]) -> np.ndarray:
    return np.array([any(SCOPE_RULES[r](s) for r in rules) for s in sigs], dtype=bool)


class AbstainFit(NamedTuple):
    """One abstain model fitted on labelled questions: what `SearchConfig` holds (unrounded), and each question's
    score under it."""

    weights: np.ndarray
    bias: float
    cut: float
    scores: np.ndarray


def fit_model(sigs: Sequence[Candidate], y: np.ndarray, features: Sequence[str]) -> AbstainFit:
    """The abstain model on these questions' signals: logistic regression on `features`, cut by `threshold`."""
    x = np.array([[CANDIDATES[n](s) for n in features] for s in sigs])
    coef, bias = fit_logistic(x, y)
    scores = x @ coef + bias
    return AbstainFit(coef, bias, threshold(scores, y), scores)


def fit_abstain(
    searcher: Searcher, items: list[EvalItem], chosen: Sequence[str], rules: Sequence[str] = ()
) -> dict[str, Any]:
    cands = [candidate_signals(searcher, item.question) for item in items]
    sigs = [c.sig for c in cands]
    y = np.array([1 if item.gold else 0 for item in items])
    n_in, n_out = int(y.sum()), int(len(y) - y.sum())
    table = []
    for rule_set in RULE_SETS:
        mask = _rule_mask(sigs, rule_set)
        for names in FEATURE_SETS:
            x = np.array([[CANDIDATES[n](c) for n in names] for c in cands])
            row: dict[str, Any] = {"rules": list(rule_set), "features": list(names)}
            for cost in (1.0, REFUSE_COST, 10.0):
                lost, abst = cross_validate(x, y, cost, flagged=mask)
                row[f"cv_refuse_cost_{cost:g}"] = {
                    "in_scope_lost": lost,
                    "out_of_scope_abstained": abst,
                    "in_scope_refused_rate": round(lost / n_in, 4),
                    "out_of_scope_answered_rate": round((n_out - abst) / n_out, 4),
                    "cost": round(REFUSE_COST * lost + (n_out - abst), 2),
                }
            table.append(row)
    fitted = fit_model(cands, y, chosen)
    abstain = (fitted.scores < fitted.cut) | _rule_mask(sigs, rules)
    return {
        "in_scope": n_in,
        "out_of_scope": n_out,
        "refuse_cost": REFUSE_COST,
        "cv_table": table,
        "chosen": {
            "features": list(chosen),
            "weights": [round(float(c), 2) for c in fitted.weights],
            "bias": round(fitted.bias, 2),
            "abstain_below": round(fitted.cut, 3),
            "rules": list(rules),
            "in_sample_in_scope_lost": int(np.sum(abstain & (y == 1))),
            "in_sample_out_of_scope_abstained": int(np.sum(abstain & (y == 0))),
        },
    }


def main(argv: list[str] | None = None) -> int:
    from panama_law.index import disk as index
    from panama_law.settings import ServerSettings

    parser = argparse.ArgumentParser(prog="python -m research.search.fit", description=__doc__)
    parser.add_argument("what", choices=("fusion", "glosses", "abstain"))
    parser.add_argument("files", nargs="+", type=Path, help="labelled development JSONL files (never held-out)")
    parser.add_argument("--data-dir", type=Path, help="index directory (env PANAMA_LAW_DATA_DIR)")
    args = parser.parse_args(argv)
    settings = ServerSettings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    items = [item for path in args.files for item in load_items(path)]
    loaded = index.load(settings.data_dir)
    if args.what == "fusion":
        report = fit_fusion(Searcher(loaded), items)
    elif args.what == "glosses":
        report = fit_glosses(loaded, items)
    else:
        searcher = Searcher(loaded)
        cfg = searcher.config
        rules = ["foreign"] if cfg.abstain_foreign else []
        report = fit_abstain(searcher, items, ABSTAIN_FEATURES, rules)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
