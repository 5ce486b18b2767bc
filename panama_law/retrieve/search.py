"""Hybrid retrieval: Spanish BM25 (passages and whole articles) + dense USE embeddings, fused by weighted RRF.

Spoken, colloquial questions rarely share words with the constitutional text. The pipeline:

1. Lexical query: folded, stemmed, sound-alike-folded terms with conversational filler removed (text.STOPWORDS),
   plus the lexicon's formal terms at a lower weight: the Constitution's table for every norm, and the everyday-law
   table (`lexicon.EVERYDAY`) for the norms without callers' glosses.
2. Four rankings over the articles of every indexed norm: BM25 over passages (each article keeps its best
   passage; an article's callers' glosses, `glosses`, count as more of its passages, discounted, but are never
   excerpts), BM25 over whole articles with the Título/Capítulo names as an extra field (repeated
   `heading_weight` times), and cosine over passage and article embeddings. The dense query vector is the
   question's own embedding: the lexicon's formal terms reach the lexical rankings only (`dense_mix`).
3. Reciprocal-rank fusion (k = `rrf_k`), which needs no calibration of the score scales against each other.
4. Abstain: a question whose evidence is weak is answered with no source at all: for a legal assistant, no
   citation is better than a wrong one. The evidence is a small logistic model over two cheap signals (see
   `Signals.evidence`): how close the best passage is in embedding space and the best article's BM25 score; and
   a scope rule (`scope`) abstains on another country's law.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import embedding
from ..contract import MAX_EXCERPT_CHARS, MAX_RESULTS
from ..index.disk import LoadedIndex, Passage, plain_heading
from ..index.passages import sentences
from ..norms import Article, NormInfo
from ..text import terms
from .bm25 import BM25
from .dense_passages import DensePassages
from .groupmax import GroupMax
from .lexicon import CONSTITUTION
from .query import query_terms
from .scope import foreign_jurisdiction

RANKINGS = ("lex_passage", "lex_article", "dense_passage", "dense_article")


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Fusion weights and abstain thresholds.

    Two sets of fusion weights, because glosses change what each ranking is worth. For a norm with callers'
    glosses (the Constitution ships with them), `python -m research.search.fit fusion` (repeated 5-fold CV over a
    grid of rrf_k 3-60 and weights 0-2) on the development pool chose rrf_k 5 and the two passage rankings at 2,
    article embeddings at 0.5 and whole-article BM25 at 0: CV recall@3 / MRR@10 0.944 / 0.863, against 0.911 /
    0.826 for the equal weights used before (which were CV's choice before the glosses existed). Those weights
    alone would bury a norm without glosses, whose passages cannot compete with the glosses' wordings: the four
    unglossed development laws fell from 0.656 to 0.574 recall@3 beside the Constitution. So an article of a norm
    without glosses gets weights of its own, `w_unglossed_*`. Without glosses the whole-article views are the
    stronger ones: the article's embedding (with its innermost heading) and its BM25 with the heading path.
    `python -m research.search.fit_unglossed` chose them by leave-one-law-out on the four development laws (each on an
    index beside the Constitution, 122 questions; the Constitution's 331 development questions asked on each index
    too), over 0-0.75 for passage BM25, 1.5-3.75 for article BM25, 0-1.5 for passage embeddings and 2.25-6 for
    article embeddings: every fold chose passage BM25 0, article BM25 2.25 and article embeddings 3 (passage
    embeddings 0 or 0.75), and the held-out laws found 95 of 122 in the first three before abstaining, against 90
    with the single weight of 1.5 from each ranking used before (chosen from 1-2). With the abstain rules, on the
    four laws: 87 → 92 of 122, MRR@10 0.620 → 0.621; the Constitution's development questions on the three
    indexes of the second to fourth laws 943 → 947 of 993 (MRR@10 unchanged) and out of scope abstained 397 → 391
    of 570: laws state more amounts than the Constitution, so the quantity rule (since removed) found one in the first
    three more often. The Constitution alone never sees these weights.
    The glosses' discount (`gloss_dense_offset`) was fitted with the equal weights by `fit glosses` (the three
    development sets plus the first test law's questions, on an index holding both norms); run again under these
    weights it prefers 0.15 at rrf_k 3, with 0.2 within 0.004 in sample.
    `expansion_weight` and `heading_weight` were picked on the visible eval set plus bench/eval/dev_extra.jsonl
    from a plateau of near-equal settings (MRR@10 moves by about 0.02 across rrf_k 3-5 and heading_weight 1-3),
    not per question. `dense_mix` once added the embedding of the question followed by the lexicon's terms (0.4,
    picked with those, before the callers' glosses existed). Since the glosses put callers' wordings among the
    passages, the question's own embedding alone does as well on the development pool (331 in scope, 190 out of
    scope; 318 against 315 found in the first three, MRR@10 0.889 against 0.875) and on the development laws (82
    against 81 of 122), with the abstain model refitted (below), at half the encoder's work per query: one short
    sentence instead of two, the second the longer.
    """

    rrf_k: float = 5.0
    w_lex_passage: float = 2.0
    w_lex_article: float = 0.0
    w_dense_passage: float = 2.0
    w_dense_article: float = 0.5
    w_unglossed_lex_passage: float = 0.0
    w_unglossed_lex_article: float = 2.25
    w_unglossed_dense_passage: float = 0.0
    w_unglossed_dense_article: float = 3.0
    # A gloss (`glosses`) is one more passage of its article in the two passage rankings. A caller's question is
    # closer in style to a gloss than to any article text, so a gloss's cosine is lowered by `gloss_dense_offset`
    # and its BM25 score multiplied by `gloss_lex_scale` before they compete with article text.
    gloss_dense_offset: float = 0.2
    gloss_lex_scale: float = 1.0
    expansion_weight: float = 0.8
    heading_weight: int = 2
    dense_mix: float = 0.0
    depth: int = 30
    closest_probe: int = 60  # `dense_passages`: which passages of norms without glosses a query scores,
    probe_above: int = 2000  # once they are more than this many (fewer are all scored)
    # Abstain when `Signals.evidence` (a logistic-regression logit) is below `abstain_below`:
    #   evidence = abstain_bias + abstain_w_dense * dense_max + abstain_w_lex * log1p(lex_max)
    # Reproduce with `python -m research.search.fit abstain` on the development pool: the visible set,
    # bench/eval/dev_extra.jsonl, bench/eval/calibration.jsonl, the two oldest blind sets, bench/eval/heldout.jsonl
    # and bench/eval/heldout_callers.jsonl, which had decided enough keep/drop questions to count as development
    # data, and bench/eval/dev_scope.jsonl, written for the scope rules (331 in scope, 190 out of scope).
    # Class-balanced logistic regression, L2 = 1 on standardized features, rounded; the cut minimizes
    # fit.REFUSE_COST (4) x in-scope refused + out-of-scope answered. 20x repeated stratified 5-fold CV of the whole
    # procedure, with both rules below: 1.3/331 in-scope lost and 160.45/190 out-of-scope abstained (cost 34.75;
    # 35.75 before "nos" left the foreign rule's words for Panama), against 1.5 and 159.15 (36.85) for the same
    # model on the query vector of two embeddings (`dense_mix` 0.4, with the older foreign rule), 40.75 for
    # dense_max + coverage and 51.4 for the dense_max + coverage + log1p(expansion_terms) model used
    # before. That older model, fitted on the three easier development sets alone, cut so close under their in-scope
    # questions that it refused 6-11 % of the answerable questions of the newer blind sets. No signal here comes
    # from the lexicon, so one model serves every norm (the older one needed a second model for other norms).
    abstain_w_dense: float = 6.42
    abstain_w_lex: float = 1.63
    abstain_bias: float = -4.23
    abstain_below: float = -1.418
    # Whatever the evidence, abstain on a question set in another country's legal order (`scope`). It was written
    # knowing the development sets' out-of-scope questions, so their figures flatter it; on questions written after
    # it (research/search/ablation.md) it refused no answerable question and abstained on 5 of 20 out-of-scope
    # questions about the Constitution the model let through.
    abstain_foreign: bool = True

    def weight(self, ranking: str, glossed: bool = True) -> float:
        """The fusion weight of one of `RANKINGS` for an article of a norm with glosses, or without."""
        return float(getattr(self, f"w_{ranking}" if glossed else f"w_unglossed_{ranking}"))


