"""What the agent cites, and whether the evidence it was given in this conversation says it.

An invented article number is the costly failure of legal research by voice: the user acts on "el artículo 74
dice…" while the sources on screen said nothing of the kind. The instructions ask the model to cite only what the
search returned; this module checks that it did, on the words it actually speaks.

Reading (`find_citations`) works on the text as `spoken_numbers.prepare` gives it (numbers in words as digits
through text2num, every character mapped back to the words said, so a citation's `said` is the agent's own words,
"artículo setenta y cuatro de la Constitución", which the page finds in the transcript); norms are recognised and
keyed in `norm_names`. A citation is an article number in one of these forms, and nothing else:

- after "artículo(s)" / "art." / "arts.": "artículo 74", "artículo setenta y cuatro", "artículo décimo tercero",
  "artículo 12-A", "artículo doce A", "artículo doce be" (a letter by its name), "artículo 12 bis"; lists
  "artículos 3, 4 y 5", "artículos 3 y el 4", "tanto el artículo 12-A como el 12-B", "no es el 41 sino el 43";
  ranges "del artículo 10 al 12", which cite every article in them (a lawyer means them all), or their two ends
  only when they span more than 20 articles or an end has a letter;
- a bare number (or list) with a norm right after it: "el 74 de la Constitución", "el 12 y el 13 del Código de
  Trabajo", "el 74 constitucional", and "… y 12 del Código de Trabajo" right after another citation;
- a bare number right where a citation's words end, after "y también", "así como", "al igual que"…: "el artículo
  224 del Código Penal, y también el 225" (that citation's norm, unless it names its own); "y también el 3 de
  noviembre" stays a date;
- "y el N" later in a citation's sentence, said as a cardinal: "el artículo 70 de la Constitución protege la
  familia, y el 74 complementa eso" (that citation's norm, unless it names its own); "y el 10 %", "y el 3 de
  mayo", "y el 2002", "y el primero" are no articles.

"Numeral 2 del artículo 40", "inciso b" and the like cite the article (40); a sub-unit alone cites nothing.
Numbers anywhere else (ages, years, amounts, dates, "dos veces", "3 de noviembre", phone numbers) are never
citations, and neither is a norm named without an article ("según la ley", "la Ley 6 de 2002").

Which norm an article belongs to, in this order:

1. the norm linked right after it by "de"/"del", or "en" after "artículo" ("un artículo 12 bis en la Ley 6 de
   2002"; sub-units between are skipped): "el artículo 3 de la Ley 6 de
   2002", "los artículos 3 y 4 de la Constitución" (a list or range shares it), "artículo 40, numeral 2, del
   Código de Trabajo", "artículo 215 y siguientes del Código Penal", or "constitucional";
2. "de la misma ley", "de dicha ley", "de esa norma", "del mismo código"…: the last norm named before it, in this
   text or, failing that, earlier in the conversation (`CitationCheck` remembers it); "del mismo código le da…" is
   that norm too, not a code called "le" ("de dicho Código de Comercio", with its "de", names a code);
3. otherwise the last norm named before it in the same text, as a listener hears it: "la Ley 6 de 2002, artículo
   3", "la Constitución, en su artículo 74", "la Ley 6 de 2002 regula el permiso; el artículo 3 dice…";
4. "su artículo 8, la Ley 45 de 2032…" with no norm before it: the norm named next in its sentence;
5. otherwise none: the article was said alone.

Matching (`CitationCheck`): a citation is verified when a source delivered to the model earlier in the same
conversation (any tool call, not only the last) holds the same article of the same norm; a numbered norm said
without its year matches that number of any year. A citation that names no norm is verified when any delivered
source has that article. A right article of the wrong norm is not verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent.voice.norm_names import (
    CONSTITUTION,
    MONTHS,
    NUMBER_MARK,
    REFERRING,
    Norm,
    norm_key,
    norms_in,
    norms_match,
)
from agent.voice.spoken_numbers import NUMBER_AHEAD, Prepared, article_number, fold, prepare

_ARTICLE_HEAD = re.compile(rf"\b(?:articulos?|arts?\.?)\s*{NUMBER_MARK}(?:(?:del|de\s+los|los)\s+)?{NUMBER_AHEAD}")
_BARE_HEAD = re.compile(r"\b(?:el|del|al|los|y)\s+(?=\d)")
# The step to the next article of a list or range: "3, 4 y 5", "41 sino el 43", "tanto el 12-A como el 12-B",
# "3 al 5" (a range: `range` is set).
_LIST_NEXT = re.compile(
    r"\s*(?:,\s*(?:y\s+|e\s+|sino\s+)?|\s+(?:y|e|o|u|sino)\s+|\s+como\s+(?=el\s|los\s|art)"
    r"|\s+(?P<range>al|a|hasta(?:\s+el)?)\s+)(?:(?:el|los|del)\s+)?"
    rf"(?:(?:articulos?|arts?\.?)\s+)?{NUMBER_AHEAD}"
)
# A number followed by one of these is a quantity, a date or a sub-unit, never a listed article.
_NOT_AN_ARTICLE_AFTER = re.compile(
    rf"\s*(?:%|por\s+(?:ciento|100)\b|(?:anos?|dias?|mes|meses|semanas?|horas?|minutos?|veces|vez|balboas?|"
    rf"dolares?|personas?|trabajadores?|metros?|kilometros?|hectareas?|mil|millones?|parrafos?|incisos?|"
    rf"numerales?|literales?|apartados?|de\s+(?:{MONTHS}|cada))\b)"
)
_SUB_UNITS = r"numeral|inciso|subinciso|literal|ordinal|parrafo|acapite|apartado|letra"
_SUB_UNIT = re.compile(
    rf"(?:\s*,)?\s+(?:(?:{_SUB_UNITS})\s+(?:\d{{1,3}}(?:\.?\s?°)?|[a-z]\b|primero|segundo|tercero|cuarto|quinto|"
    rf"ultimo)|(?:\d{{1,3}}(?:\.?\s?°)?|primer|segundo|tercer|cuarto|quinto|ultimo)\s+(?:{_SUB_UNITS}))\b"
    r"(?:\s*,(?=\s*del?\s))?|\s+y\s+(?:siguientes|ss\.)"
)
_LINK = re.compile(r"\s*,?\s*(?:de|del|(?P<en>en))\s+(?:(?:la|el|los|las|nuestra|nuestro|actual|vigente)\s+)*")
_CONSTITUTIONAL = re.compile(r"\s+constitucional(?:es)?\b")
_ANAPHORA = re.compile(
    rf"(?P<dem>{REFERRING})\b"
    r"(?:\s+(?P<noun>ley|norma|codigo|constitucion|carta\s+magna|decreto|resolucion|acuerdo)\b)?"
)
# Words that add an article to the citation just made ("…, y también el 225", "…, así como el 75").
_CONTINUATION = re.compile(
    r"\s*,?\s*(?:y\s+tambien|y\s+asimismo|y\s+ademas|[ey]\s+igualmente|asi\s+como(?:\s+tambien)?|como\s+tambien"
    rf"|al\s+igual\s+que)\s+(?:el|los|al|del)\s+{NUMBER_AHEAD}"
)
# "y el 74" later in a citation's sentence, a citation of its norm when it is not a quantity, a date or a year.
_AND_THE = re.compile(rf"\by\s+(?:el|los)\s+{NUMBER_AHEAD}")
_YEARS = (1800, 2099)
_DIGIT = re.compile(r"\d")
_SENTENCE_BREAK = re.compile(r"[.;:!?]")
_POSSESSIVE = re.compile(r"\bsus?\s*\Z")
# How far before an article a norm may stand and still be quoted with it in `Citation.said`.
_SAID_WINDOW = 40
# The widest range whose every article is cited ("del 10 al 30"); a wider one cites its two ends.
_RANGE_SPAN = 20


@dataclass(frozen=True, slots=True)
class Citation:
    """One article the agent named, as said and as keyed for matching."""

    said: str
    """The words as said, a substring of the checked text (case, accents and numbers in words as they were), from
    the article to its norm when the norm was named with it; an article of a list carries the whole list."""
    article: str
    """The article as sources write it: "74", "12-A", "12 bis"."""
    norm: str | None
    """The norm's key ("constitucion", "ley 6 de 2002", "codigo de trabajo"), or None when no norm goes with it."""


