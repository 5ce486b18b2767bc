"""Okapi BM25 over stemmed terms, held in memory as an inverted index of numpy arrays.

Documents may be grouped (one group per norm): each group keeps its own document frequencies and average length,
so importing a law never changes how the Constitution's articles rank among themselves, and a short law's rare
words are not weighed against the vocabulary of a long code. Each posting stores its idf-weighted term weight, so
a query costs one scatter-add per known term; the index is rebuilt from the stored text at load time.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np


def _rarest(n: int) -> float:
    """The idf of a term only one of `n` documents uses: the group's largest, the unit its idfs are measured in.

    A group's idf depends on its size: a word found once in a 44-article law weighs about half what a word found
    once in the Constitution's 700 passages does, so a small law's articles scored below the Constitution's for
    the same words and rarely reached the lexical rankings. Dividing by this makes "rare in its norm" weigh the
    same in every norm; within a group it is one constant factor, so no norm's own order changes."""
    return math.log(1.0 + (n - 0.5) / 1.5)


class BM25:
    """BM25 scores of a query against each of `docs` (each a list of terms), statistics per group of `groups`."""

    def __init__(
        self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75, groups: Sequence[int] | None = None
    ) -> None:
        self.size = len(docs)
        group_of = np.asarray(groups if groups is not None else [0] * self.size, dtype=np.int32)
        lengths = np.array([len(d) for d in docs], dtype=np.float32)
        norm = np.zeros(self.size, dtype=np.float32)
        group_sizes: dict[int, int] = {}
        for g in np.unique(group_of) if self.size else []:
            members = group_of == g
            avg = float(lengths[members].mean())
            norm[members] = k1 * (1.0 - b + b * lengths[members] / max(avg, 1e-9))
            group_sizes[int(g)] = int(members.sum())
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc_id, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(doc_id)
                tfs.append(tf)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._groups: dict[str, frozenset[int]] = {}
        for term, (ids, tfs) in postings.items():
            id_arr = np.array(ids, dtype=np.int32)
            tf_arr = np.array(tfs, dtype=np.float32)
            weights = tf_arr * (k1 + 1.0) / (tf_arr + norm[id_arr])
            doc_groups = group_of[id_arr]
            self._groups[term] = frozenset(int(g) for g in np.unique(doc_groups))
            idf = np.empty(len(ids), dtype=np.float32)
            for g, df in Counter(doc_groups.tolist()).items():
                n = group_sizes[g]
                idf[doc_groups == g] = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) / _rarest(n)
            self._postings[term] = (id_arr, (weights * idf).astype(np.float32))

    def scores(self, query_terms: Iterable[tuple[str, float]]) -> np.ndarray:
        """Scores for weighted query terms (term, weight); unknown terms contribute nothing."""
        out = np.zeros(self.size, dtype=np.float32)
        for term, weight in query_terms:
            posting = self._postings.get(term)
            if posting is None:
                continue
            ids, weighted = posting
            out[ids] += weight * weighted
        return out

    def known(self, term: str) -> bool:
        return term in self._postings

    def best_group_coverage(self, query_terms: Sequence[str]) -> float:
        """The largest share of `query_terms` that one group (norm) uses at all: a question that borrows one word
        from each of several laws is not thereby about any of them."""
        if not query_terms:
            return 0.0
        counts: Counter[int] = Counter()
        for term in query_terms:
            counts.update(self._groups.get(term, frozenset()))
        return max(counts.values(), default=0) / len(query_terms)
