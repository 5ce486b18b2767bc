"""Reading norms from the files a team holds: article headings as published, Título/Capítulo context, PDFs with
print artefacts, the .jsonl format, and one clear refusal for each kind of bad input. No index is built here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from panama_law.ingest.pdftext import clean_lines, dehyphenate, pdf_lines
from panama_law.ingest.sources import ImportOptions, read_norms
from panama_law.ingest.splitter import split_articles
from panama_law.norms import NormError, parse_label
from tests.norm_fixtures import (
    LEY_NAME,
    LEY_TXT,
    RUNNING_FOOTER,
    RUNNING_HEADER,
    ley_pdf_bytes,
    scanned_pdf_bytes,
    write_jsonl,
)

HEADINGS = """
PREÁMBULO QUE NO ES ARTÍCULO
LIBRO PRIMERO
DE LAS PERSONAS
TÍTULO I - DISPOSICIONES DE EJEMPLO
Capítulo 1°: Del objeto
Artículo 1. Primero con punto.
Sigue en otra línea.
ARTÍCULO 2
Segundo en mayúsculas, texto en la línea siguiente.
Artículo 3°. Tercero con grado.
Artículo 5 de esta Ley es una referencia que abre la línea, no un encabezado.
Artículo 12-A. Doce con letra.
Artículo 12 bis. Doce bis.
Capítulo II
Del otro capítulo
Art. 13. Trece abreviado.
TÍTULO II
DE LOS CONTRATOS
DE ARRENDAMIENTO
Artículo 14: Catorce con dos puntos.
COMUNÍQUESE Y CÚMPLASE.
Dada en la ciudad de prueba.
"""


def test_article_headings_in_every_published_form_become_articles() -> None:
    articles = split_articles("Ley sintética 1", HEADINGS.splitlines())
    assert [a.label for a in articles] == ["1", "2", "3", "12-A", "12 bis", "13", "14"]
    by_label = {a.label: a for a in articles}
    assert by_label["1"].text == "Primero con punto. Sigue en otra línea."
    assert by_label["3"].text.endswith("Artículo 5 de esta Ley es una referencia que abre la línea, no un encabezado.")
    assert by_label["12 bis"].citation == "Ley sintética 1, artículo 12 bis"
    assert by_label["14"].text == "Catorce con dos puntos.", "the signature block after the last article is dropped"


def test_titulo_and_capitulo_headings_are_kept_as_each_articles_context() -> None:
    by_label = {a.label: a for a in split_articles("Ley sintética 1", HEADINGS.splitlines())}
    assert by_label["1"].headings == (
        "Libro PRIMERO. DE LAS PERSONAS",
        "Título I. DISPOSICIONES DE EJEMPLO",
        "Capítulo 1. Del objeto",
    )
    assert (
        by_label["13"].path
        == "Libro PRIMERO. DE LAS PERSONAS · Título I. DISPOSICIONES DE EJEMPLO · Capítulo II. Del otro capítulo"
    )
    # A new Título closes the Capítulo above it; a two-line capitalised name stays one heading.
    assert by_label["14"].headings == ("Libro PRIMERO. DE LAS PERSONAS", "Título II. DE LOS CONTRATOS DE ARRENDAMIENTO")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Un texto sin encabezados de artículo.\nNi uno solo.", "no articles found"),
        ("Artículo 1. Uno.\nArtículo 2. Dos.\nArtículo 1. Otra vez uno.", "artículo 1 appears twice"),
        ("Artículo 4-A. Uno.\nArtículo 4-A. Dos.", "artículo 4-A appears twice"),
    ],
)
def test_text_without_articles_or_with_a_repeated_number_is_refused(text: str, message: str) -> None:
    with pytest.raises(NormError, match=message):
        split_articles("Ley sintética 2", text.splitlines())


def test_the_test_law_reads_as_42_articles_with_its_structure() -> None:
    (norm,) = read_norms(LEY_TXT)
    assert norm.info.name == LEY_NAME, "the sidecar names it"
    assert (norm.info.date, norm.info.gaceta) == ("2099-11-30", "99999-A")
    assert len(norm.articles) == 42
    twelve_a = next(a for a in norm.articles if a.label == "12-A")
    assert twelve_a.path == "Título II. DE LOS HUERTOS COMUNITARIOS · Capítulo II. Derechos y deberes de los hortelanos"


def test_pdf_of_the_law_reads_exactly_like_its_text(tmp_path: Path) -> None:
    """Running header and footer, page numbers and hyphenation are all undone: same articles, same text."""
    data = ley_pdf_bytes()
    lines = pdf_lines(data)
    assert not any(RUNNING_HEADER in line or RUNNING_FOOTER in line for line in lines)
    assert not any(line.isdigit() for line in lines)
    from_pdf = split_articles(LEY_NAME, lines)
    from_txt = split_articles(LEY_NAME, LEY_TXT.read_text(encoding="utf-8").splitlines())
    assert from_pdf == from_txt
    pdf = tmp_path / "ley.pdf"
    pdf.write_bytes(data)
    (norm,) = read_norms(pdf, ImportOptions(norm="Ley de prueba en PDF", gaceta="1"))
    assert norm.info.kind == "pdf" and norm.info.gaceta == "1" and len(norm.articles) == 42


def test_running_matter_is_found_by_repetition_not_by_wording() -> None:
    pages = [
        f"Boletín X, edición {n}\nArtículo {n}. El artículo {n} dice algo que sigue en la\npágina {word}.\n- {n} -"
        for n, word in ((1, "uno"), (2, "dos"), (3, "tres"))
    ]
    assert clean_lines(pages) == [
        "Artículo 1. El artículo 1 dice algo que sigue en la",
        "página uno.",
        "Artículo 2. El artículo 2 dice algo que sigue en la",
        "página dos.",
        "Artículo 3. El artículo 3 dice algo que sigue en la",
        "página tres.",
    ]
    assert dehyphenate(["la disposi-", "ción final", "Artículo 12-", "A."]) == [
        "la disposición final",
        "Artículo 12-",
        "A.",
    ]


def test_scanned_or_broken_pdfs_are_refused_with_one_clear_line(tmp_path: Path) -> None:
    scanned = tmp_path / "escaneada.pdf"
    scanned.write_bytes(scanned_pdf_bytes())
    with pytest.raises(NormError, match="no text layer"):
        read_norms(scanned, ImportOptions(norm="Ley escaneada"))
    broken = tmp_path / "rota.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(NormError, match=r"unreadable|no pages"):
        read_norms(broken, ImportOptions(norm="Ley rota"))


def test_jsonl_gives_norms_with_their_articles_headings_and_metadata(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "estructurada.jsonl",
        [
            {"norm": "Ley sintética 3", "article": 1, "text": "Uno.", "headings": ["Título I"], "gaceta": "123"},
            {"norm": "Ley sintética 3", "article": "1-A", "text": "Uno A.", "date": "2020-02-03"},
            {"norm": "Decreto sintético 4", "article": "7 bis", "text": "Siete bis.", "url": "https://example.org/d4"},
        ],
    )
    ley, decreto = read_norms(path)
    assert [a.citation for a in ley.articles] == ["Ley sintética 3, artículo 1", "Ley sintética 3, artículo 1-A"]
    assert ley.articles[0].path == "Título I" and (ley.info.gaceta, ley.info.date) == ("123", "2020-02-03")
    assert decreto.articles[0].label == "7 bis" and decreto.info.url == "https://example.org/d4"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"norm": "L", "article": "1", "text": "a"}, {"norm": "L", "article": 1, "text": "b"}], "appears twice"),
        ([{"norm": "L", "article": "uno", "text": "a"}], "not like 12"),
        (
            [
                {"norm": "L", "article": "1", "text": "a", "date": "2020-01-01"},
                {"norm": "L", "article": "2", "text": "b", "date": "2021-01-01"},
            ],
            "disagrees",
        ),
        ([{"norm": "L", "article": "1", "text": "a"}, {"norm": "l", "article": "2", "text": "b"}], "collides"),
        ([{"norm": "L", "article": "1"}], "needs 'norm'"),
        ([{"norm": "L", "article": "1", "text": "a", "url": "javascript:alert(1)"}], "not an http"),
        ([{"norm": "L", "article": "1", "text": "a", "date": "30/11/2099"}], "YYYY-MM-DD"),
    ],
)
def test_bad_jsonl_is_refused_naming_the_problem(tmp_path: Path, rows: list[dict[str, object]], message: str) -> None:
    with pytest.raises(NormError, match=message):
        read_norms(write_jsonl(tmp_path / "mala.jsonl", rows))


def test_article_labels_parse_as_published() -> None:
    assert parse_label("12") == (12, "")
    assert parse_label("12-a") == (12, "-A")
    assert parse_label("12 BIS") == (12, " bis")
    assert parse_label("3°") == (3, "")


def test_unsupported_files_and_a_txt_named_like_the_constitution_are_refused(tmp_path: Path) -> None:
    doc = tmp_path / "ley.docx"
    doc.write_bytes(b"PK")
    with pytest.raises(NormError, match="unsupported file type"):
        read_norms(doc)
    constitution_json = tmp_path / "otra.json"
    constitution_json.write_text("{}", encoding="utf-8")
    with pytest.raises(NormError, match="read as the Constitution"):
        read_norms(constitution_json, ImportOptions(norm="Ley 6 de 2002"))


BENCH_LAWS = sorted((Path(__file__).resolve().parents[1] / "bench" / "eval" / "norms").glob("ley_de_prueba_*.txt"))


@pytest.mark.parametrize("law", BENCH_LAWS, ids=lambda p: p.stem)
def test_each_benchmark_law_imports_with_every_gold_article_and_gloss_in_it(law: Path) -> None:
    """The fictional laws that measure search across norms: a splitter change that loses an article would
    silently turn their questions into misses, so each must still read whole, with its questions' gold."""
    from panama_law.evaluate import load_items

    glosses = law.with_name(f"{law.stem}_glosses.jsonl")
    opts = ImportOptions(glosses=glosses) if glosses.is_file() else None
    (norm,) = read_norms(law, opts)
    keys = {a.key for a in norm.articles}
    assert len(keys) == len(norm.articles) >= 40
    items = load_items(law.with_name(f"{law.stem}_eval.jsonl"))
    assert len([item for item in items if item.gold]) >= 25  # later laws add out-of-scope questions (no gold)
    missing = sorted(g for item in items for g in item.gold_keys if g not in keys)
    assert missing == []
    if opts is not None:
        assert len(norm.glosses) >= len(norm.articles) * 0.8, "glosses for most articles"
