"""Split a law or code as published (plain text lines) into articles, keeping Libro/Título/Capítulo as context.

Published texts head each article in many ways ("Artículo 1.", "ARTÍCULO 1", "Artículo 1°", "Artículo 12-A",
"Artículo 12 bis", "Art. 3."). A heading is only recognised at the start of a line and followed by punctuation,
the end of the line or a capitalised sentence, so a cross-reference that happens to open a line ("Artículo 5 de
esta Ley ...") stays part of the text. Headings of the structure open a level and close the levels below it;
their name may sit on the heading's own line or on the next one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..norms import Article, check_articles

_ARTICLE = re.compile(
    r"^\s*(?P<word>ART[IÍ]CULO|Art[ií]culo|ART\.|Art\.)\s*(?P<num>\d{1,5})\s*(?P<deg>[°º]|o\.(?=\s))?"
    r"(?:\s*-\s*(?P<letter>[A-Z])\b|\s+(?P<latin>bis|ter|qu[aá]ter|quinquies)\b)?"
    r"(?P<after>\s*[.:\-–—)]\s*|\s*$|\s+(?=[A-ZÁÉÍÓÚÑ¿¡«\"(]))"
)
# Structure levels, outermost first. A heading opens its level and closes every deeper one.
_LEVELS = ("libro", "titulo", "capitulo", "seccion")
_STRUCTURE = re.compile(
    r"^\s*(?P<word>LIBRO|Libro|T[IÍ]TULO|T[ií]tulo|CAP[IÍ]TULO|Cap[ií]tulo|SECCI[OÓ]N|Secci[oó]n)\s+"
    r"(?P<num>[IVXLCDM]+|\d{1,3}|(?i:[úu]nic[oa]|preliminar|primer[oa]|segund[oa]|tercer[oa]|cuart[oa]|quint[oa]"
    r"|sext[oa]|s[ée]ptim[oa]|octav[oa]|noven[oa]|d[ée]cim[oa]))\b\s*[°º]?"
    r"\s*(?:[.:\-–—]\s*)?(?P<name>.*)$"
)
# The signature block at the end of a law ("COMUNÍQUESE Y CÚMPLASE. Dada en la ciudad de Panamá ...").
_CLOSING = re.compile(r"^\s*(COMUN[IÍ]QUESE|Comun[ií]quese|PUBL[IÍ]QUESE Y CÚMPLASE|Publ[ií]quese y c[uú]mplase)")
_MAX_HEADING_NAME = 160


@dataclass(slots=True)
class _Draft:
    number: int
    suffix: str
    headings: tuple[str, ...]
    lines: list[str] = field(default_factory=list)


def _level(word: str) -> int:
    folded = word.lower().translate(str.maketrans("íó", "io"))
    return _LEVELS.index(folded)


def _heading_text(word: str, num: str, name: str) -> str:
    label = f"{word.capitalize()} {num.upper() if re.fullmatch(r'[ivxlcdm]+', num, re.I) else num}"
    return f"{label}. {name}" if name else label


def _is_name_line(line: str) -> bool:
    """A heading's name on the next line: short, not itself a heading, not a sentence of article text."""
    text = line.strip()
    return (
        0 < len(text) <= _MAX_HEADING_NAME
        and not _ARTICLE.match(text)
        and not _STRUCTURE.match(text)
        and not _CLOSING.match(text)
    )


def is_heading(line: str) -> bool:
    """Whether `line` opens an article or a Libro/Título/Capítulo/Sección."""
    return bool(_ARTICLE.match(line) or _STRUCTURE.match(line))


def split_articles(norm: str, lines: Iterable[str]) -> list[Article]:
    """Articles of `norm` from its text lines (the preamble before the first article is dropped)."""
    path: list[str | None] = [None] * len(_LEVELS)
    drafts: list[_Draft] = []
    pending_level: int | None = None  # a heading line without a name: its name may follow
    naming: int | None = None  # a heading whose name was just read: an all-capitals line continues it
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if _CLOSING.match(line):
            break
        structure = _STRUCTURE.match(line)
        if structure:
            level = _level(structure.group("word"))
            name = structure.group("name").strip()
            path[level] = _heading_text(structure.group("word"), structure.group("num"), name)
            for deeper in range(level + 1, len(_LEVELS)):
                path[deeper] = None
            pending_level = None if name else level
            naming = level if name and name.isupper() else None
            continue
        if pending_level is not None:
            pending, pending_level = pending_level, None
            if _is_name_line(line):
                path[pending] = f"{path[pending]}. {line.rstrip('.')}"
                naming = pending
                continue
        if naming is not None:
            level, naming = naming, None
            if line.isupper() and _is_name_line(line):
                path[level] = f"{path[level]} {line.rstrip('.')}"
                naming = level
                continue
        article = _ARTICLE.match(line)
        if article:
            drafts.append(_start_article(article, line, path))
        elif drafts:
            drafts[-1].lines.append(line)
    articles = [
        Article(norm=norm, number=d.number, suffix=d.suffix, headings=d.headings, text=_join(d.lines)) for d in drafts
    ]
    return check_articles(norm, articles)


def _start_article(article: re.Match[str], line: str, path: list[str | None]) -> _Draft:
    """A new article at its heading: number, suffix (12-A, 12 bis), the headings above it, and any text
    that follows the heading on the same line."""
    letter, latin = article.group("letter"), article.group("latin")
    suffix = f"-{letter}" if letter else f" {latin.lower()}" if latin else ""
    draft = _Draft(int(article.group("num")), suffix, tuple(h for h in path if h))
    rest = line[article.end() :].strip()
    if rest:
        draft.lines.append(rest)
    return draft


def _join(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())
