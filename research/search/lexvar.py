"""Lexical and passage variants on the plain-law index, written as extra per-article score arrays for
`variants.py` (same question order as the cache): BM25 k1/b, heading repetitions, the lexicons off, RM3-style
pseudo-relevance feedback, and USE passage vectors for other passage windows.

    python -m research.search.lexvar DATA_DIR CACHE.npz OUT.npz
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from panama_law import embedding
from panama_law.index import disk as index
from panama_law.index import passages as passages_mod
from panama_law.index.disk import plain_heading as _plain_heading
from panama_law.retrieve.bm25 import BM25
from panama_law.retrieve.search import SearchConfig, Searcher
from panama_law.text import terms


def per_article(values: np.ndarray, groups: np.ndarray, n: int, floor: float) -> np.ndarray:
    out = np.full(n, floor, dtype=np.float32)
    np.maximum.at(out, groups, values)
    return out


def main(argv: list[str]) -> int:  # noqa: C901 - one experiment read top to bottom
    searcher = Searcher(index.load(Path(argv[0])), SearchConfig())
    z = np.load(argv[1])
    meta = json.loads(str(z["meta"]))
    arts = searcher.articles
    n = len(arts)
    pa = searcher._passage_article
    p_terms = searcher._passage_terms
    heading = [" ".join(_plain_heading(h) for h in a.headings if h) for a in arts]
    a_terms = [terms(a.text) for a in arts]
    h_terms = [terms(h) for h in heading]
    out: dict[str, Any] = {}
    queries = [(dict(w), dict(e)) for w, e in meta["qterms"]]

    def weighted(q: tuple[dict[str, float], dict[str, float]]) -> list[tuple[str, float]]:
        w, e = q
        merged = dict(w)
        for t, v in e.items():
            merged.setdefault(t, v)
        return list(merged.items())

    qs = [weighted(q) for q in queries]
    own = [[(t, 1.0) for t in terms(question)] for question in meta["questions"]]

    def run(name: str, bm: BM25, groups: np.ndarray | None, query_list: list[list[tuple[str, float]]]) -> None:
        rows = []
        for q in query_list:
            s = bm.scores(q)
            rows.append(per_article(s, groups, n, 0.0) if groups is not None else s)
        out[name] = np.array(rows, dtype=np.float32)

    for k1 in (0.9, 1.2, 1.6):
        for b in (0.4, 0.75, 0.9):
            run(f"lex_passage@k1={k1}:b={b}", BM25(p_terms, k1=k1, b=b), pa, qs)
            for hw in (0, 2, 4):
                run(
                    f"lex_article@k1={k1}:b={b}:h={hw}",
                    BM25([t + h * hw for t, h in zip(a_terms, h_terms, strict=False)], k1=k1, b=b),
                    None,
                    qs,
                )
    # The question's own words only (no lexicon at all): what the word lists add on a plain law.
    run("lex_passage@own", BM25(p_terms), pa, own)
    run("lex_article@own", BM25([t + h * 2 for t, h in zip(a_terms, h_terms, strict=False)]), None, own)
    # RM3-style feedback: the terms of the top passages (by passage BM25), weighted by their scores, added at beta.
    bm_p = BM25(p_terms)
    bm_a = BM25([t + h * 2 for t, h in zip(a_terms, h_terms, strict=False)])
    z["dense_a"]
    for fb_docs, fb_terms, beta in ((3, 10, 0.3), (5, 10, 0.3), (5, 20, 0.5), (10, 20, 0.3), (3, 10, 0.6)):
        rows_p, rows_a = [], []
        for _qi, q in enumerate(qs):
            s = bm_p.scores(q)
            top = [int(t) for t in np.argsort(-s)[:fb_docs] if s[t] > 0]
            dist: dict[str, float] = {}
            for t in top:
                tf = Counter(p_terms[t])
                total = sum(tf.values()) or 1
                for term, c in tf.items():
                    dist[term] = dist.get(term, 0.0) + float(s[t]) * c / total
            have = {t for t, _ in q}
            ranked = sorted(dist.items(), key=lambda kv: -kv[1])
            extra = [(t, v) for t, v in ranked if t not in have][:fb_terms]
            mx = max((v for _, v in extra), default=1.0)
            expanded = q + [(t, beta * v / mx) for t, v in extra]
            rows_p.append(per_article(bm_p.scores(expanded), pa, n, 0.0))
            rows_a.append(bm_a.scores(expanded))
        out[f"lex_passage@rm3={fb_docs}:{fb_terms}:{beta}"] = np.array(rows_p)
        out[f"lex_article@rm3={fb_docs}:{fb_terms}:{beta}"] = np.array(rows_a)
    # Passage windows: USE vectors of other window sizes (the index's passages are ~320 characters).
    qv = embedding.encode(meta["questions"])
    for target in (160, 480, 800):
        passages_mod.TARGET_CHARS = target
        spans, owners = [], []
        for i, a in enumerate(arts):
            for sp in passages_mod.passages(a.text):
                spans.append(a.text[sp.start : sp.end])
                owners.append(i)
        pv = embedding.encode(spans)
        owners_arr = np.array(owners)
        sims = qv @ pv.T
        out[f"dense_passage@win={target}"] = np.array([per_article(r, owners_arr, n, -1.0) for r in sims])
        run(f"lex_passage@win={target}", BM25([terms(s) for s in spans]), owners_arr, qs)
    passages_mod.TARGET_CHARS = 320
    # Article vectors with the whole heading path (Título and Capítulo), not only the innermost heading.
    av = embedding.encode([f"{h}. {a.text}" if h else a.text for h, a in zip(heading, arts, strict=False)])
    out["dense_article@fullpath"] = qv @ av.T
    av0 = embedding.encode([a.text for a in arts])
    out["dense_article@noheading"] = qv @ av0.T
    np.savez_compressed(argv[2], **out)
    print("variants:", len(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
