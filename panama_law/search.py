"""Hybrid retrieval: Spanish BM25 over whole articles + dense e5 embeddings of passages, fused by weighted RRF.

Spoken, colloquial questions rarely share words with the constitutional text. The pipeline:

1. Lexical query: folded, stemmed, sound-alike-folded terms with conversational filler removed (text.STOPWORDS),
   plus the lexicon's formal terms (lexicon.expand) at a lower weight.
2. Rankings over the 328 articles (`RANKINGS`): BM25 over passages (each article keeps its best passage), BM25
   over whole articles with the Título/Capítulo names as an extra field, and cosine between the question and
   e5 passage vectors (each passage embedded with its Título/Capítulo and, for list items, the list's lead-in).
   The question is embedded once, followed by its lexicon expansion, so the vector also sees the formal words.
3. Weighted reciprocal-rank fusion, which needs no calibration of the score scales against each other. The
   weights were fitted by cross-validation on the development sets (`python -m panama_law.fit fusion`).
4. Abstain: a question whose evidence is weak is answered with no source at all. The evidence is a small
   logistic model over cheap signals (see `Signals.evidence`); its cut trades the two errors explicitly (refusing
   an answerable question costs more than showing a weak source; see `panama_law.fit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import embedding
from .bm25 import BM25
from .corpus import Article
from .index import LoadedIndex, Passage, _plain_heading
from .lexicon import expand
from .passages import sentences
from .text import terms

MAX_RESULTS = 3
MAX_EXCERPT_CHARS = 750


RANKINGS = ("lex_passage", "lex_article", "dense_passage")


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Fusion weights and the abstain model; every number here comes from `python -m panama_law.fit`.

    Fusion: a grid over rrf_k and the three weights, chosen by repeated 5-fold cross-validation on the three
    development sets (the project's visible set, bench/eval/dev_extra.jsonl, bench/eval/calibration.jsonl; 126
    in-scope questions; never a held-out file) on recall@3 + MRR@10. The dense ranking weighs most.
    """

    rrf_k: float = 3.0
    w_lex_passage: float = 0.5
    w_lex_article: float = 1.0
    w_dense_passage: float = 2.0
    expansion_weight: float = 0.8
    heading_weight: int = 2
    depth: int = 30
    # Abstain when `Signals.evidence` (a logistic-regression logit over `ABSTAIN_FEATURES`) is below
    # `abstain_below`; fitted by `python -m panama_law.fit abstain` on the same development sets.
    # Fit: class-balanced logistic regression (L2 = 1 on standardized features), then the cut that minimizes
    # fit.REFUSE_COST (4) x in-scope refused + out-of-scope answered, halfway between the scores it separates.
    # In sample: 0/126 in-scope refused, 36/60 out-of-scope abstained. 20x repeated 5-fold CV of the whole
    # procedure: 1.05/126 refused, 36.45/60 abstained (the three-signal rule it replaces: 1.95 and 37.65).
    abstain_w_dense: float = 75.63
    abstain_w_lex: float = 0.3
    abstain_bias: float = -66.17
    abstain_below: float = -1.557

    def weight(self, ranking: str) -> float:
        return float(getattr(self, f"w_{ranking}"))


@dataclass(frozen=True, slots=True)
class Hit:
    article: Article
    score: float
    excerpt: str


@dataclass(slots=True)
class Signals:
    """Per-query evidence strengths, kept for the abstain decision and for evaluation diagnostics.

    `coverage` is the share of the question's own content terms (stemmed, stopwords removed) that occur anywhere
    in the Constitution: "metrobus", "sancocho" or "apostillar" do not, and a question made of such words is
    rarely about it. `expansion_terms` counts the formal terms the lexicon added (repeats included): the lexicon
    maps everyday words to constitutional concepts, so an off-topic question seldom triggers much of it.
    """

    dense_max: float = 0.0
    lex_max: float = 0.0
    coverage: float = 0.0
    expansion_terms: int = 0
    ranked: list[int] = field(default_factory=list)
    # Per ranking (`RANKINGS`), the article positions in rank order (top `depth`), for diagnostics.
    rankings: dict[str, list[int]] = field(default_factory=dict)

    def rank_in(self, ranking: str, pos: int) -> int | None:
        """1-based rank of article position `pos` in one ranking, None beyond its depth."""
        order = self.rankings.get(ranking, [])
        return order.index(pos) + 1 if pos in order else None

    def features(self) -> tuple[float, float]:
        """The abstain model's inputs, in the order of `ABSTAIN_FEATURES`."""
        return (self.dense_max, math.log1p(max(self.lex_max, 0.0)))

    def evidence(self, cfg: SearchConfig) -> float:
        """One number for "how much does the Constitution speak to this" (a logit; higher is in scope).

        Closeness in e5 space carries most of it; the best article's BM25 adds whether the question's (and the
        lexicon's) words are the Constitution's. Vocabulary signals that count the caller's own words (`coverage`,
        `expansion_terms`) were dropped: slang lowers them for answerable questions, and they lost more answerable
        questions in cross-validation."""
        dense, lex = self.features()
        return cfg.abstain_bias + cfg.abstain_w_dense * dense + cfg.abstain_w_lex * lex


ABSTAIN_FEATURES = ("dense_max", "log1p(lex_max)")


