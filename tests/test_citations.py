"""The citation check: which articles the agent's spoken Spanish names, with which norm, and whether the sources
delivered in the conversation hold them (agent/voice/citations.py)."""

from __future__ import annotations

import unicodedata

import pytest

from agent.voice.citations import CONSTITUTION, CitationCheck, find_citations, norm_key, source_key

CONSTITUTION_74 = "Constitución Política de la República de Panamá, artículo 74"
LAW_6_12A = "Ley 6 de 2002, artículo 12-A"
LAW_6_3 = "Ley 6 de 2002, artículo 3"
LABOUR_CODE_12 = "Código de Trabajo, artículo 12"


def _keys(text: str) -> list[tuple[str | None, str]]:
    return [(c.norm, c.article) for c in find_citations(text)]


def _check(text: str, *sources: str) -> list[tuple[str, bool]]:
    check = CitationCheck()
    check.deliver("call-1", sources)
    return [(c.citation.article, c.verified) for c in check.check(text)]


# -- reading numbers as the agent says them ---------------------------------------------------------------


def test_citation_in_cardinal_words_is_read_as_digits() -> None:
    assert _keys("Según el artículo setenta y cuatro de la Constitución, el salario se revisa.") == [
        (CONSTITUTION, "74")
    ]
    assert _keys("El artículo ciento veinte lo dice.") == [(None, "120")]


def test_citation_of_article_one_and_two_in_words() -> None:
    """text2num leaves numbers under its threshold in words by default; articles one and two are common."""
    assert _keys("El artículo uno y el artículo dos de la Constitución.") == [(CONSTITUTION, "1"), (CONSTITUTION, "2")]


@pytest.mark.parametrize(
    ("said", "article"),
    [
        ("el artículo primero de la Constitución", "1"),
        ("el artículo segundo de la Constitución", "2"),
        ("el artículo décimo tercero de la Constitución", "13"),
        ("el artículo sétimo de la Constitución", "7"),
        ("el artículo 1.º de la Constitución", "1"),
    ],
)
def test_citation_by_ordinal_word_or_mark(said: str, article: str) -> None:
    assert _keys(said) == [(CONSTITUTION, article)]


@pytest.mark.parametrize(
    ("said", "article"),
    [
        ("el artículo doce A de la Ley 6 de 2002", "12-A"),
        ("el artículo 12-A de la Ley 6 de 2002", "12-A"),
        ("el artículo doce-A de la Ley 6 de 2002", "12-A"),
        ("el artículo 12 bis de la Ley 6 de 2002", "12 bis"),
        ("el artículo 12 b, de la Ley 6 de 2002", "12-B"),
        ("el artículo doce be de la Ley 6 de 2002", "12-B"),
        ("el artículo 12 ce de la Ley 6 de 2002", "12-C"),
        ("el artículo doce-be de la Ley 6 de 2002", "12-B"),
        ("el artículo doce ter de la Ley 6 de 2002", "12 ter"),
    ],
)
def test_citation_with_letter_or_latin_suffix(said: str, article: str) -> None:
    assert _keys(said) == [("ley 6 de 2002", article)]


def test_citation_suffix_letter_by_name_keeps_its_norm_and_verifies() -> None:
    assert _check("Según el artículo doce be de la Ley 6 de 2002, procede.", "Ley 6 de 2002, artículo 12-B") == [
        ("12-B", True)
    ]
    assert _check("Los artículos 12 be y 12 ce de la Ley 6 de 2002.", "Ley 6 de 2002, artículo 12-B") == [
        ("12-B", True),
        ("12-C", False),
    ]


@pytest.mark.parametrize(
    "said",
    [
        "el artículo doce de la Ley 6 de 2002",  # "de" is the preposition, never the letter D
        "el artículo doce te protege, según la Ley 6 de 2002",
        "el artículo doce e incluso la Ley 6 de 2002",
    ],
)
def test_citation_letter_names_that_are_words_are_no_suffix(said: str) -> None:
    assert [c.article for c in find_citations(said)] == ["12"]


def test_citation_letter_a_that_is_a_preposition_is_no_suffix() -> None:
    assert _keys("El artículo 12 a los trabajadores les concede vacaciones.") == [(None, "12")]