@dataclass(frozen=True, slots=True)
class CheckedCitation:
    """A citation and what the evidence says of it."""

    citation: Citation
    verified: bool
    source: str | None = None
    """The citation of the delivered source that holds it, as the source wrote it (the page links its card)."""
    call_id: str | None = None
    """The tool call that delivered that source."""


def source_key(citation: str) -> tuple[str | None, str] | None:
    """(norm key, article) of a source's citation ("NORM, artículo 12-A"); None if it names no article. A norm
    that is no law, decree, code or Constitution is keyed by its folded name."""
    norm, sep, article = citation.rpartition(",")
    if not sep:
        return None
    prepared = prepare(article)
    original, low = prepared.original, prepared.low
    head = _ARTICLE_HEAD.search(low)
    parsed = article_number(original, low, head.end()) if head else None
    if parsed is None:
        return None
    return norm_key(norm) or fold(norm), parsed[0]


def article_key(label: str) -> str:
    """One key for an article label however written: "12-A", "12 a", "12A" and "12-a" agree; "12 bis" too."""
    return " ".join(fold(label).replace("-", " ").replace("°", "").split()).replace(" ", "")


def find_citations(text: str, *, earlier_norm: str | None = None) -> list[Citation]:
    """Every article the text names, with its norm, in order. `earlier_norm` is the last norm named before this
    text in the conversation, for "de la misma ley" when the text itself names none."""
    return _read(text, earlier_norm)[0]


