"""Okapi BM25 over stemmed terms, held in memory as an inverted index of numpy arrays.

The corpus is a few hundred articles and a couple of thousand passages, so an in-memory index answers in well under
a millisecond and needs no query-time I/O; it is rebuilt from the stored text at load time in a few milliseconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np


class BM25:
    """BM25 scores of a query against each of `docs` (each a list of terms)."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(docs)
        lengths = np.array([len(d) for d in docs], dtype=np.float32)
        avg = float(lengths.mean()) if self.size else 1.0
        norm = k1 * (1.0 - b + b * lengths / max(avg, 1e-9))
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc_id, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(doc_id)
                tfs.append(tf)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.idf: dict[str, float] = {}
        for term, (ids, tfs) in postings.items():
            id_arr = np.array(ids, dtype=np.int32)
            tf_arr = np.array(tfs, dtype=np.float32)
            weights = tf_arr * (k1 + 1.0) / (tf_arr + norm[id_arr])
            df = len(ids)
            self.idf[term] = math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))
            self._postings[term] = (id_arr, weights.astype(np.float32))

    def scores(self, query_terms: Iterable[tuple[str, float]]) -> np.ndarray:
        """Scores for weighted query terms (term, weight); unknown terms contribute nothing."""
        out = np.zeros(self.size, dtype=np.float32)
        for term, weight in query_terms:
            posting = self._postings.get(term)
            if posting is None:
                continue
            ids, weights = posting
            out[ids] += weight * self.idf[term] * weights
        return out

    def known(self, term: str) -> bool:
        return term in self._postings
