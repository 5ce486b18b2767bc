"""Passage cosines: every passage of a norm with glosses, and of the others only the passages that can matter.

At ten times the Constitution's size, the passages of norms without callers' glosses were 90 % of the passage
matrix and half of all the vectors a query multiplied. Their cosines are read in three places: the passage
embedding ranking, where only an article's best passage and only the first `depth` articles count (and a norm
without glosses has weight 0 there, `search.SearchConfig`, though its articles still take places); the abstain
model's closest-passage signal (`Signals.dense_max`); and the excerpt of an article to be shown. For a norm
without glosses, all three are served from the passages of a probe: its `probe` articles closest by article
embedding and those holding its `probe` best passages by BM25, plus the articles to be shown.

That is exact whenever the probe holds the articles those places need. Norms without glosses of up to `probe`
(`SearchConfig.closest_probe`) articles in all are probed whole, so the development laws' figures, each law beside
the Constitution, are the same to the last digit. With all six of them in one index (289 articles without glosses;
the probe forced, they hold fewer passages than `probe_above`), the Constitution's and the laws' 703 development
questions got the same abstain decisions as with every passage scored; the closest passage differed for 3, the first
three articles for 3, and one gold article left the first three (415 → 414); a probe of 30 changed the first three
for 8, one of 100 for 1. With 2,952 articles of filler norms made of the Constitution's sentences reshuffled
(`bench/search.py`), the closest passage lay outside the probe for 91 of the Constitution's 521 development
questions (by at most 0.066 in cosine): there each article mixes unrelated sentences, so its embedding says little
about its best passage (the Constitution's questions there found 238 rather than 234 of 331 in the first three,
abstentions unchanged: filler articles left unprobed no longer outrank it in the passage embedding ranking). In
exchange the dense products of a query at that size fell from 2.3 to 1.1 ms, and the search in process by 0.5-0.9 ms
of about 7, alternating with the code that scored every passage; two servers side by side (`bench/search.py
--against`), p50 15.0 → 14.0 ms. At twice the Constitution's size (706 such passages) the probe saved nothing (11.7
→ 11.8 ms), so below `SearchConfig.probe_above` (2,000, about where the two costs meet) every passage is scored, as
before, and results are exact.
"""

from __future__ import annotations

import numpy as np

from ..embedding import one_blas_thread

UNSCORED = -np.inf
"""The score of a passage whose cosine was not computed: below every cosine, so maxima and rankings skip it."""


class DensePassages:
    """Cosines between a query and the passages of the articles `always`, and of any others asked for.

    `vectors` are the passages' unit embeddings and `passage_article` each passage's article position; the
    passages are stored article by article. With no more than `probe_above` passages outside `always`, all are
    scored."""

    def __init__(
        self, vectors: np.ndarray, passage_article: np.ndarray, always: np.ndarray, probe_above: int = 0
    ) -> None:
        scored = always[passage_article]
        if int((~scored).sum()) <= probe_above:  # too few to be worth probing: score them all, exactly
            scored = np.ones_like(scored)
        self._vectors = vectors
        self._passage_article = passage_article
        self._articles = len(always)
        self.complete = bool(scored.all())
        self._rows = np.flatnonzero(scored)
        # The always-scored passages' vectors in one block: one contiguous matrix-vector product.
        self._block = vectors if self.complete else np.ascontiguousarray(vectors[self._rows])
        self._pool = np.flatnonzero(~always)
        self._pool_rows = np.flatnonzero(~scored)

    def scores(self, qvec: np.ndarray) -> np.ndarray:
        """Every passage's cosine, for the always-scored ones; `UNSCORED` for the others until `fill` or `probe`."""
        if self.complete:
            block: np.ndarray = self._block @ qvec
            return block
        out = np.full(len(self._passage_article), UNSCORED, dtype=np.float32)
        out[self._rows] = self._block @ qvec
        return out

    def fill(self, scores: np.ndarray, articles: list[int], qvec: np.ndarray) -> None:
        """Compute, into `scores`, the cosines of these articles' passages that are not computed yet."""
        if self.complete or not articles:
            return
        wanted = np.zeros(self._articles, dtype=bool)
        wanted[np.asarray(articles, dtype=np.intp)] = True
        self._fill(scores, wanted, qvec)

    def probe(
        self, scores: np.ndarray, article_dense: np.ndarray, passage_lex: np.ndarray, count: int, qvec: np.ndarray
    ) -> None:
        """Compute, into `scores`, the cosines of the passages of the not-always-scored articles among the `count`
        closest by `article_dense` and of those holding the `count` best such passages by `passage_lex`."""
        if self.complete or count < 1:
            return
        pool, rows = self._pool, self._pool_rows
        wanted = np.zeros(self._articles, dtype=bool)
        wanted[pool[np.argpartition(-article_dense[pool], count - 1)[:count]] if pool.size > count else pool] = True
        lexical = rows[passage_lex[rows] > 0]
        if lexical.size > count:
            lexical = lexical[np.argpartition(-passage_lex[lexical], count - 1)[:count]]
        wanted[self._passage_article[lexical]] = True
        self._fill(scores, wanted, qvec)

    def _fill(self, scores: np.ndarray, wanted: np.ndarray, qvec: np.ndarray) -> None:
        ids = np.flatnonzero(wanted[self._passage_article])
        ids = ids[scores[ids] == UNSCORED]
        if ids.size:
            with one_blas_thread():  # a few hundred rows: enough for OpenBLAS to wake, and busy-wait, a second thread
                scores[ids] = self._vectors[ids] @ qvec
