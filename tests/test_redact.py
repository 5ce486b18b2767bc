"""Redaction: identifiers go, legal references stay."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from agent.ops.redact import RedactingFilter, redact


@pytest.mark.parametrize(
    ("text", "secret", "placeholder"),
    [
        ("Mi cédula es 8-123-4567 y quiero saber si puedo votar.", "8-123-4567", "[cédula]"),
        ("Tengo la cédula 8-NT-123-4567, ¿me sirve para el trámite?", "8-NT-123-4567", "[cédula]"),
        ("Nací en el extranjero, mi cédula es PE-12-345.", "PE-12-345", "[cédula]"),
        ("Soy extranjero residente con E-8-123456 desde hace años.", "E-8-123456", "[cédula]"),
        ("Me naturalicé: N-19-1234 es mi número.", "N-19-1234", "[cédula]"),
        ("Mi abuelo tiene la 1AV-12-345 todavía.", "1AV-12-345", "[cédula]"),
        ("La cédula de mi hermana es 4-PI-12-3456.", "4-PI-12-3456", "[cédula]"),
        ("Dicté mi cédula: 8 - 123 - 4567, ¿está bien?", "8 - 123 - 4567", "[cédula]"),
        ("cédula 8 123 4567 por favor", "8 123 4567", "[cédula]"),
        ("Con cédula 12-05-2004 no me dejan entrar", "12-05-2004", "[cédula]"),
        ("Llámeme al 6123-4567 cuando tenga la respuesta.", "6123-4567", "[teléfono]"),
        ("Mi celular es 6123 4567.", "6123 4567", "[teléfono]"),
        ("El número 61234567 es de mi abogado.", "61234567", "[teléfono]"),
        ("La oficina atiende en el 223-4567.", "223-4567", "[teléfono]"),
        ("Mi teléfono fijo es 315 2004, llame de día.", "315 2004", "[teléfono]"),
        ("Escríbame por WhatsApp al +507 6123-4567.", "+507 6123-4567", "[teléfono]"),
        ("El consulado: +507 223 4567", "+507 223 4567", "[teléfono]"),
        ("Mi hija vive en España, su número es +34 612 34 56 78.", "+34 612 34 56 78", "[teléfono]"),
        ("Llamó desde +1 (305) 555-0142 ayer.", "+1 (305) 555-0142", "[teléfono]"),
        ("Mande la respuesta a juan.perez@example.com por favor.", "juan.perez@example.com", "[correo]"),
        (
            "mi correo es maria punto lopez arroba gmail punto com",
            "maria punto lopez arroba gmail punto com",
            "[correo]",
        ),
        ("Me cobraron dos veces en la tarjeta 4111 1111 1111 1111.", "4111 1111 1111 1111", "[tarjeta]"),
        ("tarjeta 5500-0000-0000-0004 vencida", "5500-0000-0000-0004", "[tarjeta]"),
        ("Mi pasaporte número PA1234567 está vencido.", "PA1234567", "[pasaporte]"),
        ("pasaporte no. X12345678 emitido en Caracas", "X12345678", "[pasaporte]"),
        ("Viajo con el AB1234567 pero no sé si vale.", "AB1234567", "[pasaporte]"),
    ],
)
def test_identifier_is_masked(text: str, secret: str, placeholder: str) -> None:
    out = redact(text)
    assert secret not in out
    assert placeholder in out


@pytest.mark.parametrize(
    "text",
    [
        "¿Qué dice el artículo 72 de la Constitución?",
        "Los artículos 17 y 18 hablan de los derechos individuales.",
        "La Ley 34 de 1949 fue derogada por la Ley 23 de 2015.",
        "El Acto Legislativo 1 de 2004 reformó la Constitución de 1972.",
        "La reforma entró en vigor el 15 de noviembre de 2004.",
        "El plazo vencía el 12-05-2004 según la Gaceta Oficial 25,176.",
        "El plazo vencía el 12/05/2004.",
        "Una tasa de interés del 2.5 % o del 15% anual.",
        "Decreto Ejecutivo 235 de 2004, artículo 1034.",
        "Resolución No. 235-2004 de la Autoridad.",
        "La multa es de B/. 1 500 000 según el artículo 305.",
        "Código Civil, artículos 1644 a 1650, Gaceta Oficial No. 28579.",
        "El periodo 2004-2009 y el 2019-2024.",
    ],
)
def test_legal_references_stay(text: str) -> None:
    assert redact(text) == text


def test_mobile_dictated_in_pairs_is_masked() -> None:
    out = redact("Mi celular es 61 23 45 67, llame de tarde.")
    assert out == "Mi celular es [teléfono], llame de tarde."


def test_mobile_with_a_paired_tail_is_masked() -> None:
    assert redact("Escríbame al 6123-45-67 si hay novedades.") == "Escríbame al [teléfono] si hay novedades."


def test_cedula_written_with_dots_is_masked() -> None:
    assert redact("Mi cédula es 8.704.223.") == "Mi cédula es [cédula]."
    # without the word: a dotted number with a cédula's shape is one unless it is an amount
    assert redact("Soy 8.704.223 y quiero saber si puedo votar.") == "Soy [cédula] y quiero saber si puedo votar."


def test_full_width_digits_are_masked() -> None:
    assert redact("Llámeme al ６１２３-４５６７ por favor.") == "Llámeme al [teléfono] por favor."
    assert redact("cédula ８-１２３-４５６７") == "cédula [cédula]"


def test_full_width_digits_elsewhere_are_kept_as_ascii_one_for_one() -> None:
    # digits fold to ASCII character for character; other characters (º, …) stay as written
    assert redact("Nº ７２: ¿qué dice el artículo ７２…?") == "Nº 72: ¿qué dice el artículo 72…?"


def test_card_number_with_dots_is_masked() -> None:
    assert redact("Me cobraron con la 4111.1111.1111.1111 dos veces.") == "Me cobraron con la [tarjeta] dos veces."


@pytest.mark.parametrize(
    "text",
    [
        "¿Qué dice el artículo 32 del Código de Trabajo?",
        "¿La ley cambia en 2030?",
        "pregunto por la Ley 6 de 2002",
        "El salario mínimo es B/. 1.500 al mes.",
        "La multa llega a B/. 1.500.000 según el artículo 305.",
        "Una indemnización de 1.500.000 balboas.",
        "Pagué $1.500.000 por la casa.",
        "Tengo 61 años y 23 de servicio, ¿me puedo jubilar?",
        "Mi hijo tiene 16 años.",
        "El numeral 1.2.10 del reglamento.",
        "La reforma se firmó el 12.05.2004.",
        "Un total de 1.234.567,89 balboas.",
        "Los artículos 61, 23, 45 y 67.",
    ],
)
def test_new_separators_leave_references_amounts_and_ages_alone(text: str) -> None:
    assert redact(text) == text


def test_several_kinds_in_one_sentence() -> None:
    text = (
        "Soy 8-765-4321, mi correo es ana@correo.pa y mi celular 6987-6543; "
        "pregunto por el artículo 56 de la Ley 6 de 2002."
    )
    out = redact(text)
    assert out == (
        "Soy [cédula], mi correo es [correo] y mi celular [teléfono]; pregunto por el artículo 56 de la Ley 6 de 2002."
    )


def test_non_luhn_digit_run_is_not_a_card() -> None:
    assert "[tarjeta]" not in redact("expediente 1234 5678 9012 3456")


def test_luhn_run_inside_an_identifier_is_not_a_card() -> None:
    # A hex room name whose digits hold a 13-digit Luhn-valid run: logs must keep the name whole.
    room = "lexvoz-4178ea3485573178050f564a30357c55"
    assert redact(f"joined room {room}") == f"joined room {room}"
    assert redact("pago con 4111111111111111.") == "pago con [tarjeta]."


def test_empty_and_plain() -> None:
    assert redact("") == ""
    assert redact("hola") == "hola"


def test_redacting_filter_rewrites_message_and_args(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("lexvoz.test.redact")
    flt = RedactingFilter()
    caplog.handler.addFilter(flt)
    try:
        with caplog.at_level(logging.INFO, logger="lexvoz.test.redact"):
            logger.info("query from %s: %s", "6123-4567", "mi cédula es 8-123-4567")
            try:
                raise ValueError("bad email juan@example.com")
            except ValueError:
                logger.exception("failed for %s", "juan@example.com")
    finally:
        caplog.handler.removeFilter(flt)
    text = caplog.text
    assert "6123-4567" not in text
    assert "8-123-4567" not in text
    assert "juan@example.com" not in text
    assert "[teléfono]" in text and "[cédula]" in text and "[correo]" in text


def test_redacting_filter_survives_bad_format() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "value %d", ("not-a-number",), None)
    assert RedactingFilter().filter(record) is True
    assert record.args is None


def test_redacting_filter_drops_livekit_pii_extras() -> None:
    record = logging.LogRecord("livekit.agents", logging.WARNING, __file__, 1, "repaired arguments", None, None)
    record.__dict__["lk.pii.raw_arguments"] = '{"query": "me botaron embarazada"}'
    record.__dict__["function"] = "search_panama_law"
    assert RedactingFilter().filter(record)
    assert "lk.pii.raw_arguments" not in vars(record)
    assert record.__dict__["function"] == "search_panama_law"


# Inputs that made a pattern rescan the rest of the text from every position (quadratic before the fix):
# 20 KB of the first took 9 s. A realistic question with identifiers is in the set too.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "spoken e-mail chain": lambda n: ("juan punto " * n)[:n],
    "dotted run": lambda n: ("a." * n)[:n],
    "hyphen run": lambda n: ("a-" * n)[:n],
    "percent run": lambda n: "%" * n,
    "digits and spaces": lambda n: ("8 123 " * n)[:n],
    "question": lambda n: ("Mi cédula es 8-123-4567, llame al 6123-4567 o a juan@example.com; artículo 72. " * n)[:n],
}


def _seconds(text: str, runs: int) -> float:
    """Best of `runs` timings: the minimum discounts a busy machine, never inflates the figure."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("shape", list(ADVERSARIAL))
def test_redaction_time_grows_linearly(shape: str) -> None:
    """10x the input must cost well under 100x the time (quadratic) -- we allow 40x for a noisy machine.

    The large input is timed up to three times and only the best counts, so a pause on a shared machine
    cannot fail the test, while a quadratic pattern (ratio about 100) fails all three tries.
    """
    make = ADVERSARIAL[shape]
    small = _seconds(make(1_000), runs=7)
    big_text = make(10_000)
    ratio = float("inf")
    for _ in range(3):
        ratio = min(ratio, _seconds(big_text, runs=1) / small)
        if ratio < 40:
            break
    assert ratio < 40, f"{shape}: 10x the input cost {ratio:.0f}x the time"
