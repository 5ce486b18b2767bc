"""Retrieval evaluation over a JSONL file of {id, question, gold: [article numbers], ...}.

Items with an empty `gold` are out of scope: the right answer is no source at all. In-scope metrics are computed
on what the server would actually return (after abstaining), so a too-eager abstain threshold shows up as lost
recall rather than hiding.

`python -m panama_law.evaluate --fit FILE...` refits the abstain model (search.SearchConfig.abstain_*) from labelled
files and prints a cross-validation table of candidate feature sets, so the constants can be reproduced.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .search import ABSTAIN_FEATURES, Searcher, Signals


@dataclass(frozen=True, slots=True)
class EvalItem:
    id: str
    question: str
    gold: frozenset[int]
    kind: str | None = None


def load_items(path: Path) -> list[EvalItem]:
    items: list[EvalItem] = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        if not isinstance(raw.get("question"), str) or not isinstance(raw.get("gold"), list):
            raise ValueError(f"{path}:{line_no}: needs 'question' (string) and 'gold' (list)")
        items.append(
            EvalItem(
                id=str(raw.get("id", line_no)),
                question=raw["question"],
                gold=frozenset(int(g) for g in raw["gold"]),
                kind=raw.get("kind"),
            )
        )
    return items


def evaluate(searcher: Searcher, items: list[EvalItem], *, details: bool = False) -> dict[str, Any]:
    in_scope = [i for i in items if i.gold]
    out_scope = [i for i in items if not i.gold]
    hits3 = 0
    rr_sum = 0.0
    abstained_in_scope = 0
    rows: list[dict[str, Any]] = []
    for item in in_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig)
        ranked = [] if abstain else [searcher.articles[p].number for p in sig.ranked[:10]]
        abstained_in_scope += int(abstain)
        top3 = ranked[:3]
        hit = any(g in item.gold for g in top3)
        hits3 += int(hit)
        rank = next((r for r, n in enumerate(ranked, 1) if n in item.gold), None)
        rr_sum += 1.0 / rank if rank else 0.0
        if details:
            rows.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "gold": sorted(item.gold),
                    "top": ranked[:5],
                    "rank": rank,
                    "dense_max": round(sig.dense_max, 3),
                    "lex_max": round(sig.lex_max, 2),
                    "coverage": round(sig.coverage, 2),
                    "expansion_terms": sig.expansion_terms,
                    "evidence": round(sig.evidence(searcher.config), 3),
                }
            )
    abstained_out = 0
    for item in out_scope:
        sig, *_ = searcher.signals(item.question)
        abstain = searcher.abstains(sig) or not sig.ranked
        abstained_out += int(abstain)
        if details:
            rows.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "gold": [],
                    "abstained": abstain,
                    "dense_max": round(sig.dense_max, 3),
                    "lex_max": round(sig.lex_max, 2),
                    "coverage": round(sig.coverage, 2),
                    "expansion_terms": sig.expansion_terms,
                    "evidence": round(sig.evidence(searcher.config), 3),
                }
            )
    report: dict[str, Any] = {
        "recall_at_3": round(hits3 / len(in_scope), 4) if in_scope else None,
        "mrr_at_10": round(rr_sum / len(in_scope), 4) if in_scope else None,
        "abstain_rate_out_of_scope": round(abstained_out / len(out_scope), 4) if out_scope else None,
        "in_scope": len(in_scope),
        "in_scope_hits_at_3": hits3,
        "in_scope_abstained": abstained_in_scope,
        "out_of_scope": len(out_scope),
        "out_of_scope_abstained": abstained_out,
    }
    if details:
        report["items"] = rows
    return report


# --- fitting the abstain model --------------------------------------------------------------------------------------

# Candidate signals for the abstain model, all cheap by-products of `Searcher.signals`. The chosen model uses the
# first three (`Signals.features`); the others are kept so the CV table shows what they would add.
CANDIDATES: dict[str, Any] = {
    "dense_max": lambda s: s.dense_max,
    "coverage": lambda s: s.coverage,
    "log1p(expansion_terms)": lambda s: math.log1p(s.expansion_terms),
    "log1p(lex_max)": lambda s: math.log1p(max(s.lex_max, 0.0)),
    "lexicon_fired": lambda s: float(s.expansion_terms > 0),
}
FEATURE_SETS: tuple[tuple[str, ...], ...] = (
    ("dense_max", "log1p(lex_max)"),  # the previous rule
    ("dense_max", "log1p(lex_max)", "coverage"),
    ("dense_max", "coverage", "lexicon_fired"),
    ("dense_max", "coverage", "log1p(expansion_terms)"),
    ("dense_max", "log1p(lex_max)", "coverage", "log1p(expansion_terms)"),
)


def _signal_table(searcher: Searcher, items: list[EvalItem]) -> tuple[list[Signals], np.ndarray]:
    sigs = [searcher.signals(item.question)[0] for item in items]
    return sigs, np.array([1 if item.gold else 0 for item in items])


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


def threshold(scores: np.ndarray, y: np.ndarray, allowed_share: float | None = None) -> float:
    """The abstain cut on model scores (abstain when score < cut).

    Default (chosen): halfway between the lowest in-scope score and the highest out-of-scope score below it, so
    no training question in scope is lost and the margin is split evenly. With `allowed_share`, halfway between
    the n-th and (n+1)-th lowest in-scope scores, n = floor(share x in-scope count), for comparison."""
    inside = np.sort(scores[y == 1])
    if allowed_share is not None and (n := int(allowed_share * len(inside))) >= 1:
        return float((inside[n - 1] + inside[n]) / 2)
    below = scores[(y == 0) & (scores < inside[0])]
    return float((inside[0] + below.max()) / 2) if len(below) else float(inside[0] - 1e-6)


def cross_validate(
    x: np.ndarray, y: np.ndarray, allowed_share: float | None = None, folds: int = 5, repeats: int = 20
) -> tuple[float, float]:
    """Repeated stratified k-fold CV of fit + threshold; mean in-scope lost and out-of-scope abstained per repeat."""
    rng = np.random.default_rng(0)
    lost = abstained = 0
    for _ in range(repeats):
        pos, neg = rng.permutation(np.flatnonzero(y == 1)), rng.permutation(np.flatnonzero(y == 0))
        for k in range(folds):
            test = np.r_[pos[k::folds], neg[k::folds]]
            train = np.setdiff1d(np.arange(len(y)), test)
            coef, bias = fit_logistic(x[train], y[train])
            cut = threshold(x[train] @ coef + bias, y[train], allowed_share)
            abstain = x[test] @ coef + bias < cut
            lost += int(np.sum(abstain & (y[test] == 1)))
            abstained += int(np.sum(abstain & (y[test] == 0)))
    return lost / repeats, abstained / repeats


def fit_report(searcher: Searcher, items: list[EvalItem]) -> dict[str, Any]:
    sigs, y = _signal_table(searcher, items)
    table = []
    for names in FEATURE_SETS:
        x = np.array([[CANDIDATES[n](s) for n in names] for s in sigs])
        row: dict[str, Any] = {"features": list(names)}
        for label, share in (("cv_margin", None), ("cv_allow_1pct", 0.01), ("cv_allow_2pct", 0.02)):
            lost, abst = cross_validate(x, y, share)
            row[label] = {"in_scope_lost": lost, "out_of_scope_abstained": abst}
        table.append(row)
    x = np.array([s.features() for s in sigs])
    coef, bias = fit_logistic(x, y)
    scores = x @ coef + bias
    cut = threshold(scores, y)
    return {
        "in_scope": int(y.sum()),
        "out_of_scope": int(len(y) - y.sum()),
        "cv_table": table,
        "chosen": {
            "features": list(ABSTAIN_FEATURES),
            "weights": [round(float(c), 2) for c in coef],
            "bias": round(bias, 2),
            "abstain_below": round(cut, 3),
            "in_sample_in_scope_lost": int(np.sum((scores < cut) & (y == 1))),
            "in_sample_out_of_scope_abstained": int(np.sum((scores < cut) & (y == 0))),
        },
    }


def main(argv: list[str] | None = None) -> int:
    from . import index
    from .settings import ServerSettings

    parser = argparse.ArgumentParser(prog="python -m panama_law.evaluate", description="refit the abstain model")
    parser.add_argument("--fit", nargs="+", type=Path, required=True, help="labelled JSONL files (training only)")
    parser.add_argument("--data-dir", type=Path, help="index directory (env PANAMA_LAW_DATA_DIR)")
    args = parser.parse_args(argv)
    settings = ServerSettings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    items = [item for path in args.fit for item in load_items(path)]
    print(json.dumps(fit_report(Searcher(index.load(settings.data_dir)), items), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
