"""The index of many norms: import beside the Constitution, replace, remove, refuse without touching the index,
read and convert a format-1 index, import a norms folder, the command line, and search across norms.

The Constitution comes from the session index (tests/conftest.py); other norms are the fictional test law
(tests/fixtures/norms) or tiny synthetic ones written here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from panama_law import __main__ as cli
from panama_law.evaluate import evaluate, load_items
from panama_law.index import disk as index
from panama_law.index import store
from panama_law.index.build import ensure_index, import_folder, import_norms
from panama_law.ingest import corpus
from panama_law.ingest.sources import ImportOptions
from panama_law.norms import NormError
from panama_law.retrieve.bm25 import BM25
from panama_law.retrieve.search import RANKINGS, Searcher
from panama_law.serve.schema import to_source
from panama_law.settings import ServerSettings
from tests.norm_fixtures import LEY_EVAL, LEY_NAME, LEY_TXT, norm_jsonl

CONSTITUTION = corpus.DOCUMENT_NAME


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def combined_dir(tmp_path_factory: pytest.TempPathFactory, built_dir: Path) -> Path:
    """The Constitution's session index plus the test law, imported through the public import path."""
    data_dir = tmp_path_factory.mktemp("panama_law_norms")
    shutil.copy(index.index_path(built_dir), index.index_path(data_dir))
    import_norms(LEY_TXT, data_dir)
    return data_dir


@pytest.fixture(scope="session")
def combined(combined_dir: Path) -> Searcher:
    return Searcher(index.load(combined_dir))


# --- import, replace, remove ----------------------------------------------------------------------------------------


def test_importing_a_law_keeps_the_constitution_and_lists_both(combined_dir: Path) -> None:
    norms = index.list_norms(combined_dir)
    assert [(n.name, n.article_count) for n in norms] == [(CONSTITUTION, 328), (LEY_NAME, 42)]
    ley = norms[1]
    assert (ley.date, ley.gaceta, ley.url) == (
        "2099-11-30",
        "99999-A",
        "https://example.org/gaceta/ley-de-prueba-7-de-2099.pdf",
    )