def _read(text: str, earlier_norm: str | None) -> tuple[list[Citation], str | None]:
    """The citations in `text`, and the last norm it names (or `earlier_norm` when it names none)."""
    prepared = prepare(text)
    original, low = prepared.original, prepared.low
    norms = norms_in(low, earlier_norm)
    starts = {n.start: n for n in norms}
    found: list[tuple[int, Citation]] = []
    groups: list[tuple[int, int]] = []
    tails: list[tuple[int, str | None]] = []  # where each citation's words end, and its norm
    for head in _ARTICLE_HEAD.finditer(low):
        if groups and head.start() < groups[-1][1]:
            continue
        group = _article_group(original, low, head.end())
        if group is None:
            continue
        articles, end = group
        groups.append((head.start(), end))
        cited, tail, norm = _cite(prepared, head.start(), end, articles, norms, starts, earlier_norm, en=True)
        found.extend(cited)
        tails.append((tail, norm))
    for bare in _BARE_HEAD.finditer(low):
        if any(s <= bare.start() < e for s, e in groups):
            continue
        if bare.group(0).startswith("y") and not any(0 <= bare.start() - e <= _SAID_WINDOW for _, e in groups):
            continue  # "y 12 del Código" continues a citation; "capítulos 2 y 3 de la Constitución" does not
        group = _article_group(original, low, bare.end())
        if group is None:
            continue
        articles, end = group
        if _follows(low, end, starts, norms, earlier_norm) is None:
            continue  # "el 3 de noviembre": a bare number is an article only with its norm right after it
        groups.append((bare.start(), end))
        cited, tail, norm = _cite(prepared, bare.end(), end, articles, norms, starts, earlier_norm)
        found.extend(cited)
        tails.append((tail, norm))
    found.extend(_continued(prepared, tails, groups, norms, starts, earlier_norm))
    found.extend(_and_the(prepared, tails, groups, norms, starts, earlier_norm))
    found.sort(key=lambda item: item[0])
    last = norms[-1].key if norms else earlier_norm
    return [c for _, c in found], last