class Searcher:
    """Answers queries from a loaded index; safe to share across requests (read-only after construction)."""

    def __init__(self, index: LoadedIndex, config: SearchConfig | None = None) -> None:
        self.config = config or SearchConfig()
        self.index = index
        self.articles = index.articles
        self._pos = {a.number: i for i, a in enumerate(self.articles)}
        self._passage_article = np.array([self._pos[p.article] for p in index.passages], dtype=np.int32)
        self._passage_terms = [terms(self._passage_text(p)) for p in index.passages]
        self.passage_bm25 = BM25(self._passage_terms)
        heading_terms = [self._heading_terms(a) for a in self.articles]
        self.article_bm25 = BM25([terms(a.text) + h for a, h in zip(self.articles, heading_terms, strict=True)])

    @property
    def article_count(self) -> int:
        return len(self.articles)

    def _passage_text(self, p: Passage) -> str:
        return self.articles[self._pos[p.article]].text[p.start : p.end]

    def _heading_terms(self, article: Article) -> list[str]:
        reps = max(self.config.heading_weight, 0)
        heading = " ".join(_plain_heading(h) for h in (article.titulo, article.capitulo or "") if h)
        return terms(heading) * reps

    def _query_terms(self, query: str) -> tuple[list[tuple[str, float]], str, list[str], list[str]]:
        """Weighted BM25 query terms, the lexicon's expansion text, and the own and expansion terms."""
        weights: dict[str, float] = {}
        own = terms(query)
        for term in own:
            weights[term] = 1.0
        extra = expand(query)
        added = terms(extra)
        for term in added:
            weights.setdefault(term, self.config.expansion_weight)
        return list(weights.items()), extra, own, added

    def signals(self, query: str) -> tuple[Signals, np.ndarray, np.ndarray, np.ndarray]:
        """Fused article ranking plus the raw passage-level scores needed to pick excerpts."""
        cfg = self.config
        qterms, extra, own, added = self._query_terms(query)
        lex_p = self.passage_bm25.scores(qterms)
        lex_a = self.article_bm25.scores(qterms)
        # One embedding per query (it is the expensive step): the words as said, then the lexicon's formal terms.
        qvec = embedding.encode_query(f"{query} {extra}" if extra else query)
        dense_p = self.index.passage_vectors @ qvec

        n = len(self.articles)
        lex_p_art = np.zeros(n, dtype=np.float32)
        np.maximum.at(lex_p_art, self._passage_article, lex_p)
        dense_p_art = np.full(n, -1.0, dtype=np.float32)
        np.maximum.at(dense_p_art, self._passage_article, dense_p)

        fused = np.zeros(n, dtype=np.float64)
        rankings: dict[str, list[int]] = {}
        for name, scores, needs_positive in (
            ("lex_passage", lex_p_art, True),
            ("lex_article", lex_a, True),
            ("dense_passage", dense_p_art, False),
        ):
            order = [int(p) for p in np.argsort(-scores, kind="stable")[: cfg.depth]]
            if needs_positive:
                order = [p for p in order if scores[p] > 0]
            rankings[name] = order
            weight = cfg.weight(name)
            for rank, pos in enumerate(order):
                fused[pos] += weight / (cfg.rrf_k + rank + 1)
        ranked = [int(i) for i in np.argsort(-fused, kind="stable") if fused[i] > 0]
        known = sum(1 for t in own if self.article_bm25.known(t))
        sig = Signals(
            dense_max=float(dense_p_art.max()),
            lex_max=float(lex_a.max()),
            coverage=known / len(own) if own else 0.0,
            expansion_terms=len(added),
            ranked=ranked,
            rankings=rankings,
        )
        return sig, fused, lex_p, dense_p

    def abstains(self, sig: Signals) -> bool:
        return sig.evidence(self.config) < self.config.abstain_below

    def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        sig, fused, lex_p, dense_p = self.signals(query)
        if not sig.ranked or self.abstains(sig):
            return []
        hits: list[Hit] = []
        for pos in sig.ranked[:limit]:
            article = self.articles[pos]
            hits.append(Hit(article=article, score=float(fused[pos]), excerpt=self._excerpt(pos, lex_p, dense_p)))
        return hits

    def _excerpt(self, pos: int, lex_p: np.ndarray, dense_p: np.ndarray) -> str:
        """The best-matching passage of the article, widened with its neighbours up to the excerpt limit."""
        article = self.articles[pos]
        ids = np.flatnonzero(self._passage_article == pos)
        lex = lex_p[ids]
        lex_norm = lex / lex.max() if lex.max() > 0 else lex
        best = int(ids[int(np.argmax(lex_norm + (dense_p[ids] - dense_p[ids].min())))])
        p = self.index.passages[best]
        return excerpt_around(article.text, p.start, p.end)


def excerpt_around(text: str, start: int, end: int, limit: int = MAX_EXCERPT_CHARS) -> str:
    """Grow [start, end) by whole sentences (after first, then before) while it fits; trim at a word if needed."""
    if len(text) <= limit:
        return text
    spans = sentences(text)
    lo = next((i for i, s in enumerate(spans) if s.end > start), 0)
    hi = next((i for i, s in enumerate(spans) if s.end >= end), len(spans) - 1)
    grown = True
    while grown:
        grown = False
        if hi + 1 < len(spans) and spans[hi + 1].end - spans[lo].start <= limit:
            hi += 1
            grown = True
        if lo > 0 and spans[hi].end - spans[lo - 1].start <= limit:
            lo -= 1
            grown = True
    a, b = spans[lo].start, spans[hi].end
    out = text[a:b].strip()
    prefix = "… " if a > 0 else ""
    suffix = " …" if b < len(text) else ""
    budget = limit - len(prefix) - len(suffix)
    if len(out) > budget:
        cut = out.rfind(" ", 0, budget - 1)
        out = out[: cut if cut > budget // 2 else budget - 1].rstrip(" ,;") + "…"
        suffix = ""
    return f"{prefix}{out}{suffix}"
