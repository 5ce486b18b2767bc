"""What the agent cites, and whether the evidence it was given in this conversation says it.

An invented article number is the costly failure of legal research by voice: the user acts on "el artículo 74
dice…" while the sources on screen said nothing of the kind. The instructions ask the model to cite only what the
search returned; this module checks that it did, on the words it actually speaks.

`find_citations` reads a norm and article out of spoken Spanish ("el artículo setenta y cuatro de la
Constitución", "la ley seis de dos mil dos, artículo tres", "el 74 de la Constitución"); spelled-out numbers are
turned into digits by text2num, the library made for it. `CitationCheck` keeps the citations of every source
delivered to the model in the conversation and says, for each citation the agent speaks, whether one of them
holds it: the same article of the same norm, or, when the agent names no norm, the same article of any norm
delivered. A right article of the wrong norm is not verified.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from text_to_num import alpha2digit

CONSTITUTION = "constitucion"
"""How a citation of the Constitution is keyed, whatever the words: "la Constitución", "la Constitución Política
de la República de Panamá", "la carta magna"."""

_CONSTITUTION_WORDS = re.compile(r"\b(?:constitucion(?: politica)?(?: de la republica de panama)?|carta magna)\b")
_LAW = re.compile(r"\bley(?:\s+(?:n(?:o|umero|um)\.?|n\.?o\.?))?\s+(\d{1,4})\s+de\s+(\d{4})\b")
_ARTICLE = re.compile(r"\b(?:articulos?|art\.)\s+(\d{1,4})(?:\s*-?\s*([a-z])\b(?!\s+(?:la|el|los|las|de)\b))?")
_NORM_SPAN = re.compile(rf"(?:{_CONSTITUTION_WORDS.pattern})|(?:{_LAW.pattern})")
# How far from an article a norm may be named and still be its norm: "el artículo 3 de la Ley 6 de 2002",
# "la Ley 6 de 2002, en su artículo 3".
_NORM_WINDOW = 60


@dataclass(frozen=True, slots=True)
class Citation:
    """One article the agent named, as said and as keyed for matching."""

    said: str
    """The words as spoken, from the article to its norm when the norm was named next to it."""
    article: str
    """The article as sources write it: "74", "12-A"."""
    norm: str | None
    """The norm's key ("constitucion", "ley 6 de 2002"), or None when no norm was named next to the article."""


@dataclass(frozen=True, slots=True)
class CheckedCitation:
    """A citation and what the evidence says of it."""

    citation: Citation
    verified: bool
    source: str | None = None
    """The citation of the delivered source that holds it, as the source wrote it (the page links its card)."""
    call_id: str | None = None
    """The tool call that delivered that source."""


def fold(text: str) -> str:
    """Lowercase, accents off, spaces collapsed: spoken transcripts and source citations meet here."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def norm_key(name: str) -> str | None:
    """The key of a norm's name as a source writes it ("Ley 6 de 2002", "Constitución Política de la República de
    Panamá"), None when it is neither a law nor the Constitution."""
    folded = fold(alpha2digit(name, "es"))
    if _CONSTITUTION_WORDS.search(folded):
        return CONSTITUTION
    law = _LAW.search(folded)
    return f"ley {int(law.group(1))} de {law.group(2)}" if law else None


def source_key(citation: str) -> tuple[str | None, str] | None:
    """(norm key, article) of a source's citation ("NORM, artículo 12-A"); None if it names no article."""
    norm, sep, article = citation.rpartition(",")
    found = _ARTICLE.search(fold(article)) if sep else None
    if found is None:
        return None
    return norm_key(norm), _article(found)


def _article(match: re.Match[str]) -> str:
    number, letter = match.group(1), match.group(2)
    return f"{int(number)}-{letter.upper()}" if letter else str(int(number))


def find_citations(text: str) -> list[Citation]:
    """Every article the text names, with the norm named next to it (before or after), in order."""
    spoken = fold(alpha2digit(text, "es"))
    norms = [(m.start(), m.end(), _norm_of(m)) for m in _NORM_SPAN.finditer(spoken)]
    out: list[Citation] = []
    for m in _ARTICLE.finditer(spoken):
        after = [n for n in norms if 0 <= n[0] - m.end() <= _NORM_WINDOW]
        before = [n for n in norms if 0 <= m.start() - n[1] <= _NORM_WINDOW]
        near = after[0] if after else (before[-1] if before else None)
        start, end = (m.start(), near[1]) if near and near in after else (near[0] if near else m.start(), m.end())
        out.append(Citation(said=spoken[start:end], article=_article(m), norm=near[2] if near else None))
    return out


def _norm_of(match: re.Match[str]) -> str:
    text = match.group(0)
    law = _LAW.search(text)
    return f"ley {int(law.group(1))} de {law.group(2)}" if law else CONSTITUTION


class CitationCheck:
    """The sources delivered to the model in one conversation, and the check of what the agent says against them."""

    def __init__(self) -> None:
        self._delivered: dict[tuple[str | None, str], tuple[str, str]] = {}

    def deliver(self, call_id: str, citations: Iterable[str]) -> None:
        """Sources the model was given (their `citation` strings), from the tool call `call_id`."""
        for citation in citations:
            key = source_key(citation)
            if key is not None:
                self._delivered.setdefault(key, (citation, call_id))

    def check(self, text: str) -> list[CheckedCitation]:
        """Each citation in `text`, verified when a delivered source holds that article (of that norm, if named)."""
        return [self._checked(c) for c in find_citations(text)]

    def _checked(self, citation: Citation) -> CheckedCitation:
        if citation.norm is not None:
            hit = self._delivered.get((citation.norm, citation.article))
        else:
            hit = next((v for (_, art), v in self._delivered.items() if art == citation.article), None)
        if hit is None:
            return CheckedCitation(citation, verified=False)
        return CheckedCitation(citation, verified=True, source=hit[0], call_id=hit[1])
