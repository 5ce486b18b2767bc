"""A team's own norms without glosses: the everyday-law lexicon that bridges callers' words to a code's, the
reproducible fit of the fusion weights such norms get, and the worksheet for writing a norm's glosses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from panama_law import __main__ as cli
from panama_law.index import disk as index
from panama_law.index.build import import_norms
from panama_law.retrieve.search import Searcher
from tests.norm_fixtures import norm_jsonl, write_jsonl

# Original sentences in the style of a code, and callers' questions that share no word with them.
_EVERYDAY_LAW = "Ley sintética de la vida diaria"
_EVERYDAY_PAIRS = [
    (
        "El arrendador devolverá al arrendatario el depósito de garantía dentro de los treinta días siguientes a la"
        " entrega del inmueble, descontando solo los daños comprobados.",
        "el casero no me quiere regresar la plata que le deje cuando me mude",
    ),
    (
        "El empleador que despida sin causa justificada pagará una indemnización equivalente a una semana de salario"
        " por cada año de servicios.",
        "me botaron sin explicacion despues de cinco años, me toca algo",
    ),
    (
        "Quien mantenga animales domésticos deberá impedir que sus ladridos u otros ruidos perturben el descanso"
        " nocturno de los vecinos colindantes.",
        "el perro de al lado no deja dormir a nadie",
    ),
]


def test_the_everyday_lexicon_takes_callers_words_to_an_imported_codes_words(
    tmp_path: Path, built_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's law speaks of "arrendador" and "depósito de garantía"; the caller says "el casero" and "la plata que
    le dejé". The Constitution's table cannot bridge that (its terms are the Constitution's), the everyday table
    (`lexicon.EVERYDAY`) does: each question below shares no term with its article, and its article must come first
    among the law's articles in the lexical ranking. Without the everyday table, the first and last are not reached
    by the lexical rankings at all. The Constitution has glosses, so its scores never see the everyday terms."""
    from panama_law.retrieve import query
    from panama_law.retrieve.lexicon import Lexicon
    from panama_law.text import terms

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(index.index_path(built_dir), index.index_path(data))
    distractors = [
        "Las juntas de usuarios del acueducto rural elegirán a su directiva cada dos años.",
        "Los establecimientos de expendio de alimentos exhibirán su permiso sanitario vigente.",
    ]
    import_norms(norm_jsonl(tmp_path / "law.jsonl", _EVERYDAY_LAW, [a for a, _ in _EVERYDAY_PAIRS] + distractors), data)
    searcher = Searcher(index.load(data))

    def law_first(question: str) -> list[str]:
        sig = searcher.signals(question)[0]
        ranked = [searcher.articles[p] for p in sig.rankings["lex_article"]]
        return [a.label for a in ranked if a.norm == _EVERYDAY_LAW]

    glossed = searcher.glossed[[p.article for p in searcher.index.passages]]  # the Constitution's passages
    assert glossed.any() and not glossed.all()
    with_table = {}
    for number, (article, question) in enumerate(_EVERYDAY_PAIRS, 1):
        assert not set(terms(question)) & set(terms(article)), question
        assert law_first(question)[:1] == [str(number)], question
        with_table[question] = searcher.signals(question)[2]

    monkeypatch.setattr(query, "EVERYDAY", Lexicon({}))
    assert law_first(_EVERYDAY_PAIRS[0][1]) == []
    assert law_first(_EVERYDAY_PAIRS[2][1]) == []
    for question, lex_passages in with_table.items():
        np.testing.assert_array_equal(searcher.signals(question)[2][glossed], lex_passages[glossed])


def test_fit_unglossed_counts_each_law_with_weights_chosen_on_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """Law X's answers are found by article embeddings alone, law Y's by passage BM25 alone. On both laws the
    article embeddings win (two questions to one), but held out, each law is scored with what the other prefers,
    so the leave-one-law-out count is 0: the fit must report that, not the in-sample 2."""
    from panama_law.retrieve.search import SearchConfig, Signals
    from research.search import fit_unglossed as fu

    monkeypatch.setattr(
        fu,
        "GRID",
        {"lex_passage": (0.0, 1.0), "lex_article": (0.0,), "dense_passage": (0.0,), "dense_article": (0.0, 1.0)},
    )
    keys = [f"a{i}" for i in range(8)]
    unglossed = np.zeros(8, dtype=bool)
    # With both rankings on, the articles both rank (1-3) crowd the answer out of the first three.
    by_dense = Signals(rankings={"lex_passage": [1, 2, 3, 4], "dense_article": [5, 1, 2, 3]})
    by_lex = Signals(rankings={"lex_passage": [6, 1, 2, 3], "dense_article": [1, 2, 3, 4]})
    law_x = fu.LawRun("x", unglossed, keys, ([by_dense, by_dense], [frozenset({"a5"})] * 2), ([], []))
    law_y = fu.LawRun("y", unglossed, keys, ([by_lex], [frozenset({"a6"})]), ([], []))
    report = fu.fit_unglossed([law_x, law_y], SearchConfig())
    assert report["chosen"] == {"lex_passage": 0.0, "lex_article": 0.0, "dense_passage": 0.0, "dense_article": 1.0}
    assert report["chosen_in_sample"]["law_hits"] == 2
    assert [f["held_out_hits"] for f in report["folds"]] == [0, 0]
    assert report["folds"][0]["chosen"]["lex_passage"] == 1.0  # chosen on law y alone


def test_cli_glosses_worksheet_round_trips_through_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`glosses NAME` prints the form `import --glosses` reads, one line per article with its label, headings and
    text; filled in and imported again, the norm holds those glosses and the next worksheet shows them."""
    data = str(tmp_path / "data")
    law = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {"norm": "Ley sintética 8", "article": "1", "text": "Los faroles sintéticos se encienden al anochecer."},
            {"norm": "Ley sintética 8", "article": "1-A", "text": "Los faroles apagados se reportan al municipio."},
        ],
    )
    assert cli.main(["import", str(law), "--data-dir", data]) == 0
    capsys.readouterr()
    assert cli.main(["glosses", "Ley sintética 8", "--data-dir", data]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["article"], r["text"], r["glosses"]) for r in rows] == [
        ("1", "Los faroles sintéticos se encienden al anochecer.", []),
        ("1-A", "Los faroles apagados se reportan al municipio.", []),
    ]
    rows[1]["glosses"] = ["la lampara de la calle lleva una semana sin prender a quien le aviso"]
    sheet = write_jsonl(tmp_path / "sheet.jsonl", rows)
    assert cli.main(["import", str(law), "--glosses", str(sheet), "--data-dir", data]) == 0
    assert cli.main(["norms", "--data-dir", data]) == 0
    assert "2 articles, 1 glosses" in capsys.readouterr().out
    assert cli.main(["glosses", "Ley sintética 8", "--data-dir", data]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert again == rows

    assert cli.main(["glosses", "Ley que no existe", "--data-dir", data]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no norm named") and err.count("\n") == 1