def test_reimporting_a_name_replaces_that_norm_only_and_bad_input_leaves_the_index_byte_for_byte(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    import_norms(norm_jsonl(tmp_path / "a.jsonl", "Ley sintética A", ["Las tortugas de prueba cruzan la calle."]), data)
    import_norms(norm_jsonl(tmp_path / "b.jsonl", "Ley sintética B", ["Los faroles de prueba se encienden."]), data)
    import_norms(norm_jsonl(tmp_path / "a2.jsonl", "Ley sintética A", ["Primero.", "Segundo."], gaceta="77"), data)
    assert [(n.name, n.article_count, n.gaceta) for n in index.list_norms(data)] == [
        ("Ley sintética B", 1, None),
        ("Ley sintética A", 2, "77"),
    ]
    loaded = index.load(data)
    assert loaded.passage_vectors.shape[0] == len(loaded.passages)
    assert [a.citation for a in loaded.articles][-2:] == ["Ley sintética A, artículo 1", "Ley sintética A, artículo 2"]

    before = _digest(index.index_path(data))
    dup = tmp_path / "dup.txt"
    dup.write_text("Artículo 1. Uno.\nArtículo 1. Otra vez.", encoding="utf-8")
    with pytest.raises(NormError, match="appears twice"):
        import_norms(dup, data, ImportOptions(norm="Ley sintética C"))
    with pytest.raises(NormError, match="collides with the indexed norm 'Ley sintética A'"):
        import_norms(norm_jsonl(tmp_path / "c.jsonl", "ley sintetica a", ["Otra."]), data)
    with pytest.raises(NormError, match="is the Constitution's"):
        import_norms(norm_jsonl(tmp_path / "k.jsonl", "Constitucion Politica de la Republica de Panama", ["X."]), data)
    empty = tmp_path / "vacia.txt"
    empty.write_text("Sin artículos aquí.", encoding="utf-8")
    with pytest.raises(NormError, match="no articles found"):
        import_norms(empty, data, ImportOptions(norm="Ley vacía"))
    assert _digest(index.index_path(data)) == before
    assert sorted(p.name for p in data.iterdir()) == [index.INDEX_FILE], "no temporary files left behind"

    store.remove_norm(data, "Ley sintética B")
    assert [n.name for n in index.list_norms(data)] == ["Ley sintética A"]
    with pytest.raises(NormError, match=r"no norm named 'Ley sintética B'.*Ley sintética A"):
        store.remove_norm(data, "Ley sintética B")


# --- the format-1 index --------------------------------------------------------------------------------------------


def _write_v1_index(data_dir: Path) -> np.ndarray:
    """A format-1 file exactly as the single-norm server wrote it (synthetic text, random unit vectors)."""
    data_dir.mkdir(parents=True)
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(2, 512)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with contextlib.closing(sqlite3.connect(index.index_path(data_dir))) as db:
        db.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE articles (number INTEGER PRIMARY KEY, titulo TEXT NOT NULL, capitulo TEXT,
                                   text TEXT NOT NULL);
            CREATE TABLE passages (id INTEGER PRIMARY KEY, article INTEGER NOT NULL, start INTEGER NOT NULL,
                                   end INTEGER NOT NULL);
            CREATE TABLE vectors (name TEXT PRIMARY KEY, rows INTEGER NOT NULL, dim INTEGER NOT NULL,
                                  data BLOB NOT NULL);
            """
        )
        db.execute("INSERT INTO articles VALUES (1, 'TÍTULO I - SINTÉTICO', NULL, 'Texto sintético uno.')")
        db.execute("INSERT INTO passages VALUES (0, 1, 0, 20)")
        for name, rows in (("passages", vecs[:1]), ("articles", vecs[1:])):
            db.execute("INSERT INTO vectors VALUES (?, 1, 512, ?)", (name, rows.tobytes()))
        meta = {"schema_version": "1", "source_sha256": "ab" * 32, "built_at": "1.0"}
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        db.commit()
    return vecs


def test_a_format_1_index_is_served_as_the_constitution_and_converted_on_the_next_import(tmp_path: Path) -> None:
    data = tmp_path / "old"
    vecs = _write_v1_index(data)
    old = index.load(data)
    assert [n.name for n in old.norms] == [CONSTITUTION] and old.source_sha256 == "ab" * 32
    assert old.articles[0].citation == f"{CONSTITUTION}, artículo 1"
    assert [n.article_count for n in index.list_norms(data)] == [1]

    import_norms(norm_jsonl(tmp_path / "n.jsonl", "Ley sintética N", ["Los dragones de prueba vuelan."]), data)
    new = index.load(data)
    assert [(n.name, n.article_count) for n in new.norms] == [(CONSTITUTION, 1), ("Ley sintética N", 1)]
    np.testing.assert_array_equal(new.passage_vectors[0], vecs[0])
    np.testing.assert_array_equal(new.article_vectors[0], vecs[1])
    assert new.articles[0].headings == ("TÍTULO I - SINTÉTICO",)


def test_an_index_of_an_unknown_format_asks_for_a_rebuild(tmp_path: Path) -> None:
    data = tmp_path / "future"
    data.mkdir()
    with contextlib.closing(sqlite3.connect(index.index_path(data))) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '99')")
        db.commit()
    with pytest.raises(index.IndexLoadError, match="schema '99'; rebuild it"):
        index.load(data)


# --- a norms folder, as `make run` and Compose use it ----------------------------------------------------------------


def test_a_norms_folder_is_imported_at_start_once_and_a_bad_file_is_reported_not_fatal(tmp_path: Path) -> None:
    folder = tmp_path / "normas"
    folder.mkdir()
    (folder / "ley_sintetica_9.txt").write_text(
        "TÍTULO I\nDE LAS PRUEBAS\nArtículo 1. Los semáforos sintéticos parpadean.\nArtículo 2. Fin.", encoding="utf-8"
    )
    (folder / "ley_sintetica_9.meta.json").write_text(json.dumps({"gaceta": "9", "date": "2001-01-09"}), "utf-8")
    (folder / "rota.txt").write_text("sin artículos", encoding="utf-8")
    norm_jsonl(folder / "otra.jsonl", "Decreto sintético 10", ["Los relojes sintéticos atrasan."])
    data = tmp_path / "data"
    settings = ServerSettings(data_dir=data, norms_dir=folder, source=tmp_path / "never-read.json")
    data.mkdir()
    import_norms(norm_jsonl(tmp_path / "base.jsonl", "Ley base", ["Base."]), data)  # an index exists: no download

    ensure_index(settings)
    norms = {n.name: n for n in index.list_norms(data)}
    assert set(norms) == {"Ley base", "Ley sintetica 9", "Decreto sintético 10"}
    assert (norms["Ley sintetica 9"].gaceta, norms["Ley sintetica 9"].date) == ("9", "2001-01-09")

    before = _digest(index.index_path(data))
    outcomes = {o.file: o for o in import_folder(folder, data)}
    assert outcomes["ley_sintetica_9.txt"].unchanged and outcomes["otra.jsonl"].unchanged
    assert outcomes["rota.txt"].error is not None and "no articles found" in outcomes["rota.txt"].error
    assert _digest(index.index_path(data)) == before, "an unchanged folder does not rewrite the index"


# --- the command line ----------------------------------------------------------------------------------------------


def test_cli_import_norms_search_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(tmp_path / "data")
    law = norm_jsonl(tmp_path / "l.jsonl", "Ley sintética 5", ["Los pingüinos sintéticos usan bufanda en invierno."])
    assert cli.main(["import", str(law), "--gaceta", "55", "--date", "2005-05-05", "--data-dir", data]) == 0
    assert "imported Ley sintética 5: 1 articles" in capsys.readouterr().out
    assert cli.main(["norms", "--data-dir", data]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Ley sintética 5\t1 articles, 0 glosses\tjsonl\tdate 2005-05-05; gaceta 55"
    ]

    assert cli.main(["search", "pingüinos sintéticos con bufanda", "--json", "--data-dir", data]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results[0]["citation"] == "Ley sintética 5, artículo 1"
    assert (results[0]["gaceta"], results[0]["date"]) == ("55", "2005-05-05")

    assert cli.main(["import", str(tmp_path / "missing.txt"), "--norm", "X", "--data-dir", data]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read") and err.count("\n") == 1
    assert cli.main(["remove", "Ley sintética 5", "--data-dir", data]) == 0
    assert cli.main(["remove", "Ley sintética 5", "--data-dir", data]) == 1
    assert "no norm named" in capsys.readouterr().err


# --- search across norms -------------------------------------------------------------------------------------------


def test_sources_cite_norm_and_article_with_the_path_as_title_and_the_norms_metadata(combined: Searcher) -> None:
    hits = combined.search("me robaron la bicicleta pública, tengo que pagarla")
    source = to_source(hits[0])
    assert source == {
        "title": "Título IV. DEL PRÉSTAMO DE BICICLETAS PÚBLICAS · Capítulo II. Tarifas, daños y extravíos",
        "citation": "Ley de prueba 7 de 2099, artículo 31",
        "excerpt": source["excerpt"],
        "date": "2099-11-30",
        "gaceta": "99999-A",
        "official_source_url": "https://example.org/gaceta/ley-de-prueba-7-de-2099.pdf",
    }
    assert source["excerpt"].startswith("En caso de robo o extravío")
    constitution = to_source(combined.search("me botaron estando embarazada, ¿es legal?")[0])
    assert constitution["citation"] == f"{CONSTITUTION}, artículo 72"
    assert CONSTITUTION not in constitution["title"] and "date" not in constitution


def test_recall_at_3_on_the_test_law_questions_is_at_least_080(combined: Searcher) -> None:
    report = evaluate(combined, load_items(LEY_EVAL))
    assert report["in_scope"] == 32
    assert report["recall_at_3"] >= 0.80, report


def test_answerable_questions_about_an_imported_law_are_not_refused_for_want_of_the_constitutions_words(
    combined: Searcher,
) -> None:
    """The lexicon maps callers' words to the Constitution's; for another norm it says nothing. The abstain model
    reads no lexicon signal (`Signals.features`: the closest passage and the best BM25 score), so a question about
    a team's law is judged as one about the Constitution would be (two of these were refused when the model counted
    the lexicon's terms)."""
    items = load_items(LEY_EVAL)
    assert evaluate(combined, items)["in_scope_abstained"] == 0
    on_top = [combined.signals(item.question)[0] for item in items]
    assert any(combined.articles[sig.ranked[0]].norm == LEY_NAME for sig in on_top)


def test_a_norm_without_glosses_is_fused_with_weights_of_its_own(combined: Searcher) -> None:
    """The weights fitted for a glossed norm lean on the passage rankings, where glosses compete; an unglossed
    law's articles would sink under them (0.656 → 0.574 recall@3 on the development laws), so each ranking
    gives them weights of their own (`w_unglossed_*`). Every fused score must be the sum of its rankings' votes with
    its norm's weights."""
    cfg = combined.config
    assert all(cfg.weight(name) != cfg.weight(name, glossed=False) for name in ("lex_article", "dense_article"))
    sig, fused, _, _ = combined.signals("quien riega el huerto comunitario si el vecino se va de vacaciones")
    norms = {combined.articles[p].norm for p in sig.ranked[:10]}
    assert {LEY_NAME, CONSTITUTION} <= norms, "both norms in play"
    for pos in sig.ranked[:10]:
        glossed = combined.articles[pos].norm == CONSTITUTION
        expected = 0.0
        for name in RANKINGS:
            rank = sig.rank_in(name, pos)
            if rank is not None:
                expected += cfg.weight(name, glossed) / (cfg.rrf_k + rank)
        assert fused[pos] == pytest.approx(expected)


def test_fit_fusion_scores_the_fusion_the_search_does_on_an_index_of_both_kinds_of_norm(combined: Searcher) -> None:
    """`fit fusion` replays the fusion from each question's rankings: with the shipped weights it must rank as the
    search does, unglossed articles at `w_unglossed_*`, or its fit would score a fusion nobody runs."""
    from research.search.fit import fused_metrics, hit_and_rr

    cfg = combined.config
    items = [item for item in load_items(LEY_EVAL) if item.gold]
    sigs = [combined.signals(item.question)[0] for item in items]
    golds = [item.gold_keys for item in items]
    keys = [a.key for a in combined.articles]
    weights = [cfg.weight(name) for name in RANKINGS]
    unglossed = [cfg.weight(name, glossed=False) for name in RANKINGS]
    replayed = fused_metrics(sigs, golds, keys, cfg.rrf_k, weights, combined.glossed, unglossed)
    searched = [hit_and_rr([keys[p] for p in sig.ranked[:10]], gold) for sig, gold in zip(sigs, golds, strict=True)]
    assert replayed.tolist() == [list(pair) for pair in searched]


def test_a_word_rare_in_a_small_law_weighs_what_a_word_rare_in_the_constitution_does() -> None:
    """BM25 statistics are kept per norm; a norm's idf is measured in units of its own rarest word, so a small
    law is not outscored for the same kind of match, and each norm's own order is what it was alone."""
    big = [["comun", "palabra"] for _ in range(700)]
    big[3] = ["rara", "palabra"]
    small = [["comun", "palabra"] for _ in range(44)]
    small[5] = ["unica", "palabra"]
    together = BM25(big + small, groups=[0] * 700 + [1] * 44)
    rare_big = together.scores([("rara", 1.0)])[3]
    rare_small = together.scores([("unica", 1.0)])[700 + 5]
    assert rare_big == pytest.approx(rare_small, rel=1e-6)
    alone = BM25(big)
    query = [("comun", 1.0), ("rara", 1.0), ("palabra", 0.5)]
    assert list(np.argsort(-alone.scores(query), kind="stable")) == list(
        np.argsort(-together.scores(query)[:700], kind="stable")
    )


def test_eval_gold_may_be_citations_or_constitution_numbers(combined: Searcher, tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        "\n".join(
            json.dumps(row, ensure_ascii=False)
            for row in (
                {
                    "id": "a",
                    "question": "me robaron la bicicleta pública",
                    "gold": ["ley de prueba 7 de 2099, articulo 31"],
                },
                {"id": "b", "question": "me botaron estando embarazada", "gold": [72]},
                {"id": "c", "question": "me botaron estando embarazada", "gold": [f"{CONSTITUTION}, artículo 72"]},
            )
        ),
        encoding="utf-8",
    )
    assert evaluate(combined, load_items(gold))["recall_at_3"] == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "gold": [null]}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: gold entries are citations"):
        load_items(bad)