def _article_group(original: str, low: str, pos: int) -> tuple[list[str], int] | None:
    """The articles of one list or range said from `pos` ("3, 4 y 5", "3 al 5"), and where it ends. A range
    cites every article in it ("del 10 al 12" is 10, 11 and 12: a lawyer means them all) up to `_RANGE_SPAN`
    apart; a longer one, or one with a lettered end, cites its two ends."""
    first = article_number(original, low, pos)
    if first is None or _NOT_AN_ARTICLE_AFTER.match(low, first[1]):
        return None
    articles, end = [first[0]], first[1]
    while (step := _LIST_NEXT.match(low, end)) is not None:
        parsed = article_number(original, low, step.end())
        if parsed is None or _NOT_AN_ARTICLE_AFTER.match(low, parsed[1]):
            break
        low_end, high_end = articles[-1], parsed[0]
        if step.group("range") and low_end.isdigit() and high_end.isdigit():
            if 0 < int(high_end) - int(low_end) <= _RANGE_SPAN:
                articles.extend(str(n) for n in range(int(low_end) + 1, int(high_end)))
        articles.append(parsed[0])
        end = parsed[1]
    return articles, end


def _follows(
    low: str, pos: int, starts: dict[int, Norm], norms: list[Norm], earlier: str | None, *, en: bool = False
) -> tuple[str, int] | None:
    """The norm linked right after an article ending at `pos` ("… de la Ley 6", "… constitucional"), if any, and
    where the words that link it end. With `en` (an article said as one), "en la Ley 6" links it too; a bare
    number before "en la Ley 6" ("se reformó el 2010 en la Ley 6") is no article."""
    while (sub := _SUB_UNIT.match(low, pos)) is not None:
        pos = sub.end()
    if constitutional := _CONSTITUTIONAL.match(low, pos):
        return CONSTITUTION, constitutional.end()
    link = _LINK.match(low, pos)
    if link is None or (link.group("en") and not en):
        return None
    at = link.end()
    if at in starts:
        return starts[at].key, starts[at].end
    anaphora = _ANAPHORA.match(low, at)
    if anaphora is None:
        return None
    if anaphora.group("noun") is None:  # "de la misma." refers; "de la misma forma", "de esta manera" do not
        if anaphora.group("dem") not in ("misma", "mismo") or not _ends_phrase(low, anaphora.end()):
            return None
    elif anaphora.start("noun") in starts:  # "de esta Ley 6 de 2002": named, not referred to
        named = starts[anaphora.start("noun")]
        return named.key, named.end
    before = [n for n in norms if n.end <= pos]
    referred = before[-1].key if before else earlier
    return (referred, anaphora.end()) if referred is not None else None


def _ends_phrase(low: str, pos: int) -> bool:
    return pos >= len(low) or low[pos] in ",.;:)!?"


def _cite(
    prepared: Prepared,
    start: int,
    end: int,
    articles: list[str],
    norms: list[Norm],
    starts: dict[int, Norm],
    earlier: str | None,
    *,
    en: bool = False,
) -> tuple[list[tuple[int, Citation]], int, str | None]:
    """The citations of one article group spanning low[start:end], each with the group's norm; where the words
    quoted for them end, and that norm."""
    low = prepared.low
    linked = _follows(low, end, starts, norms, earlier, en=en)
    said_start, said_end = start, end
    if linked is not None:
        norm: str | None
        norm, said_end = linked
    else:
        before = [n for n in norms if n.end <= start]
        norm = before[-1].key if before else None
        if before and start - before[-1].end <= _SAID_WINDOW and not _SENTENCE_BREAK.search(low, before[-1].end, start):
            said_start = before[-1].start
        elif not before and _POSSESSIVE.search(low, 0, start):
            # "Según su artículo 8, la Ley 45 de 2032 exige…": "su" points ahead, to the norm of its sentence
            ahead = next((n for n in norms if n.start >= end), None)
            if ahead is not None and not _SENTENCE_BREAK.search(low, end, ahead.start):
                norm, said_end = ahead.key, ahead.end
    said = prepared.given(said_start, said_end)
    return [(said_start, Citation(said=said, article=a, norm=norm)) for a in articles], said_end, norm