@dataclass(frozen=True, slots=True)
class Hit:
    article: Article
    score: float
    excerpt: str
    norm: NormInfo | None = None


@dataclass(slots=True)
class Signals:
    """Per-query evidence strengths, kept for the abstain decision and for evaluation diagnostics.

    Only what the shipped abstain model and rules read: `dense_max` (the closest passage's cosine), `lex_max` (the
    best article's BM25 score, in each norm's own idf units) and the scope flag. Candidate signals that
    `fit abstain` compares (closeness to the nearest gloss, the share of the question's words a norm uses, the
    lexicon's added terms) are computed there (`fit.candidate_signals`), not on every query.
    """

    dense_max: float = 0.0
    lex_max: float = 0.0
    # `scope`: the question is set in another country.
    foreign: bool = False
    ranked: list[int] = field(default_factory=list)
    # Per ranking (`RANKINGS`), the article positions in rank order (top `depth`), for diagnostics and fitting.
    rankings: dict[str, list[int]] = field(default_factory=dict)

    def rank_in(self, ranking: str, pos: int) -> int | None:
        """1-based rank of article position `pos` in one ranking, None beyond its depth."""
        order = self.rankings.get(ranking, [])
        return order.index(pos) + 1 if pos in order else None

    @property
    def log_lex_max(self) -> float:
        """log1p of the best article's BM25 score (never negative): the abstain model's lexical input."""
        return math.log1p(max(self.lex_max, 0.0))

    def features(self) -> tuple[float, float]:
        """The abstain model's inputs, in the order of `ABSTAIN_FEATURES`."""
        return (self.dense_max, self.log_lex_max)

    def evidence(self, cfg: SearchConfig) -> float:
        """One number for "how much does the index speak to this" (a logit; higher is in scope).

        No signal alone is enough: a generic question can be close to many passages in embedding space, and an
        off-topic one can reuse a few of the law's words; the closest passage and the best article's BM25 score
        together separate them best (`SearchConfig`)."""
        dense, lex = self.features()
        return cfg.abstain_bias + cfg.abstain_w_dense * dense + cfg.abstain_w_lex * lex


