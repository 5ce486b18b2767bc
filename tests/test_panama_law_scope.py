"""Out-of-scope questions the retrieval signals cannot see: another country's law, and statutory detail (amounts,
days, percentages, the papers an errand needs) that the Constitution leaves to the law. Questions written for
these tests, not from any eval file."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from panama_law.retrieve.scope import (
    foreign_jurisdiction,
)
from panama_law.retrieve.search import SearchConfig, Searcher


@pytest.mark.parametrize(
    "question",
    [
        "en Colombia se puede votar a los dieciséis",
        "la ley colombiana permite casarse a los catorce?",
        "qué dice la constitución española sobre la monarquía",
        "en Texas puedo andar armado sin permiso",
        "el presidente de Venezuela se puede reelegir",
        "México todavía tiene pena de muerte",
        "la policía gringa puede entrar a mi casa sin orden",
        "cuántos senadores tiene Estados Unidos",
        "en Canadá a un turista lo pueden deportar por manejar borracho",  # opens abroad: their deportation
        "mi hijo se va pa Alemania a estudiar, allá la universidad es gratis",  # "allá": set where it goes
        "me dieron la visa gringa, puedo trabajar allá con ella",
        # "nos" is a pronoun ("nos vamos"), not a mention of Panama as "nuestro país" is
        "nos vamos a vivir a Toronto y dicen que allá las escuelas enseñan en francés a la fuerza, eso es legal",
    ],
)
def test_a_question_set_in_another_country_is_foreign(question: str) -> None:
    assert foreign_jurisdiction(question)


@pytest.mark.parametrize(
    "question",
    [
        "soy colombiano, puedo votar en Panamá",  # names Panama
        "soy de Nicaragua y me detuvieron sin orden",  # a person's origin
        "un venezolano puede trabajar de médico",  # a demonym naming a person
        "nací en Miami de madre panameña, soy panameño",  # a birth abroad
        "me quieren extraditar a Estados Unidos",  # an act of the Panamanian state
        "me van a deportar a Colombia por tener los papeles vencidos",
        "qué dice el tratado de neutralidad con Estados Unidos",
        "los gringos pueden comprar tierras cerca de la frontera",
        "el país tiene a Estados Unidos como aliado",  # a country that is not the question's subject
        "mi hijo nació en España y vive allá, puede ser panameño",  # "allá", but Panama is what is asked
        "allá en mi pueblo la policía entra a las casas sin orden",  # "allá" and no foreign place
        "en nuestro país un colombiano puede ser dueño de una finca",  # "nuestro" país is Panama
    ],
)
def test_a_question_about_foreigners_or_relations_in_panama_is_not_foreign(question: str) -> None:
    assert not foreign_jurisdiction(question)


def test_the_search_abstains_on_foreign_law_but_answers_foreigners_in_panama(searcher: Searcher) -> None:
    assert searcher.search("en Costa Rica la policía puede entrar a una casa sin orden de un juez") == []
    assert 9 in [h.article.number for h in searcher.search("soy colombiano y mi hijo nació en Panamá, es panameño?")]
    assert 177 in [h.article.number for h in searcher.search("cuántos años dura el periodo del presidente")]
    assert 179 in [h.article.number for h in searcher.search("a qué edad se puede llegar a ser presidente")]


@pytest.mark.parametrize(
    "question",
    [
        "el uscis me negó la ciudadanía, eso se puede apelar",
        "la registraduría me tiene la cédula cancelada",
        "me pararon los de la guardia civil y me pidieron el nie",
        "a mi primo en Maracaibo se lo llevó el sebin sin orden",  # a city from the list, then an institution
        "en Guayaquil pueden cerrar la calle por una fiesta",
    ],
)
def test_a_foreign_institution_or_city_sets_the_question_abroad(question: str) -> None:
    """Written from general knowledge by a writer who saw no question set (`data/FOREIGN_PLACES.md`); before, only
    countries, their capitals, US states and a dozen cities were known."""
    assert foreign_jurisdiction(question)


@pytest.mark.parametrize(
    "question",
    [
        "tengo green card y quiero saber si necesito visa para entrar a Panamá",  # names Panama
        "me van a deportar y el ice me tiene detenido",  # an act of the Panamanian state first
        "la caja de seguro social me negó la pensión",  # Panama's own institution
        "soy de Cali y me detuvieron sin orden",  # a person's origin
    ],
)
def test_a_foreign_institution_or_city_leaves_panamas_questions_in_scope(question: str) -> None:
    assert not foreign_jurisdiction(question)


def test_the_foreign_lists_leave_out_what_panama_shares() -> None:
    from panama_law.retrieve.gazetteer import INSTITUTIONS, PLACES

    for name in (
        "colon",
        "santiago",
        "david",
        "san jose",
        "la paz",
        "css",
        "caja de seguro social",
        "acodeco",
        "tribunal electoral",
        "miraflores",
        "migracion",
        "policia nacional",
        "fiscalia",
    ):
        assert name not in PLACES and name not in INSTITUTIONS, name
    assert {"uscis", "registraduria", "green card"} <= INSTITUTIONS and {"maracaibo", "montreal"} <= PLACES


# An invented bylaw of a condominium and its water board, written for these tests: it states its quantities in
# words and sets its charges by naming the rate that applies, as laws often do.
_BYLAW = [
    "Las obras que cambien la fachada requieren el voto favorable de las dos terceras partes de los propietarios.",
    "La asamblea sesiona válidamente con la mitad más uno de los socios al día en sus cuotas.",
    "El arrendador podrá exigir como garantía un mes de alquiler, que devolverá al terminar el contrato.",
    "El propietario que no pague a tiempo pagará un recargo de B/. 25.00 por cada mes de atraso.",
    "Las conexiones de uso comercial pagan la tarifa comercial; las demás pagan la tarifa residencial.",
    "Cada usuario aporta la cuota mensual que apruebe la junta en su reunión de enero.",
    "La junta podrá cortar el servicio al usuario que no haya asistido a tres reuniones seguidas.",
    "Los perros de los residentes circularán por las áreas comunes con correa y bozal si son de raza peligrosa.",
]


@pytest.fixture(scope="module")
def bylaw(tmp_path_factory: pytest.TempPathFactory) -> Searcher:
    """The bylaw imported as a team imports its own law, alone and without glosses, searched with every abstain rule
    on but the evidence cut off: eight sentences give BM25 too few documents for the evidence model, calibrated on
    whole norms, to be what these tests are about."""
    from panama_law.index import disk as index
    from panama_law.index.build import import_norms
    from tests.norm_fixtures import norm_jsonl

    folder = tmp_path_factory.mktemp("bylaw")
    data = folder / "data"
    data.mkdir()
    import_norms(norm_jsonl(folder / "bylaw.jsonl", "Reglamento de prueba 1 de 2090", _BYLAW), data)
    return Searcher(index.load(data), replace(SearchConfig(), abstain_below=-math.inf))


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("cuántos propietarios tienen que estar de acuerdo para pintar la fachada de otro color", 1),
        ("cuánta gente tiene que venir a la asamblea para que valga lo que se decide", 2),
        ("cuántos días de alquiler me pueden pedir de garantía", 3),  # asked in days, stated as "un mes"
        ("si me atraso con la mensualidad cuánto me cobran", 4),
        ("cuánto me cobran por el agua si tengo una fonda en la casa", 5),  # which rate applies is the answer
        ("cuánto me toca pagar de cuota del agua cada mes", 6),  # who sets it is the answer
    ],
)
def test_a_how_much_question_is_answered_by_an_article_stating_it_in_words_or_by_a_rule(
    bylaw: Searcher, question: str, article: int
) -> None:
    """A law states quantities in words ("dos terceras partes", "la mitad", "un mes") and answers "¿cuánto me
    cobran?" with the rate that applies rather than a figure. A rule that refused a how-much question unless one of
    the articles to be shown stated a figure of the asked unit refused such answerable questions on laws written
    after it, so the search answers them: the article comes back among the sources."""
    assert article in [h.article.number for h in bylaw.search(question)]
