"""USE query vectors with the lexicons' formal terms appended (`SearchConfig.dense_mix`), scored against the plain
index's passage and article vectors, as extra per-article arrays for `grid.py`.

    python -m research.search.densemix DATA_DIR CACHE.npz OUT.npz
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from panama_law import embedding
from panama_law.index import disk as index
from panama_law.retrieve.lexicon import CONSTITUTION, EVERYDAY
from panama_law.retrieve.search import SearchConfig, Searcher


def main(argv: list[str]) -> int:
    searcher = Searcher(index.load(Path(argv[0])), SearchConfig())
    meta = json.loads(str(np.load(argv[1])["meta"]))
    qs = meta["questions"]
    n = len(searcher.articles)
    pa = searcher._passage_article
    raw = embedding.encode(qs)
    out: dict[str, Any] = {}

    def const(q: str) -> str:
        return CONSTITUTION.expand(q)

    def both(q: str) -> str:
        return " ".join(x for x in (CONSTITUTION.expand(q), EVERYDAY.expand(q)) if x)

    for label, expand in (("const", const), ("both", both)):
        exp_text = [f"{q} {expand(q)}".strip() for q in qs]
        expd = embedding.encode(exp_text)
        for m in (0.4, 1.0, 2.5):
            v = raw + m * expd
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            pv = v @ searcher.index.passage_vectors.T
            per = np.full((len(qs), n), -1.0, dtype=np.float32)
            for j in range(n):
                cols = np.flatnonzero(pa == j)
                per[:, j] = pv[:, cols].max(1)
            out[f"dense_passage@mix={label}:{m}"] = per
            out[f"dense_article@mix={label}:{m}"] = v @ searcher.index.article_vectors.T
    np.savez_compressed(argv[2], **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