# -- what was said, in the agent's own words ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Según el artículo 74 de la Constitución, sí.", "artículo 74 de la Constitución"),
        ("Según el artículo setenta y cuatro de la Constitución, sí.", "artículo setenta y cuatro de la Constitución"),
        ("Lo dice el artículo décimo tercero de la Constitución.", "artículo décimo tercero de la Constitución"),
        ("Lo dice el Artículo 1.º de la Constitución.", "Artículo 1.º de la Constitución"),
        ("Véase el artículo doce-A de la Ley 6 de 2002.", "artículo doce-A de la Ley 6 de 2002"),
        ("Véase el artículo 12 bis de la ley seis de dos mil dos.", "artículo 12 bis de la ley seis de dos mil dos"),
        ("La ley seis de dos mil dos, artículo tres, lo dice.", "ley seis de dos mil dos, artículo tres"),
        ("Eso lo protege el setenta y cuatro constitucional.", "setenta y cuatro constitucional"),
        ("Eso lo dice el  74   de la   Constitución.", "74   de la   Constitución"),
    ],
)
def test_citation_said_is_the_words_of_the_text(text: str, said: str) -> None:
    """The page finds `said` in the transcript, so it is the text's own substring: case, accents, number words."""
    [citation] = find_citations(text)
    assert citation.said == said
    assert citation.said in text


def test_citation_said_of_a_list_is_the_whole_list_as_said() -> None:
    text = "Los artículos tres, cuatro y cinco de la Constitución lo regulan."
    assert {c.said for c in find_citations(text)} == {"artículos tres, cuatro y cinco de la Constitución"}


def test_citation_said_survives_decomposed_accents() -> None:
    text = unicodedata.normalize("NFD", "El artículo veintidós de la Constitución.")
    [citation] = find_citations(text)
    assert (citation.norm, citation.article) == (CONSTITUTION, "22")
    assert citation.said in text and citation.said.startswith("arti")


# -- forms of a citation ----------------------------------------------------------------------------------


def test_citation_bare_number_with_its_norm_after_it() -> None:
    assert _keys("Eso lo dice el 74 de la Constitución.") == [(CONSTITUTION, "74")]
    assert _keys("Eso lo protege el setenta y cuatro constitucional.") == [(CONSTITUTION, "74")]


def test_citation_list_shares_the_norm_named_after_it() -> None:
    assert _keys("Los artículos 3 y 4 de la Ley 6 de 2002 lo regulan.") == [
        ("ley 6 de 2002", "3"),
        ("ley 6 de 2002", "4"),
    ]
    assert _keys("Los artículos tres, cuatro y cinco de la Constitución.") == [
        (CONSTITUTION, "3"),
        (CONSTITUTION, "4"),
        (CONSTITUTION, "5"),
    ]


def test_citation_range_cites_every_article_in_it() -> None:
    """A lawyer saying "del artículo 10 al 12" means 10, 11 and 12, so the one between is claimed too."""
    assert _keys("Del artículo 10 al 12 del Código de Trabajo.") == [
        ("codigo de trabajo", "10"),
        ("codigo de trabajo", "11"),
        ("codigo de trabajo", "12"),
    ]
    assert [a for _, a in _keys("Los artículos doce al quince del Código Civil.")] == ["12", "13", "14", "15"]
    assert [a for _, a in _keys("Los artículos 3 a 5 de la Ley 6 de 2002.")] == ["3", "4", "5"]


def test_citation_long_range_cites_its_two_ends() -> None:
    assert _keys("Del artículo 10 al 240 del Código de Trabajo.") == [
        ("codigo de trabajo", "10"),
        ("codigo de trabajo", "240"),
    ]


def test_citation_range_between_lettered_articles_cites_its_ends() -> None:
    assert [a for _, a in _keys("Del artículo 12-A al 14 de la Ley 6 de 2002.")] == ["12-A", "14"]


def test_citation_range_said_is_the_whole_range() -> None:
    cited = find_citations("Del artículo 10 al 12 del Código de Trabajo.")
    assert {c.said for c in cited} == {"artículo 10 al 12 del Código de Trabajo"}


