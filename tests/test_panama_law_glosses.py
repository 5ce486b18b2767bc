"""Callers' glosses: shipped for the Constitution, importable with a team's .jsonl, searched, never shown.

A gloss only ever changes which articles rank where; what a source carries is the article's own text. An index
written before glosses existed gets the Constitution's at the next start without re-embedding any article.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from panama_law import __main__ as cli
from panama_law.evaluate import evaluate, load_items
from panama_law.index import disk as index
from panama_law.index import store
from panama_law.index.build import ensure_index, import_folder
from panama_law.ingest import corpus, glosses
from panama_law.ingest.sources import ImportOptions, read_norms
from panama_law.norms import NormError
from panama_law.retrieve.search import Searcher
from panama_law.settings import SOURCE_SHA256, ServerSettings
from tests.norm_fixtures import LEY_NAME, LEY_TXT, write_jsonl

DEV_EXTRA = Path(__file__).resolve().parents[1] / "bench" / "eval" / "dev_extra.jsonl"


def _packaged_rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in glosses.PACKAGED.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_packaged_glosses_cover_every_article_of_the_constitution_within_the_import_limits() -> None:
    rows = _packaged_rows()
    assert [r["article"] for r in rows] == list(range(1, 329))
    for row in rows:
        texts = row["glosses"]
        assert isinstance(texts, list) and 4 <= len(texts) <= glosses.MAX_GLOSSES, row["article"]  # two rounds
        assert len(set(texts)) == len(texts), row["article"]
        glosses.check(texts, f"article {row['article']}")  # the same limits a team's file meets
        assert all(t == t.lower() for t in texts), row["article"]


def test_the_constitution_is_indexed_with_its_glosses_on_the_right_articles(built_dir: Path) -> None:
    loaded = index.load(built_dir)
    expected = {int(str(r["article"])): list(r["glosses"]) for r in _packaged_rows()}  # type: ignore[call-overload]
    got: dict[int, list[str]] = {}
    for gloss in loaded.glosses:
        got.setdefault(loaded.articles[gloss.article].number, []).append(gloss.text)
    assert got == expected
    assert loaded.gloss_vectors.shape == (len(loaded.glosses), loaded.article_vectors.shape[1])
    assert np.allclose(np.linalg.norm(loaded.gloss_vectors, axis=1), 1.0, atol=1e-4)


def test_a_gloss_ranks_its_article_but_is_never_the_excerpt(searcher: Searcher) -> None:
    """Asked in a gloss's own words, the search must still answer with the article's text, never the gloss."""
    shown = 0
    for gloss in searcher.index.glosses[::9]:
        for hit in searcher.search(gloss.text):
            shown += 1
            excerpt = hit.excerpt.removeprefix("… ").removesuffix(" …").removesuffix("…")
            assert excerpt in hit.article.text, gloss.text
            assert gloss.text not in hit.excerpt
    assert shown > 50


def test_glosses_find_articles_that_callers_words_alone_miss(searcher: Searcher, built_dir: Path) -> None:
    """The same index with its glosses taken out ranks the development questions worse: glosses are used."""
    loaded = searcher.index
    bare = dataclasses.replace(
        loaded, glosses=[], gloss_vectors=np.zeros((0, loaded.article_vectors.shape[1]), np.float32)
    )
    items = load_items(DEV_EXTRA)
    with_glosses = evaluate(searcher, items)
    without = evaluate(Searcher(bare, searcher.config), items)
    assert with_glosses["recall_at_3"] > without["recall_at_3"]
    assert with_glosses["mrr_at_10"] > without["mrr_at_10"]


def _drop_glosses(path: Path) -> None:
    """What an index written before glosses existed looks like: no table, no gloss vectors."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("DROP TABLE glosses")
        db.execute("DELETE FROM vectors WHERE name = 'glosses'")
        db.commit()


def test_an_index_from_before_glosses_gets_them_at_start_without_reembedding_articles(
    tmp_path: Path, built_dir: Path
) -> None:
    shutil.copy(index.index_path(built_dir), index.index_path(tmp_path))
    _drop_glosses(index.index_path(tmp_path))
    before = index.load(tmp_path)
    assert before.glosses == []

    ensure_index(ServerSettings(data_dir=tmp_path))
    after = index.load(tmp_path)
    assert [g.text for g in after.glosses] == [g.text for g in index.load(built_dir).glosses]
    assert np.array_equal(after.article_vectors, before.article_vectors)
    assert np.array_equal(after.passage_vectors, before.passage_vectors)

    stamp = index.index_path(tmp_path).stat().st_mtime_ns
    ensure_index(ServerSettings(data_dir=tmp_path))  # already current: the file is not rewritten
    assert index.index_path(tmp_path).stat().st_mtime_ns == stamp