@pytest.mark.parametrize(
    ("question", "article"),
    [("cuántos años dura el periodo del presidente", 177), ("puedo practicar cualquier religión que yo quiera", 35)],
)
def test_constitution_questions_still_find_their_article_beside_another_law(
    combined: Searcher, question: str, article: int
) -> None:
    assert f"{CONSTITUTION}, artículo {article}" in [h.article.citation for h in combined.search(question)]


def test_compose_mounts_a_norms_folder_where_the_search_server_imports_from() -> None:
    import yaml

    compose = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text("utf-8"))
    search = compose["services"]["search"]
    target = search["environment"]["PANAMA_LAW_NORMS_DIR"]
    assert any(v.endswith(f":{target}:ro") for v in search["volumes"]), search["volumes"]


def test_make_run_passes_the_norms_folder_to_the_search_server(tmp_path: Path) -> None:
    from agent.devstack.stack import Stack, StackOptions

    captured: dict[str, list[str]] = {}

    class Probe(Stack):
        def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> Any:
            captured[name] = args
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        Probe(StackOptions(norms_dir=tmp_path / "normas", log_dir=tmp_path))._start_search()
    args = captured["search"]
    assert args[args.index("--norms-dir") + 1] == str(tmp_path / "normas")
    serve = cli.parser().parse_args(["serve", "--norms-dir", str(tmp_path)])
    assert cli._settings(serve).norms_dir == tmp_path