def test_citation_of_a_numeral_or_inciso_is_the_article() -> None:
    assert _keys("El numeral 2 del artículo 40 de la Constitución.") == [(CONSTITUTION, "40")]
    assert _keys("El artículo 40, inciso b, de la Constitución.") == [(CONSTITUTION, "40")]
    assert _keys("El artículo 5, segundo párrafo, de la Ley 6 de 2002.") == [("ley 6 de 2002", "5")]


@pytest.mark.parametrize(
    "said",
    [
        "la ley seis de dos mil dos, artículo tres",
        "la Ley 6 de 2002, en su artículo 3",
        "el artículo 3 de la Ley número 6 del 2002",
        "el artículo 3 de la Ley 6 de 22 de enero de 2002",
    ],
)
def test_citation_of_a_numbered_law_keys_number_and_year(said: str) -> None:
    assert _keys(said) == [("ley 6 de 2002", "3")]


def test_citation_of_a_law_without_year() -> None:
    assert _keys("La Ley N.° 6, en su artículo 12-A, lo regula.") == [("ley 6", "12-A")]


@pytest.mark.parametrize(
    "said",
    ["el artículo 12 del Código de Trabajo", "el Código de Trabajo, artículo 12", "el artículo 12 del código laboral"],
)
def test_citation_of_a_code_keys_its_name(said: str) -> None:
    assert _keys(said) == [("codigo de trabajo", "12")]


def test_citation_of_the_carta_magna_is_the_constitution() -> None:
    assert _keys("Según la carta magna, en su artículo 17, el Estado protege la vida.") == [(CONSTITUTION, "17")]


def test_citation_of_a_company_constitution_is_no_norm() -> None:
    assert _keys("La constitución de una sociedad anónima sigue el artículo 5.") == [(None, "5")]


# -- which norm goes with which article ------------------------------------------------------------------


def test_citation_takes_the_norm_linked_after_before_one_named_earlier() -> None:
    assert _keys("Según la Ley 6 de 2002 y el artículo 74 de la Constitución, sí.") == [(CONSTITUTION, "74")]


def test_citation_lists_of_norm_and_article_do_not_cross() -> None:
    said = "Ley 6 de 2002, artículo 3; Ley 7 de 2003, artículo 4."
    assert _keys(said) == [("ley 6 de 2002", "3"), ("ley 7 de 2003", "4")]


def test_citation_takes_the_norm_named_earlier_in_the_answer() -> None:
    assert _keys("La Ley 6 de 2002 regula el acceso. El artículo 3 dice que es público.") == [("ley 6 de 2002", "3")]


def test_citation_de_la_misma_ley_refers_to_the_last_norm() -> None:
    assert _keys("El artículo 3 de la Ley 6 de 2002 y el artículo 99 de la misma ley.") == [
        ("ley 6 de 2002", "3"),
        ("ley 6 de 2002", "99"),
    ]


@pytest.mark.parametrize(
    "reference",
    ["del mismo código le", "de dicho código, le", "de este código le", "de la misma ley le", "de esa ley le",
     "de la citada ley le", "del mismo código fija que le"],
)  # fmt: skip
def test_citation_referring_to_the_norm_named_last_whatever_follows(reference: str) -> None:
    text = f"El artículo 1700 del Código Civil dice algo. El artículo 1701 {reference} da la razón."
    [_, second] = find_citations(text)
    assert (second.norm, second.article) == ("codigo civil", "1701")
    assert second.said in text and second.said.startswith("artículo 1701 de")


def test_citation_mismo_codigo_in_a_later_line_refers_to_the_code_of_an_earlier_line() -> None:
    check = CitationCheck()
    check.deliver("call-1", ["Código Civil, artículo 1701"])
    check.check("El artículo 1700 del Código Civil regula la prescripción.")
    [checked] = check.check("Y el artículo 1701 del mismo código le da un plazo.")
    assert (checked.citation.norm, checked.verified) == ("codigo civil", True)
    # the reference named no new code: a later "de la misma norma" still means the Código Civil
    [after] = check.check("El artículo 1702 de la misma norma lo completa.")
    assert after.citation.norm == "codigo civil"


