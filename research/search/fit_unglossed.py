"""Fit the fusion weights of norms without glosses (`SearchConfig.w_unglossed_*`) by leave-one-law-out.

`python -m research.search.fit_unglossed --law DIR EVAL [--law DIR EVAL ...] [--also FILE ...]` prints a JSON table
that reproduces them. Each DIR is an index of the Constitution and one development law imported without glosses
(`python -m panama_law import`), EVAL that law's questions; every `--also` file holds development questions about
the Constitution, asked on each index too, because a law's articles compete with the Constitution's there and
weights that lift the law can bury the Constitution's answers.

Why by law and not by question: a team imports one law at a time, and the laws differ far more from each other
than their questions do, so the honest estimate holds a whole law out. For each law held out, the weights are
chosen on the others by their laws' hits in the first three plus `CONSTITUTION_SHARE` of the Constitution's hits
on their indexes (ties: more of the Constitution's hits, then the earlier grid point), and counted on the law held
out. The shipped weights are those chosen on every law. Counts are before abstaining: the abstain model reads no
fusion weight.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from panama_law.evaluate import load_items
from panama_law.retrieve.search import RANKINGS, SearchConfig, Searcher, Signals

from .fit import fused_metrics

# Around the single weight of 1.5 per ranking used before: passage rankings low, whole-article rankings high.
GRID: dict[str, tuple[float, ...]] = {
    "lex_passage": (0.0, 0.75),
    "lex_article": (1.5, 2.25, 3.0, 3.75),
    "dense_passage": (0.0, 0.75, 1.5),
    "dense_article": (2.25, 3.0, 3.75, 4.5, 6.0),
}
CONSTITUTION_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class LawRun:
    """One law's index: the rankings of its own questions and of the Constitution's, and what each must find."""

    name: str
    glossed: np.ndarray
    keys: list[str]
    law: tuple[list[Signals], list[frozenset[str]]]
    constitution: tuple[list[Signals], list[frozenset[str]]]


def collect(searcher: Searcher, name: str, law_eval: Path, also: Sequence[Path]) -> LawRun:
    def asked(paths: Sequence[Path]) -> tuple[list[Signals], list[frozenset[str]]]:
        items = [item for path in paths for item in load_items(path) if item.gold]
        return [searcher.signals(item.question)[0] for item in items], [item.gold_keys for item in items]

    keys = [a.key for a in searcher.articles]
    return LawRun(name, searcher.glossed, keys, asked([law_eval]), asked(also))


def _hits(
    run: LawRun, part: tuple[list[Signals], list[frozenset[str]]], cfg: SearchConfig, unglossed: Sequence[float]
) -> int:
    """How many of `part`'s questions find a gold article in the first three, with these unglossed weights."""
    sigs, golds = part
    if not sigs:
        return 0
    glossed = [cfg.weight(name) for name in RANKINGS]
    return int(fused_metrics(sigs, golds, run.keys, cfg.rrf_k, glossed, run.glossed, unglossed)[:, 0].sum())


def fit_unglossed(runs: Sequence[LawRun], cfg: SearchConfig) -> dict[str, Any]:
    """Leave-one-law-out over `GRID` (module docstring); `cfg` gives rrf_k and the fixed weights of glossed norms."""
    grid = list(itertools.product(*(GRID[name] for name in RANKINGS)))
    law = np.array([[_hits(run, run.law, cfg, w) for run in runs] for w in grid])
    const = np.array([[_hits(run, run.constitution, cfg, w) for run in runs] for w in grid])

    def choose(keep: np.ndarray) -> int:
        score = law[:, keep].sum(1) + CONSTITUTION_SHARE * const[:, keep].sum(1)
        return int(np.lexsort((np.arange(len(grid)), -const[:, keep].sum(1), -score))[0])

    def named(point: int) -> dict[str, float]:
        return dict(zip(RANKINGS, grid[point], strict=True))

    folds = []
    for held, run in enumerate(runs):
        best = choose(np.arange(len(runs)) != held)
        folds.append({"held_out": run.name, "chosen": named(best), "held_out_hits": int(law[best, held])})
    best = choose(np.ones(len(runs), dtype=bool))
    shipped = tuple(cfg.weight(name, glossed=False) for name in RANKINGS)
    return {
        "law_questions": {run.name: len(run.law[0]) for run in runs},
        "constitution_questions_per_index": len(runs[0].constitution[0]) if runs else 0,
        "folds": folds,
        "held_out_hits": sum(f["held_out_hits"] for f in folds),
        "chosen": named(best),
        "chosen_in_sample": {"law_hits": int(law[best].sum()), "constitution_hits": int(const[best].sum())},
        "shipped": dict(zip(RANKINGS, shipped, strict=True)),
        "shipped_in_sample": (
            {
                "law_hits": int(law[grid.index(shipped)].sum()),
                "constitution_hits": int(const[grid.index(shipped)].sum()),
            }
            if shipped in grid
            else None
        ),
    }


def main(argv: list[str] | None = None) -> int:
    from panama_law.index import disk as index

    parser = argparse.ArgumentParser(prog="python -m research.search.fit_unglossed", description=__doc__)
    parser.add_argument(
        "--law",
        nargs=2,
        action="append",
        required=True,
        metavar=("DIR", "EVAL"),
        type=Path,
        help="an index of the Constitution and one development law without glosses, and that law's questions",
    )
    parser.add_argument("--also", nargs="*", default=[], type=Path, help="the Constitution's development questions")
    args = parser.parse_args(argv)
    cfg = SearchConfig()
    runs = [collect(Searcher(index.load(d), cfg), e.stem, e, args.also) for d, e in args.law]
    print(json.dumps(fit_unglossed(runs, cfg), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