async def test_the_workers_gateway_accepts_sources_of_any_norm_with_their_metadata(combined: Searcher) -> None:
    """The tool contract is unchanged: the worker's own gateway validates and keeps every field."""
    from agent.mcp.gateway import GatewayOptions, McpGateway
    from tests.search_server import SERVER_TOKEN, serving

    with serving(combined) as url:
        gw = McpGateway(GatewayOptions(url=f"{url}/mcp", token=SERVER_TOKEN))
        try:
            result = await gw.search({"query": "me robaron la bicicleta pública, tengo que pagarla"})
        finally:
            await gw.aclose()
    assert result.dropped == 0
    top = result.sources[0]
    assert top.citation == "Ley de prueba 7 de 2099, artículo 31"
    assert (top.date, top.gaceta) == ("2099-11-30", "99999-A")
    assert str(top.official_source_url).startswith("https://example.org/gaceta/")


def test_importing_over_a_corrupt_index_is_refused_and_leaves_it_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    index.index_path(data).write_bytes(b"not a database at all" * 100)
    before = _digest(index.index_path(data))
    with pytest.raises(index.IndexLoadError, match="unreadable"):
        import_norms(norm_jsonl(tmp_path / "x.jsonl", "Ley sintética X", ["Texto."]), data)
    assert _digest(index.index_path(data)) == before
    assert sorted(p.name for p in data.iterdir()) == [index.INDEX_FILE]


def test_top_positions_equal_a_full_stable_sort_ties_included() -> None:
    from panama_law.retrieve.search import top_positions

    rng = np.random.default_rng(3)
    for size in (5, 30, 31, 400):
        scores = rng.integers(0, 6, size=size).astype(np.float32)  # many ties
        assert top_positions(scores, 30) == [int(p) for p in np.argsort(-scores, kind="stable")[:30]]


def test_a_long_embedding_run_reports_progress(caplog: pytest.LogCaptureFixture) -> None:
    """An index build embeds thousands of passages for minutes; the operator sees it advance."""
    from panama_law import embedding

    texts = [f"artículo de prueba número {i}" for i in range(embedding.PROGRESS_MIN_TEXTS + 20)]
    with caplog.at_level(logging.INFO, logger="panama_law.embedding"):
        embedding.encode(texts)
        lines = [r.getMessage() for r in caplog.records if r.name == "panama_law.embedding"]
        assert len(lines) >= 5 and lines[-1].startswith("embedding: ") and "of 520 texts" in lines[-1]
        caplog.clear()
        embedding.encode(texts[:10])  # a query-sized encode says nothing
        assert not [r for r in caplog.records if r.name == "panama_law.embedding"]