def test_citation_referring_word_before_a_code_with_its_name_names_that_code() -> None:
    text = "El artículo 12 del Código de Trabajo y el artículo 13 de dicho Código de Comercio."
    assert _keys(text) == [("codigo de trabajo", "12"), ("codigo de comercio", "13")]


def test_citation_de_la_misma_ley_refers_to_a_norm_of_an_earlier_line() -> None:
    check = CitationCheck()
    check.check("La Ley 6 de 2002 trata del acceso a la información.")
    assert [(c.citation.norm, c.citation.article) for c in check.check("El artículo 9 de la misma ley.")] == [
        ("ley 6 de 2002", "9")
    ]


def test_citation_de_esta_manera_is_no_norm() -> None:
    assert _keys("Se aplica el artículo 3 de esta manera.") == [(None, "3")]


# -- numbers that are not citations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said",
    [
        "Una persona de 18 años puede votar desde los dieciocho años.",
        "La ley se aprobó en 2002 y se reformó en dos mil diez.",
        "La multa es de quinientos balboas, y se paga dos veces al año.",
        "El 3 de noviembre se celebra la separación de Colombia.",
        "Puede llamar al 6123-4567 o al 800-0000.",
        "Según la ley, el permiso dura dos años.",
        "La Ley 6 de 2002 regula el acceso a la información.",
        "El plazo es de 30 días hábiles y el 10 % del salario.",
        "El numeral 2 dice que se requiere licencia.",
    ],
)
def test_citation_is_never_a_number_without_article(said: str) -> None:
    assert find_citations(said) == []


def test_citation_list_stops_at_a_quantity() -> None:
    assert _keys("Según el artículo 14, y 2 años después, se renueva.") == [(None, "14")]


# -- norms and sources ---------------------------------------------------------------------------------------


def test_citation_norm_keys_of_source_names() -> None:
    assert norm_key("Constitución Política de la República de Panamá") == CONSTITUTION
    assert norm_key("Ley 6 de 22 de enero de 2002") == "ley 6 de 2002"
    assert norm_key("Código del Trabajo") == "codigo de trabajo"
    assert norm_key("Decreto Ejecutivo 124 de 2010") == "decreto 124 de 2010"
    assert norm_key("según la ley") is None


def test_citation_source_keys() -> None:
    assert source_key(LAW_6_12A) == ("ley 6 de 2002", "12-A")
    assert source_key("Ley 6 de 2002, artículo 12 bis") == ("ley 6 de 2002", "12 bis")
    assert source_key("Reglamento Interno, artículo 5") == ("reglamento interno", "5")
    assert source_key("Ley 6 de 2002") is None


# -- the matching rules -------------------------------------------------------------------------------------


def test_citation_same_article_same_norm_is_verified() -> None:
    check = CitationCheck()
    check.deliver("call-1", [CONSTITUTION_74])
    [checked] = check.check("El setenta y cuatro de la carta magna lo garantiza.")
    assert checked.verified and checked.source == CONSTITUTION_74 and checked.call_id == "call-1"


def test_citation_right_article_of_wrong_norm_is_not_verified() -> None:
    assert _check("El artículo 74 de la Ley 6 de 2002.", CONSTITUTION_74) == [("74", False)]
    assert _check("El artículo 12 del Código Penal.", LABOUR_CODE_12) == [("12", False)]


def test_citation_without_norm_is_verified_by_any_source_with_that_article() -> None:
    assert _check("Como dice el artículo 74, el salario se revisa.", LAW_6_3, CONSTITUTION_74) == [("74", True)]
    assert _check("Como dice el artículo 75, el salario se revisa.", LAW_6_3, CONSTITUTION_74) == [("75", False)]


def test_citation_suffix_must_match() -> None:
    assert _check("El artículo 12-A de la Ley 6 de 2002.", LAW_6_12A) == [("12-A", True)]
    assert _check("El artículo 12 de la Ley 6 de 2002.", LAW_6_12A) == [("12", False)]
    assert _check("El artículo doce a, de la Ley 6 de 2002.", LAW_6_12A) == [("12-A", True)]


def test_citation_law_without_year_matches_that_law_of_any_year() -> None:
    assert _check("La Ley 6, artículo 3.", LAW_6_3) == [("3", True)]
    assert _check("La Ley 6 de 2003, artículo 3.", LAW_6_3) == [("3", False)]


