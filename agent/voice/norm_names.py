"""Norms as the agent names them and as sources write them, and one key for both.

Keys (`norm_key`): the Constitution ("la Constitución Política…", "la carta magna", "nuestra Constitución",
"constitucional") is "constitucion"; a numbered norm is "ley 6 de 2002" ("la ley seis de dos mil
dos", "Ley N.° 6 de 2002", "Ley 6 de 22 de enero de 2002"), or "ley 6" when no year is said, and the same for
"decreto" (ejecutivo), "decreto ley", "decreto de gabinete", "resolucion", "acuerdo"; a code is keyed by its
name's first word ("el Código del Trabajo", "código laboral" and the source "Código de Trabajo" are all
"codigo de trabajo"; "Código Penal" is "codigo penal"). A source's norm that is none of these is keyed by its
folded name, so it is only ever matched by citations that name no norm.

`norms_in` lists the norms a prepared text names, in order, with where each name starts and ends; the citation
check links articles to them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.voice.spoken_numbers import prepare

CONSTITUTION = "constitucion"
"""How a citation of the Constitution is keyed, whatever the words: "la Constitución", "la Constitución Política
de la República de Panamá", "la carta magna"."""

_CONSTITUTION = (
    r"constitucion(?!\s+de\s+(?:una?|1|los|las|el|sus?|esta|esa)\b)(?:\s+politica)?(?:\s+(?:nacional|panamena))?"
    r"(?:\s+de\s+(?:la\s+republica(?:\s+de\s+panama)?|panama))?|carta\s+(?:magna|fundamental)"
    r"|(?:norma|texto|precepto|disposicion|mandato)\s+constitucional"
)
_NUMBERED_KINDS = r"decreto\s+ley|decreto\s+de\s+gabinete|decreto(?:\s+ejecutivo)?|ley|resolucion|acuerdo"
NUMBER_MARK = r"(?:(?:n\s*\.?\s*°|no\.?|nro\.?|num\.?|numero)\s*)?"
MONTHS = r"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre"
_NUMBERED = (
    rf"(?P<kind>{_NUMBERED_KINDS})\s+{NUMBER_MARK}(?P<num>\d{{1,5}})(?![\d.,]\d)"
    rf"(?:\s+del?\s+(?:\d{{1,2}}\s+de\s+(?:{MONTHS})\s+del?\s+|ano\s+)?(?P<year>(?:1[89]|2\d)\d\d)\b)?"
)
_CODE_CONNECTOR = r"(?:del|de\s+la|de\s+los|de\s+las|de)"
_CODE = rf"codigo(?:\s+(?P<conn>{_CODE_CONNECTOR}))?\s+(?P<w1>[a-z]+)(?:\s+(?P<w2>[a-z]+))?"
_NORM = re.compile(rf"\b(?:(?P<const>{_CONSTITUTION})|(?P<numbered>{_NUMBERED})|(?P<code>{_CODE}))")
# Words that cannot name a code ("el código que…", "código de barras" is kept: it simply matches no source).
_NOT_CODE_WORDS = frozenset("que y o e a en el la los las un una se lo su sus es dice establece".split())
_CODE_SYNONYMS = {"laboral": "trabajo"}
# Codes whose first word does not tell them apart ("Código Procesal Penal", "Código de Procedimiento Civil").
_CODE_TWO_WORDS = frozenset({"procesal", "procedimiento"})
_NUMBERED_KEY = re.compile(r"^(?P<kind>[a-z ]+?) (?P<num>\d+)(?: de (?P<year>\d{4}))?$")

REFERRING = r"misma|mismo|dicha|dicho|esa|ese|esta|este|citada|citado|referida|referido|mencionada|mencionado"
# "del mismo código le da…": a code after one of these words is the code named before, not one called "le".
_REFERRING_BEFORE = re.compile(rf"(?:^|[^a-z])(?:{REFERRING})\s+$")


def norm_key(name: str) -> str | None:
    """The key of a norm's name ("Ley 6 de 2002", "Constitución Política de la República de Panamá", "Código de
    Trabajo"), from the first norm it names; None when it names no law, decree, code or Constitution."""
    for found in _NORM.finditer(prepare(name).low):
        key = _key(found)
        if key is not None:
            return key[0]
    return None


def norms_match(said: str, source: str) -> bool:
    """Whether a norm key the agent said names a source's norm key: equal, or the same numbered norm when either
    leaves the year out."""
    if said == source:
        return True
    a, b = _NUMBERED_KEY.match(said), _NUMBERED_KEY.match(source)
    if a is None or b is None:
        return False
    same_norm = a.group("kind") == b.group("kind") and a.group("num") == b.group("num")
    return same_norm and (a.group("year") is None or b.group("year") is None)


@dataclass(frozen=True, slots=True)
class Norm:
    start: int
    end: int
    key: str


def norms_in(low: str, earlier: str | None) -> list[Norm]:
    """The norms named in the text, in order. "Código" after "mismo", "dicho", "este"… and before no "de"/"del"
    ("del mismo código le da…", "de dicho código, el…") is the norm named last (in the text, else earlier in the
    conversation), whatever word follows it; "de dicho Código de Trabajo" names its code."""
    norms: list[Norm] = []
    for m in _NORM.finditer(low):
        key = _key(m)
        if key is None:
            continue
        if (
            m.group("code")
            and m.group("conn") is None
            and _REFERRING_BEFORE.search(low[max(0, m.start() - 14) : m.start()])
        ):
            referred = norms[-1].key if norms else earlier
            if referred is not None:
                key = (referred, m.start() + len("codigo"))
        norms.append(Norm(m.start(), key[1], key[0]))
    return norms


def _key(match: re.Match[str]) -> tuple[str, int] | None:
    """A norm's key and where its name ends, None for "código" followed by no name."""
    if match.group("const"):
        return CONSTITUTION, match.end()
    if match.group("numbered"):
        kind = " ".join(match.group("kind").split()).replace("decreto ejecutivo", "decreto")
        year = match.group("year")
        return f"{kind} {int(match.group('num'))}" + (f" de {year}" if year else ""), match.end()
    first, second = match.group("w1"), match.group("w2")
    if first in _NOT_CODE_WORDS:
        return None
    first = _CODE_SYNONYMS.get(first, first)
    two = first in _CODE_TWO_WORDS and second is not None
    name = f"{first} {second}" if two else first
    connected = match.group("conn") is not None or first in _CODE_SYNONYMS.values()
    return (f"codigo de {name}" if connected else f"codigo {name}"), match.end() if two else match.end("w1")