def _continued(
    prepared: Prepared,
    tails: list[tuple[int, str | None]],
    groups: list[tuple[int, int]],
    norms: list[Norm],
    starts: dict[int, Norm],
    earlier: str | None,
) -> list[tuple[int, Citation]]:
    """Bare articles that continue a citation right where its words end ("el artículo 224 del Código Penal, y
    también el 225", "…, así como el 75"): the same norm, unless they name their own. A date or an amount there
    ("y también el 3 de noviembre") is no article, as everywhere."""
    low = prepared.low
    out: list[tuple[int, Citation]] = []
    pending = sorted(tails, key=lambda tail: tail[0])
    while pending:
        pos, norm = pending.pop(0)
        while (sub := _SUB_UNIT.match(low, pos)) is not None:
            pos = sub.end()
        step = _CONTINUATION.match(low, pos)
        if step is None or any(s <= step.end() < e for s, e in groups):
            continue
        group = _article_group(prepared.original, low, step.end())
        if group is None:
            continue
        articles, end = group
        said_end = end
        linked = _follows(low, end, starts, norms, earlier)
        if linked is not None:
            norm, said_end = linked
        groups.append((step.end(), end))
        said = prepared.given(step.end(), said_end)
        out.extend((step.end(), Citation(said=said, article=a, norm=norm)) for a in articles)
        pending.append((said_end, norm))
    return out


def _and_the(
    prepared: Prepared,
    tails: list[tuple[int, str | None]],
    groups: list[tuple[int, int]],
    norms: list[Norm],
    starts: dict[int, Norm],
    earlier: str | None,
) -> list[tuple[int, Citation]]:
    """A "y el N" later in the sentence of a citation ("El artículo 70 de la Constitución protege la familia, y el
    74 complementa eso"): an article of that citation's norm, unless it names its own. Said as a cardinal only
    ("y el primero", "y el segundo" are an order), and never a quantity, a date or a year ("y el 10 %", "y el 3
    de mayo", "y el 2002")."""
    low = prepared.low
    out: list[tuple[int, Citation]] = []
    for m in _AND_THE.finditer(low):
        if any(s <= m.end() < e for s, e in groups):
            continue
        before = [t for t in tails if t[0] <= m.start() and not _SENTENCE_BREAK.search(low, t[0], m.start())]
        if before and _DIGIT.search(low, max(before)[0], m.start()):
            continue  # "… da 30 días y el 15 es feriado", "el 1 y el 2": it pairs with the number before it
        group = _article_group(prepared.original, low, m.end()) if before else None
        if group is None:
            continue
        articles, end = group
        if not low[m.end()].isdigit() or "°" in low[m.end() : end]:
            continue  # "y el 1°" (primero), "y el segundo": an order, not an article
        linked = _follows(low, end, starts, norms, earlier)
        if linked is None and any(_YEARS[0] <= int(a) <= _YEARS[1] for a in articles if a.isdigit()):
            continue
        norm, said_end = linked or (max(before)[1], end)
        groups.append((m.end(), end))
        tails.append((said_end, norm))
        said = prepared.given(m.end(), said_end)
        out.extend((m.end(), Citation(said=said, article=a, norm=norm)) for a in articles)
    return out


class CitationCheck:
    """The sources delivered to the model in one conversation, and the check of what the agent says against them."""

    def __init__(self) -> None:
        # article key -> (norm key, the source's citation, call id), in delivery order
        self._delivered: dict[str, list[tuple[str | None, str, str]]] = {}
        self._last_norm: str | None = None

    def deliver(self, call_id: str, citations: Iterable[str]) -> None:
        """Sources the model was given (their `citation` strings), from the tool call `call_id`."""
        for citation in citations:
            key = source_key(citation)
            if key is None:
                continue
            held = self._delivered.setdefault(article_key(key[1]), [])
            if all(norm != key[0] for norm, _, _ in held):
                held.append((key[0], citation, call_id))

    def check(self, text: str) -> list[CheckedCitation]:
        """Each citation in `text`, verified when a delivered source holds that article (of that norm, if named)."""
        citations, self._last_norm = _read(text, self._last_norm)
        return [self._checked(c) for c in citations]

    def _checked(self, citation: Citation) -> CheckedCitation:
        held = self._delivered.get(article_key(citation.article), [])
        if citation.norm is not None:
            held = [h for h in held if h[0] is not None and norms_match(citation.norm, h[0])]
        if not held:
            return CheckedCitation(citation, verified=False)
        _, source, call_id = held[-1]  # the latest delivery: its card is the one most likely on screen
        return CheckedCitation(citation, verified=True, source=source, call_id=call_id)