def test_citation_of_a_code_matches_the_source_code_name() -> None:
    assert _check("El Código del Trabajo, en su artículo doce.", LABOUR_CODE_12) == [("12", True)]


def test_citation_later_in_the_conversation_is_verified_by_earlier_sources() -> None:
    check = CitationCheck()
    check.deliver("call-1", [LAW_6_3])
    check.deliver("call-2", [CONSTITUTION_74])
    [checked] = check.check("Volviendo a lo anterior, el artículo 3 de la Ley 6 de 2002 sigue aplicando.")
    assert checked.verified and checked.call_id == "call-1"


def test_citation_before_any_source_is_not_verified() -> None:
    check = CitationCheck()
    assert [c.verified for c in check.check("Según la Ley 200 de 2031, artículo 14, sí.")] == [False]
    check.deliver("call-1", ["Ley 200 de 2031, artículo 14"])
    assert [c.verified for c in check.check("Según la Ley 200 de 2031, artículo 14, sí.")] == [True]


def test_citation_bare_list_and_continuation_take_the_norm_after_them() -> None:
    assert _keys("El 12 y el 13 de la Ley 6 de 2002 fijan el plazo.") == [
        ("ley 6 de 2002", "12"),
        ("ley 6 de 2002", "13"),
    ]
    assert _keys("El artículo 74 de la Constitución y 12 del Código de Trabajo.") == [
        (CONSTITUTION, "74"),
        ("codigo de trabajo", "12"),
    ]


@pytest.mark.parametrize(
    ("text", "continued"),
    [
        ("El artículo 224 del Código Penal, y también el 225, castigan el robo.", "225"),
        ("Lo dicen el artículo 74 de la Constitución así como el setenta y cinco.", "setenta y cinco"),
        ("La Ley 6 de 2002, artículo 3, así como el 5, lo regulan.", "5"),
        ("El artículo 40, numeral 2, de la Constitución, y también el 41.", "41"),
    ],
)
def test_citation_continued_right_after_a_citation_takes_its_norm(text: str, continued: str) -> None:
    first, second = find_citations(text)
    assert second.norm == first.norm is not None
    assert second.said == continued


def test_citation_continued_in_a_later_line_of_a_referred_norm_keeps_it() -> None:
    check = CitationCheck()
    check.deliver("call-1", [LAW_6_3, "Ley 6 de 2002, artículo 4"])
    check.check("La Ley 6 de 2002 trata del acceso a la información.")
    checked = check.check("El artículo 3 de la misma ley, y también el 4, lo dicen.")
    assert [(c.citation.norm, c.citation.article, c.verified) for c in checked] == [
        ("ley 6 de 2002", "3", True),
        ("ley 6 de 2002", "4", True),
    ]


def test_citation_continued_that_names_its_own_norm_keeps_it() -> None:
    assert _keys("El artículo 224 del Código Penal, así como el 12 del Código de Trabajo.") == [
        ("codigo penal", "224"),
        ("codigo de trabajo", "12"),
    ]


@pytest.mark.parametrize(
    "after",
    [
        "y también el 3 de noviembre se celebra",
        "y también el 10 % del salario",
        "así como el 15 de cada mes",
        "así como el 2 años después",
        "y también los 30 días de vacaciones",
    ],
)
def test_citation_is_not_a_date_or_amount_after_a_citation(after: str) -> None:
    assert _keys(f"El artículo 224 del Código Penal, {after}.") == [("codigo penal", "224")]


def test_citation_continuation_words_away_from_a_citation_cite_nothing() -> None:
    assert _keys("El artículo 224 del Código Penal aplica en todo el país. Así como el 225 no.") == [
        ("codigo penal", "224")
    ]


def test_citation_is_not_a_chapter_or_title_number() -> None:
    assert find_citations("El capítulo 2 y 3 de la Constitución, y el título III, tratan de los derechos.") == []


def test_citation_y_siguientes_keeps_the_norm() -> None:
    assert _keys("El artículo 215 y siguientes del Código Penal tipifican el robo.") == [("codigo penal", "215")]


