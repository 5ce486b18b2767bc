"""The lexical side of a question: its own terms and the lexicons' formal terms, weighted for BM25.

The question's own words weigh 1; the formal terms a lexicon adds for them weigh `expansion_weight` and never
replace them. The Constitution's table applies to every norm; the everyday-law table only to norms without
callers' glosses (`lexicon`), so its terms come apart, for the search to score against those norms alone.
"""

from __future__ import annotations

from typing import NamedTuple

from ..text import terms
from .lexicon import CONSTITUTION, EVERYDAY


class QueryTerms(NamedTuple):
    """`weighted` scores every norm; `everyday` adds to it for norms without glosses (terms not already there)."""

    weighted: list[tuple[str, float]]
    everyday: list[tuple[str, float]]
    expansion: str  # the Constitution table's formal terms, as text
    own: list[str]
    added: list[str]  # the Constitution table's terms, stemmed (repeats kept: `Signals.expansion_terms`)


def query_terms(query: str, expansion_weight: float, *, everyday: bool) -> QueryTerms:
    """The weighted BM25 terms of `query`; the everyday table's only when `everyday` (some norm has no glosses)."""
    weights: dict[str, float] = {}
    own = terms(query)
    for term in own:
        weights[term] = 1.0
    expansion = CONSTITUTION.expand(query)
    added = terms(expansion)
    for term in added:
        weights.setdefault(term, expansion_weight)
    further: dict[str, float] = {}
    if everyday:
        for term in terms(EVERYDAY.expand(query)):
            if term not in weights:
                further[term] = expansion_weight
    return QueryTerms(list(weights.items()), list(further.items()), expansion, own, added)
