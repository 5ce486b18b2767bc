"""Mask personal identifiers before text reaches a log line, a trace or the evidence ledger.

Callers ask the agent about their own situation, so a question may carry a cédula, a phone number
or an e-mail address. Those must never be written down by the operational side of the system; the
legal references that make a question useful to audit (article and law numbers, years, dates,
percentages) must survive. The patterns are ordered from most to least specific so that, for
example, a card number is not first eaten as two phone numbers.

Every pattern runs in time linear in the input: a pattern may only start at the beginning of a run of
the characters it consumes (a look-behind refuses the middle of a run), and repeated groups that could
otherwise be retried from every word of a long text are bounded. A log line or a question of any
length therefore costs a few microseconds per character, never a frozen worker; `bench/redact.py`
measures it and the tests pin it.

Digits of other scripts (full-width `６１２３`, Arabic-Indic, ...) are folded to ASCII first, one character for
one, together with the full-width `＋－．（）／`, so every pattern sees `6123` and positions do not move. Not
NFKC on the whole text: that would also rewrite characters that are no identifier (`º`, `…`, ligatures) in
what is kept. The output therefore shows such digits as ASCII ones.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable

__all__ = ["RedactingFilter", "redact"]

CEDULA = "[cédula]"
PHONE = "[teléfono]"
EMAIL = "[correo]"
CARD = "[tarjeta]"
PASSPORT = "[pasaporte]"

# A separator inside an identifier: a hyphen (optionally spaced, as a transcript may write it), a
# single space or a dot (`8.704.223`).
_SEP = r"(?:\s*[-‐‑–]\s*|\s|\.)"

# Any decimal digit that is not ASCII (`\d` matches them all, but a pattern's literal `6` does not), and
# the full-width punctuation an identifier is written with.
_FOLD_RE = re.compile(r"(?![0-9])\d|[＋－．（）／]")

# `%` belongs in the look-behind too: without it a run of `%%%%` is a start at every character, and each
# start rescans the rest of the run looking for `@` (quadratic).
_EMAIL_RE = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# "juan punto perez arroba gmail punto com": how a speech transcript spells an address. The start must
# begin a word run (look-behind) and the "punto" chains are bounded: an unbounded chain was tried again
# from every word of "a punto a punto ...", which made 20 KB take seconds.
_SPOKEN_EMAIL_RE = re.compile(
    r"(?<![\w.-])[\w.-]+(?:\s+punto\s+[\w-]+){0,8}\s+arroba\s+[\w-]+(?:\s+punto\s+[\w-]+){1,8}(?![\w-])",
    re.IGNORECASE,
)

# A card number stands alone: a digit run inside a longer word (a room name's hex, a request id) is not one,
# even when it passes the Luhn check, as about 1 random 32-digit hex name in 600 holds such a run.
_CARD_RE = re.compile(r"(?<![\w.-])\d(?:[ .-]?\d){12,18}(?![\w-])(?!\.\d)")

# Cédula prefixes: province 1-13 (optionally with AV/PI/NT), or the letter series E, N, PE.
_CEDULA_RE = re.compile(
    rf"""(?<![\w/.,-])
    (?:
        (?:1[0-3]|[1-9])(?:{_SEP}?(?:AV|PI|NT))?   # 8, 8-NT, 1AV, 4PI
      | PE | E | N                                 # panameño en el extranjero, extranjero, naturalizado
    )
    {_SEP}(\d{{1,4}}){_SEP}(\d{{1,6}})
    (?![\w/-])(?![.,]\d)""",
    re.IGNORECASE | re.VERBOSE,
)

_PASSPORT_CONTEXT_RE = re.compile(
    r"(\bpasaporte\s*(?:(?:n(?:[úu]mero|o\.?|º|°|ro\.?)|#)\s*)?[:.]?\s*)([A-Z0-9](?:[A-Z0-9-]{4,10})[A-Z0-9])\b",
    re.IGNORECASE,
)
_PASSPORT_GENERIC_RE = re.compile(r"\b[A-Z]{1,3}\d{6,8}\b")

_PA_PREFIX = r"(?:(?:\+\s?|00)?\(?507\)?[\s.-]*)"
_INTL_PHONE_RE = re.compile(r"(?<![\w+])(?:\+|00)\d{1,3}(?:[\s.-]?\(?\d{1,5}\)?){1,5}(?![\w-])")
_PA_PREFIXED_RE = re.compile(rf"(?<![\w+]){_PA_PREFIX}(?:6\d{{3}}|[2-9]\d{{2}})[\s.-]?\d{{4}}(?![\w-])")
_MOBILE_RE = re.compile(r"(?<![\w.,/-])6\d{3}[\s.-]?\d{4}(?![\w/-])")
# The same number dictated in pairs: `61 23 45 67`, `6123-45-67`.
_MOBILE_PAIRS_RE = re.compile(r"(?<![\w.,/-])6\d(?:[\s.-]?\d\d)(?:[\s.-]\d\d){2}(?![\w/-])(?![.,]\d)")
_LANDLINE_RE = re.compile(r"(?<![\w.,/-])[2-579]\d{2}-\d{4}(?![\w/-])")
_LANDLINE_SPACED_RE = re.compile(r"(?<![\w.,/-])[2-579]\d{2}[\s.]\d{4}(?![\w/-])")

# Words that make a nearby bare number an identifier rather than, say, a law number.
_PHONE_CONTEXT_RE = re.compile(
    r"(tel[ée]fono|\btel\b|celular|m[óo]vil|whats\s?app|ll[áa]m[ae]|contacto|n[úu]mero)[^.\n]{0,30}$", re.IGNORECASE
)
_CEDULA_CONTEXT_RE = re.compile(r"(c[ée]dula|identidad|\bc[ée]d\b|\bC\.?I\.?P?\b)[^.\n]{0,30}$", re.IGNORECASE)
# A dotted number is an amount, not a cédula, right after a currency sign or before a currency word.
_CURRENCY_BEFORE_RE = re.compile(r"(?:B/\.?|\$|USD|US\$)\s*$", re.IGNORECASE)
_CURRENCY_AFTER_RE = re.compile(r"\s*(?:balboas?|d[óo]lares|USD|B/)", re.IGNORECASE)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _fold(m: re.Match[str]) -> str:
    ch = m.group(0)
    return str(unicodedata.decimal(ch)) if ch.isdecimal() else unicodedata.normalize("NFKC", ch)


def _digits(s: str) -> str:
    return "".join(ch for ch in s if ch.isdigit())


def _preceded_by(pattern: re.Pattern[str], text: str, start: int) -> bool:
    return bool(pattern.search(text[max(0, start - 45) : start]))


def _card(m: re.Match[str]) -> str:
    digits = _digits(m.group(0))
    return CARD if 13 <= len(digits) <= 19 and _luhn_ok(digits) else m.group(0)


def _looks_like_date(tomo: str, asiento: str, prefix_digits: str) -> bool:
    """12-05-2004 and 8-12-2004 are dates in legal text unless the word cédula is nearby."""
    if not prefix_digits or len(tomo) > 2 or len(asiento) != 4:
        return False
    day, month, year = int(prefix_digits), int(tomo), int(asiento)
    return 1 <= day <= 31 and 1 <= month <= 12 and 1800 <= year <= 2100


def _make_cedula_sub(text: str) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        whole = m.group(0)
        tomo, asiento = m.group(1), m.group(2)
        lead = re.match(r"\d+", whole)
        prefix_digits = lead.group(0) if lead and whole[lead.end() : lead.end() + 1] in "-‐‑– ." else ""
        context = _preceded_by(_CEDULA_CONTEXT_RE, text, m.start())
        if not context:
            if _looks_like_date(tomo, asiento, prefix_digits):
                return whole
            if "." in whole:
                # `8.704.223` is a cédula; `B/. 1.500.000`, `1.500.000 balboas` and `1.2.10` (a numbering) are not
                amount = _preceded_by(_CURRENCY_BEFORE_RE, text, m.start()) or _CURRENCY_AFTER_RE.match(text, m.end())
                return whole if amount or len(asiento) < 3 else CEDULA
            # Three bare space-separated numbers ("8 123 4567") are an identifier only if the
            # asiento is long enough not to be a list of article numbers.
            if not re.search(r"[-‐‑–]", whole) and len(asiento) < 4:
                return whole
        return CEDULA

    return sub


def _intl_phone(m: re.Match[str]) -> str:
    n = len(_digits(m.group(0)))
    return PHONE if 8 <= n <= 15 else m.group(0)


def _make_context_sub(text: str, placeholder: str, pattern: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        return placeholder if _preceded_by(pattern, text, m.start()) else m.group(0)

    return sub


def _make_landline_sub(text: str) -> Callable[[re.Match[str]], str]:
    """ "235-2004" is as likely a resolution number as a phone: a year-like tail needs phone words."""

    def sub(m: re.Match[str]) -> str:
        tail = m.group(0)[-4:]
        if tail.startswith(("19", "20")) and not _preceded_by(_PHONE_CONTEXT_RE, text, m.start()):
            return m.group(0)
        return PHONE

    return sub


def _passport_context(m: re.Match[str]) -> str:
    ident = m.group(2)
    if not any(ch.isdigit() for ch in ident) or not 6 <= len(ident.replace("-", "")) <= 9:
        return m.group(0)
    return m.group(1) + PASSPORT


def redact(text: str) -> str:
    """Return `text` with personal identifiers replaced by typed placeholders such as "[cédula]".

    Never raises for string input; article numbers, law numbers, years, dates and percentages
    are left as they are.
    """
    if not text:
        return text
    if not text.isascii():
        text = _FOLD_RE.sub(_fold, text)
    out = _EMAIL_RE.sub(EMAIL, text)
    out = _SPOKEN_EMAIL_RE.sub(EMAIL, out)
    out = _CARD_RE.sub(_card, out)
    out = _PA_PREFIXED_RE.sub(PHONE, out)
    out = _INTL_PHONE_RE.sub(_intl_phone, out)
    out = _PASSPORT_CONTEXT_RE.sub(_passport_context, out)
    out = _CEDULA_RE.sub(_make_cedula_sub(out), out)
    out = _PASSPORT_GENERIC_RE.sub(PASSPORT, out)
    out = _MOBILE_PAIRS_RE.sub(PHONE, out)
    out = _MOBILE_RE.sub(PHONE, out)
    out = _LANDLINE_RE.sub(_make_landline_sub(out), out)
    out = _LANDLINE_SPACED_RE.sub(_make_context_sub(out, PHONE, _PHONE_CONTEXT_RE), out)
    return out


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (and any exception text) in place.

    Attach it to handlers (`handler.addFilter(RedactingFilter())`): a handler filter sees records
    from every logger, including third-party ones that log tool arguments. The record is rewritten
    with its arguments already merged, so later handlers see the redacted text too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must not hide the record
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        # livekit-agents tags raw conversation content (tool arguments, transcripts) as `lk.pii.*` extras,
        # which structured formatters would print verbatim: drop them whole.
        for key in [k for k in vars(record) if k.startswith("lk.pii")]:
            delattr(record, key)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