def test_citation_su_articulo_points_to_the_norm_of_its_sentence() -> None:
    assert _keys("Según su artículo 8, la Ley 45 de 2032 exige un certificado médico.") == [("ley 45 de 2032", "8")]


@pytest.mark.parametrize(
    ("text", "norm"),
    [
        ("Hay un artículo 12 bis en la Ley 6 de 2002.", "ley 6 de 2002"),
        ("Eso lo dice el artículo 74 en la Constitución.", CONSTITUTION),
        ("Busque el artículo doce en el Código de Trabajo.", "codigo de trabajo"),
    ],
)
def test_citation_en_la_links_the_norm_like_de_la(text: str, norm: str) -> None:
    assert [n for n, _ in _keys(text)] == [norm]


def test_citation_bare_number_en_la_norm_is_no_citation() -> None:
    """Only a number said as an article takes "en la <norma>"; a bare one there is a year or a count."""
    assert find_citations("Se reformó el 2010 en la Ley 6 de 2002.") == []


@pytest.mark.parametrize(
    "text",
    [
        "Tanto el artículo doce A como el doce be de la Ley seis de dos mil dos regulan el acceso.",
        "Tanto el artículo 12-A como el artículo 12-B de la Ley 6 de 2002 regulan el acceso.",
        "El artículo 12-A como el 12-B de la Ley 6 de 2002 lo dicen.",
    ],
)
def test_citation_list_joined_by_como_shares_the_norm_after_it(text: str) -> None:
    assert _keys(text) == [("ley 6 de 2002", "12-A"), ("ley 6 de 2002", "12-B")]


def test_citation_como_before_an_amount_or_date_ends_the_list() -> None:
    assert _keys("El artículo 12 de la Ley 6 de 2002, tanto el 10 % como el 3 de mayo.") == [("ley 6 de 2002", "12")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "El artículo setenta de la Constitución protege la familia, y el setenta y cuatro complementa eso.",
            [(CONSTITUTION, "70"), (CONSTITUTION, "74")],
        ),
        (
            "Los artículos 319 y 320 del Código de la Familia hablan de la patria potestad, y el 377, de los "
            "alimentos.",
            [("codigo de familia", "319"), ("codigo de familia", "320"), ("codigo de familia", "377")],
        ),
        (
            "El artículo 3 de la Ley 6 de 2002 fija el plazo y el 12 del Código de Trabajo el salario.",
            [("ley 6 de 2002", "3"), ("codigo de trabajo", "12")],
        ),
    ],
)
def test_citation_y_el_n_later_in_the_sentence_cites_the_same_norm(text: str, expected: list) -> None:
    assert _keys(text) == expected


@pytest.mark.parametrize(
    "after",
    [
        "y el 3 de noviembre se celebra",
        "y el 10 % del salario se descuenta",
        "y el 15 por ciento restante",
        "y el 2002 se reformó",
        "y el dos mil diez se reformó",
        "y el 18 años cumplidos",
        "y el 500 balboas de multa",
        "y el primero en reclamar fue el trabajador",
        "y el segundo es el empleador",
        "y en primer lugar se paga el salario",
        "con 30 días de plazo y el 15 es feriado",
        "en dos opciones, el 1 y el 2 son válidas",
    ],
)
def test_citation_y_el_n_that_is_a_date_amount_or_order_cites_nothing(after: str) -> None:
    assert _keys(f"El artículo 224 del Código Penal castiga el robo, {after}.") == [("codigo penal", "224")]


def test_citation_y_el_n_after_a_sentence_break_cites_nothing() -> None:
    assert _keys("El artículo 70 de la Constitución protege la familia. Y el 74 lo veremos luego.") == [
        (CONSTITUTION, "70")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "No es el 41 sino el 43 de la Constitución.",
        "No es el artículo 41 sino el 43 de la Constitución.",
        "No es el cuarenta y uno, sino el cuarenta y tres de la Constitución.",
    ],
)
def test_citation_el_n_sino_el_m_of_a_norm_are_both_of_that_norm(text: str) -> None:
    assert _keys(text) == [(CONSTITUTION, "41"), (CONSTITUTION, "43")]


def test_citation_sino_before_a_date_ends_the_list() -> None:
    assert find_citations("No es el 4 sino el 5 de mayo.") == []