def test_a_refresh_that_outruns_a_shorter_reimport_says_which_glosses_it_left_out(
    tmp_path: Path, built_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Articles read, then the norm re-imported with fewer of them before the glosses are written: the glosses of
    # articles it no longer has cannot be stored, and the operator is told instead of finding them gone.
    shutil.copy(index.index_path(built_dir), index.index_path(tmp_path))
    glossed = {0: ("que tipo de pais es panama",), 400: ("un articulo que esta edicion ya no tiene",)}
    with caplog.at_level("WARNING", logger="panama_law.index.store"):
        assert store.refresh_glosses(tmp_path, corpus.DOCUMENT_NAME, glossed)
    assert "without 1 articles' glosses" in caplog.text
    assert index.norm_glosses(tmp_path, corpus.DOCUMENT_NAME) == {0: glossed[0]}


def _rows(glossed: list[str] | None) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [
        {"norm": "Ley de glosas 1 de 2099", "article": "1", "text": "Los vecinos podrán pedir la poda del arbolado."},
        {"norm": "Ley de glosas 1 de 2099", "article": "2", "text": "La poda se hará en la estación seca."},
    ]
    if glossed is not None:
        rows[1]["glosses"] = glossed
    return rows


def test_a_teams_jsonl_carries_glosses_that_are_stored_replaced_and_removed_with_their_norm(
    tmp_path: Path, built_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "index"
    data_dir.mkdir()
    shutil.copy(index.index_path(built_dir), index.index_path(data_dir))
    path = write_jsonl(tmp_path / "ley.jsonl", _rows(["cuando cortan las ramas de los palos de la calle"]))
    parsed = read_norms(path, ImportOptions(expected_sha256=None))
    assert parsed[0].glosses == {1: ("cuando cortan las ramas de los palos de la calle",)}
    store.put_norms(data_dir, parsed)
    assert index.norm_glosses(data_dir, "Ley de glosas 1 de 2099") == parsed[0].glosses
    cli.main(["norms", "--data-dir", str(data_dir)])
    listed = capsys.readouterr().out.splitlines()
    assert "Ley de glosas 1 de 2099\t2 articles, 1 glosses\tjsonl" in listed
    shipped = sum(len(list(r["glosses"])) for r in _packaged_rows())  # type: ignore[call-overload]
    assert f"{corpus.DOCUMENT_NAME}\t328 articles, {shipped} glosses\tconstitution" in listed
    assert store.is_current(data_dir, parsed[0].info, parsed[0].glosses)

    changed = read_norms(
        write_jsonl(path, _rows(["en que epoca del año podan los arboles del barrio"])), ImportOptions()
    )
    assert changed[0].info.source_sha256 != parsed[0].info.source_sha256
    assert not store.is_current(data_dir, parsed[0].info, changed[0].glosses)  # same text, other glosses: re-import
    store.put_norms(data_dir, changed)
    loaded = index.load(data_dir)
    law = [g.text for g in loaded.glosses if loaded.articles[g.article].norm == "Ley de glosas 1 de 2099"]
    assert law == ["en que epoca del año podan los arboles del barrio"]

    constitution_glosses = len(index.load(built_dir).glosses)
    store.remove_norm(data_dir, "Ley de glosas 1 de 2099")
    assert len(index.load(data_dir).glosses) == constitution_glosses
    with contextlib.closing(sqlite3.connect(index.index_path(data_dir))) as db:
        (orphans,) = db.execute(
            "SELECT COUNT(*) FROM glosses WHERE article NOT IN (SELECT id FROM articles)"
        ).fetchone()
    assert orphans == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("una sola cadena", "must be a list of non-empty strings"),
        (["bien", ""], "must be a list of non-empty strings"),
        ([f"glosa {i}" for i in range(glosses.MAX_GLOSSES + 1)], f"at most {glosses.MAX_GLOSSES} glosses"),
        (["x" * (glosses.MAX_GLOSS_CHARS + 1)], f"at most {glosses.MAX_GLOSS_CHARS} characters"),
    ],
)
def test_bad_glosses_are_refused_naming_the_line(tmp_path: Path, value: object, message: str) -> None:
    rows = _rows(None)
    rows[1]["glosses"] = value
    with pytest.raises(NormError, match=rf"ley\.jsonl:2: .*{message}"):
        read_norms(write_jsonl(tmp_path / "ley.jsonl", rows), ImportOptions(expected_sha256=None))