ABSTAIN_FEATURES = ("dense_max", "log1p(lex_max)")


class Searcher:
    """Answers queries from a loaded index; safe to share across requests (read-only after construction)."""

    def __init__(self, index: LoadedIndex, config: SearchConfig | None = None) -> None:
        self.config = config or SearchConfig()
        self.index = index
        self.articles = index.articles
        self._pos = {a.key: i for i, a in enumerate(self.articles)}
        self._norms = {n.name: n for n in index.norms}
        self._passage_article = np.array([p.article for p in index.passages], dtype=np.int32)
        self._passage_terms = [terms(self._passage_text(p)) for p in index.passages]
        # Term statistics per norm (see bm25): adding a law leaves the others' internal order as it was.
        norm_of = {n.name: i for i, n in enumerate(index.norms)}
        article_group = [norm_of.get(a.norm, 0) for a in self.articles]
        self._gloss_article = np.array([g.article for g in index.glosses], dtype=np.int32)
        self._passages_of = GroupMax(self._passage_article)
        self._glosses_of = GroupMax(self._gloss_article)
        glossed_norms = {self.articles[g.article].norm for g in index.glosses}
        # Per article: does its norm have glosses? It decides which fusion weights the article gets (`weight`).
        self.glossed = np.array([a.norm in glossed_norms for a in self.articles], dtype=bool)
        self._dense = DensePassages(index.passage_vectors, self._passage_article, self.glossed, self.config.probe_above)
        gloss_terms = [terms(g.text) for g in index.glosses]
        gloss_groups = [article_group[g.article] for g in index.glosses]
        passage_groups = [article_group[p.article] for p in index.passages]
        self.passage_bm25 = BM25(self._passage_terms + gloss_terms, groups=passage_groups + gloss_groups)
        # The everyday table's terms score for the articles of unglossed norms only (1.0), glosses and the passages
        # of glossed norms never (0.0); with every norm glossed (the Constitution alone) they are never computed.
        unglossed = ~self.glossed
        self._any_unglossed = bool(unglossed.any())
        self._everyday_passages = np.concatenate(
            [unglossed[self._passage_article], np.zeros(len(gloss_terms), dtype=bool)]
        ).astype(np.float32)
        self._everyday_articles = unglossed.astype(np.float32)
        heading_terms = [self._heading_terms(a) for a in self.articles]
        self.article_bm25 = BM25(
            [terms(a.text) + h for a, h in zip(self.articles, heading_terms, strict=True)], groups=article_group
        )

    @property
    def article_count(self) -> int:
        return len(self.articles)

    def weights(self, ranking: str, positions: np.ndarray) -> np.ndarray:
        """The fusion weight of `ranking` for the articles at `positions` (`SearchConfig`: each one's norm has
        glosses or not)."""
        cfg = self.config
        return np.where(self.glossed[positions], cfg.weight(ranking), cfg.weight(ranking, glossed=False))

    def weight(self, ranking: str, pos: int) -> float:
        """The fusion weight of `ranking` for the article at `pos` (`weights` for one article)."""
        return float(self.weights(ranking, np.array([pos]))[0])

    def position(self, key: str) -> int | None:
        """The position of the article with this citation key (`norms.citation_key`), None if not indexed."""
        return self._pos.get(key)

    def _passage_text(self, p: Passage) -> str:
        return self.articles[p.article].text[p.start : p.end]

    def _heading_terms(self, article: Article) -> list[str]:
        reps = max(self.config.heading_weight, 0)
        heading = " ".join(plain_heading(h) for h in article.headings if h)
        return terms(heading) * reps

    def query_vector(self, query: str, extra: str | None = None) -> np.ndarray:
        """The dense query vector (normalised). `extra` is the lexicon's expansion, computed here if not given.

        The words as said; with `dense_mix` > 0, plus that much of the words followed by the lexicon's formal terms
        (one batch of two)."""
        cfg = self.config
        extra = CONSTITUTION.expand(query) if extra is None else extra
        if cfg.dense_mix > 0 and extra:
            raw, expanded = embedding.encode([query, f"{query} {extra}"])
            qvec: np.ndarray = raw + cfg.dense_mix * expanded
            qvec /= float(np.linalg.norm(qvec)) or 1.0
            return qvec
        return embedding.encode_one(query)

    def signals(self, query: str, shown: int = MAX_RESULTS) -> tuple[Signals, np.ndarray, np.ndarray, np.ndarray]:
        """Fused article ranking plus the raw passage-level scores needed to pick the first `shown` excerpts."""
        cfg = self.config
        q = query_terms(query, cfg.expansion_weight, everyday=self._any_unglossed)
        lex_p = self.passage_bm25.scores(q.weighted)
        lex_a = self.article_bm25.scores(q.weighted)
        if q.everyday:
            lex_p += self.passage_bm25.scores(q.everyday) * self._everyday_passages
            lex_a += self.article_bm25.scores(q.everyday) * self._everyday_articles
        with embedding.one_blas_thread():
            qvec = self.query_vector(query, q.expansion)
            dense_p = self._dense.scores(qvec)
            dense_a = self.index.article_vectors @ qvec
            dense_g = self.index.gloss_vectors @ qvec
            self._dense.probe(dense_p, dense_a, lex_p, cfg.closest_probe, qvec)

        n = len(self.articles)
        n_p = len(self._passage_article)
        lex_p_art = np.zeros(n, dtype=np.float32)
        dense_p_art = np.full(n, -1.0, dtype=np.float32)
        if len(self._glosses_of):
            self._glosses_of.maximum_into(lex_p_art, cfg.gloss_lex_scale * lex_p[n_p:])
            self._glosses_of.maximum_into(dense_p_art, dense_g - cfg.gloss_dense_offset)
            lex_p = lex_p[:n_p]
        self._passages_of.maximum_into(lex_p_art, lex_p)
        self._passages_of.maximum_into(dense_p_art, dense_p)

        fused = np.zeros(n, dtype=np.float64)
        rankings: dict[str, list[int]] = {}
        for name, scores, needs_positive in (
            ("lex_passage", lex_p_art, True),
            ("lex_article", lex_a, True),
            ("dense_passage", dense_p_art, False),
            ("dense_article", dense_a, False),
        ):
            order = top_positions(scores, cfg.depth)
            if needs_positive:
                order = [p for p in order if scores[p] > 0]
            rankings[name] = order
            if order:
                # Each article's vote: its norm's weight (`weight`) / (rrf_k + rank). An article appears once
                # per ranking, so one vectorised add per ranking sums exactly what a loop over `order` would.
                at = np.asarray(order, dtype=np.intp)
                fused[at] += self.weights(name, at) / (cfg.rrf_k + np.arange(1, at.size + 1))
        positive = np.flatnonzero(fused > 0)
        ranked = [int(i) for i in positive[np.argsort(-fused[positive], kind="stable")]]
        self._dense.fill(dense_p, ranked[:shown], qvec)
        sig = Signals(
            dense_max=float(dense_p.max()) if dense_p.size else -1.0,
            lex_max=float(lex_a.max()),
            foreign=foreign_jurisdiction(query),
            ranked=ranked,
            rankings=rankings,
        )
        return sig, fused, lex_p, dense_p

    def abstains(self, sig: Signals) -> bool:
        cfg = self.config
        return sig.evidence(cfg) < cfg.abstain_below or (cfg.abstain_foreign and sig.foreign)

    def search(self, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
        sig, fused, lex_p, dense_p = self.signals(query, shown=limit)
        if not sig.ranked or self.abstains(sig):
            return []
        hits: list[Hit] = []
        for pos in sig.ranked[:limit]:
            article = self.articles[pos]
            excerpt = self._excerpt(pos, lex_p, dense_p)
            hits.append(Hit(article, float(fused[pos]), excerpt, self._norms.get(article.norm)))
        return hits

    def _excerpt(self, pos: int, lex_p: np.ndarray, dense_p: np.ndarray) -> str:
        """The best-matching passage of the article, widened with its neighbours up to the excerpt limit."""
        article = self.articles[pos]
        ids = self._passages_of.members(pos)
        lex = lex_p[ids]
        lex_norm = lex / lex.max() if lex.max() > 0 else lex
        best = int(ids[int(np.argmax(lex_norm + (dense_p[ids] - dense_p[ids].min())))])
        p = self.index.passages[best]
        return excerpt_around(article.text, p.start, p.end)


def top_positions(scores: np.ndarray, depth: int) -> list[int]:
    """The first `depth` positions of a stable descending sort of `scores` (ties by position), without sorting
    every article: with many norms indexed, a full sort per ranking per query is most of the corpus-size cost."""
    if len(scores) <= depth:
        return [int(p) for p in np.argsort(-scores, kind="stable")]
    cut = np.partition(scores, len(scores) - depth)[len(scores) - depth]
    candidates = np.flatnonzero(scores >= cut)
    return [int(p) for p in candidates[np.argsort(-scores[candidates], kind="stable")][:depth]]


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
