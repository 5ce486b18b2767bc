"""Which passage cosines a query computes (`panama_law.retrieve.dense_passages`): all of a glossed norm's, and of a norm
without glosses only a probe's and the shown articles', with the same excerpts as scoring every passage."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from panama_law.index import disk as index
from panama_law.index.build import import_norms
from panama_law.retrieve.dense_passages import UNSCORED, DensePassages
from panama_law.retrieve.search import SearchConfig, Searcher
from tests.norm_fixtures import norm_jsonl


def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, 8)).astype(np.float32)
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def _same_cosines(actual: np.ndarray, desired: np.ndarray) -> None:
    """The same cosines as the full product, to float32 rounding: a product over a subset of rows may sum in another
    order than the whole matrix's (numpy 2.4's kernels differ in the last bit), and no ranking reads that bit."""
    np.testing.assert_allclose(actual, desired, rtol=0, atol=1e-6)


def test_only_the_probe_and_the_asked_articles_are_scored_beyond_the_always_scored_ones() -> None:
    """Six articles of two passages each; the first two are always scored. A probe of one takes the article closest
    by article embedding and the one holding the best passage by BM25; `fill` adds the article asked for; every
    cosine computed is the full product's, every other one is `UNSCORED`. A probe as large as the pool is the full
    product."""
    rng = np.random.default_rng(3)
    vectors = _unit_rows(rng, 12)
    passage_article = np.repeat(np.arange(6), 2)
    qvec = _unit_rows(rng, 1)[0]
    full = vectors @ qvec
    dense = DensePassages(vectors, passage_article, np.array([True, True, False, False, False, False]))

    scores = dense.scores(qvec)
    _same_cosines(scores[:4], full[:4])
    assert (scores[4:] == UNSCORED).all()

    article_dense = np.array([0.9, 0.9, 0.1, 0.8, 0.2, 0.3], dtype=np.float32)  # article 3 closest of the pool
    passage_lex = np.zeros(12, dtype=np.float32)
    passage_lex[9] = 2.0  # article 4's second passage
    dense.probe(scores, article_dense, passage_lex, 1, qvec)
    computed = scores != UNSCORED
    assert computed.tolist() == [True] * 4 + [False] * 2 + [True] * 4 + [False] * 2
    _same_cosines(scores[computed], full[computed])

    dense.fill(scores, [5], qvec)
    _same_cosines(scores[10:], full[10:])
    assert (scores[4:6] == UNSCORED).all()

    whole = dense.scores(qvec)
    dense.probe(whole, article_dense, np.zeros(12, dtype=np.float32), 4, qvec)
    _same_cosines(whole, full)


def test_a_norm_without_glosses_gets_the_excerpts_and_ranks_of_scoring_every_passage(
    tmp_path: Path, built_dir: Path
) -> None:
    """Beside the Constitution, a norm without glosses made of the Constitution's longest articles. With no probe its
    passages are never scored, yet every shown article's excerpt is the one scoring all of them picks (its passages
    are scored when it is shown). With a probe as large as the norm, the fused ranking, each ranking and the
    closest-passage signal are those of the full product. With the default `probe_above`, a norm this small has every
    passage scored."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(index.index_path(built_dir), index.index_path(data))
    constitution = index.load(data)
    longest = sorted(constitution.articles, key=lambda a: len(a.text), reverse=True)[:12]
    import_norms(norm_jsonl(tmp_path / "law.jsonl", "Norma de ensayo sin glosas", [a.text for a in longest]), data)
    loaded = index.load(data)

    every = Searcher(loaded)
    every._dense = DensePassages(loaded.passage_vectors, every._passage_article, np.ones(len(loaded.articles), bool))
    small = Searcher(loaded, replace(SearchConfig(), closest_probe=0, probe_above=0))
    whole = Searcher(loaded, replace(SearchConfig(), closest_probe=len(loaded.articles), probe_above=0))
    # Even with no probe: a norm this small is below the default `probe_above`, so every passage is scored.
    default = Searcher(loaded, replace(SearchConfig(), closest_probe=0))
    unglossed = ~small.glossed[small._passage_article]
    assert unglossed.sum() > 2 * 12  # the norm's articles hold several passages each

    questions = [
        "me pueden quitar la casa para hacer una carretera",
        "que pasa si el presidente se muere antes de terminar",
        "los indigenas tienen derecho a sus tierras",
        "puedo votar si estoy preso",
    ]
    shown_unglossed = 0
    for question in questions:
        dense_p = small.signals(question)[3]
        assert (dense_p[unglossed] == UNSCORED).any(), question
        hits = small.search(question)
        reference = {h.article.key: h.excerpt for h in every.search(question)}
        for hit in hits:
            if hit.article.key in reference:
                assert hit.excerpt == reference[hit.article.key], question
        shown_unglossed += sum(not small.glossed[small.position(h.article.key)] for h in hits)

        assert not (default.signals(question)[3] == UNSCORED).any(), question
        full_sig = every.signals(question)[0]
        whole_sig = whole.signals(question)[0]
        assert whole_sig.ranked == full_sig.ranked, question
        assert whole_sig.rankings == full_sig.rankings, question
        assert whole_sig.dense_max == full_sig.dense_max, question
    assert shown_unglossed  # the norm's own articles were among those shown