def test_the_constitution_json_brings_its_glosses_with_it(constitution_path: Path) -> None:
    (parsed,) = read_norms(constitution_path, ImportOptions(expected_sha256=SOURCE_SHA256))
    assert len(parsed.glosses) == 328
    assert parsed.glosses[0] == tuple(_packaged_rows()[0]["glosses"])  # type: ignore[arg-type]


def test_an_index_the_server_cannot_write_is_served_without_glosses_rather_than_not_at_all(
    tmp_path: Path, built_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(index.index_path(built_dir), index.index_path(tmp_path))
    _drop_glosses(index.index_path(tmp_path))
    before = index.index_path(tmp_path).read_bytes()

    def read_only(*_args: object, **_kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(store.tempfile, "mkstemp", read_only)  # the copy-and-swap write starts here
    ensure_index(ServerSettings(data_dir=tmp_path))
    assert index.index_path(tmp_path).read_bytes() == before
    assert index.load(tmp_path).glosses == []
    assert "serving it without them" in caplog.text


def _glosses_file(path: Path, rows: dict[str, list[str]]) -> Path:
    return write_jsonl(path, [{"article": k, "glosses": v} for k, v in rows.items()])


def test_a_glosses_file_gives_a_published_law_its_glosses_by_article_label(tmp_path: Path) -> None:
    given = {"1": ["para que sirve esta ley de los huertos"], "12-a": ["me dieron una parcela y la quiero cambiar"]}
    source = _glosses_file(tmp_path / "mis_glosas.jsonl", given)
    (parsed,) = read_norms(LEY_TXT, ImportOptions(norm=LEY_NAME, expected_sha256=None, glosses=source))
    by_label = {parsed.articles[pos].label: list(texts) for pos, texts in parsed.glosses.items()}
    assert by_label == {"1": given["1"], "12-A": given["12-a"]}  # "12-a" and "12-A" name one article


def test_a_glosses_file_beside_a_law_in_the_norms_folder_is_its_glosses_not_another_norm(
    tmp_path: Path, built_dir: Path
) -> None:
    folder, data_dir = tmp_path / "normas", tmp_path / "index"
    folder.mkdir()
    data_dir.mkdir()
    shutil.copy(index.index_path(built_dir), index.index_path(data_dir))
    shutil.copy(LEY_TXT, folder / LEY_TXT.name)
    shutil.copy(LEY_TXT.with_name("ley_de_prueba.meta.json"), folder / "ley_de_prueba.meta.json")
    _glosses_file(folder / "ley_de_prueba.glosses.jsonl", {"3": ["a quien me quejo si el huerto esta abandonado"]})
    outcomes = import_folder(folder, data_dir)
    assert [(o.file, o.norms, o.error) for o in outcomes] == [(LEY_TXT.name, (LEY_NAME,), None)]
    assert list(index.norm_glosses(data_dir, LEY_NAME).values()) == [("a quien me quejo si el huerto esta abandonado",)]
    assert import_folder(folder, data_dir)[0].unchanged
    _glosses_file(folder / "ley_de_prueba.glosses.jsonl", {"3": ["otra forma de decirlo para el mismo articulo"]})
    assert not import_folder(folder, data_dir)[0].unchanged  # new glosses, same law: imported again


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"999": ["no hay tal articulo en esta ley"]}, "glosses for articles the norm does not have: 999"),
        ({"siete": ["un numero escrito en letras"]}, "is not like 12, 12-A or 12 bis"),
    ],
)
def test_a_glosses_file_that_does_not_fit_the_law_is_refused_naming_it(
    tmp_path: Path, rows: dict[str, list[str]], message: str
) -> None:
    source = _glosses_file(tmp_path / "glosas.jsonl", rows)
    with pytest.raises(NormError, match=message):
        read_norms(LEY_TXT, ImportOptions(norm=LEY_NAME, expected_sha256=None, glosses=source))


def test_one_glosses_file_cannot_serve_a_file_of_several_norms(tmp_path: Path) -> None:
    rows = [{"norm": f"Ley {n} de 2099", "article": "1", "text": "Texto del artículo."} for n in (1, 2)]
    source = _glosses_file(tmp_path / "glosas.jsonl", {"1": ["una glosa para el primer articulo"]})
    with pytest.raises(NormError, match=r"holds 2 norms; give their glosses on the \.jsonl lines"):
        read_norms(write_jsonl(tmp_path / "dos.jsonl", rows), ImportOptions(expected_sha256=None, glosses=source))
