"""What the indexed norms cannot answer, told from what they are rather than from how questions are worded.

A question can look constitutional to every retrieval signal and still have no answer in the text:

* **Another country's law.** "¿En Costa Rica a qué edad se vota?" shares every content word with the article on
  Panamanian suffrage. The Constitution is Panama's; a question placed in a foreign jurisdiction (a country,
  capital, US state or city from `gazetteer`, "la ley colombiana", "allá" with a foreign place named, or a foreign
  institution such as "el USCIS") and never in Panama is about some other law. A
  question about foreigners *in* Panama stays in scope: "soy colombiano, ¿puedo votar en Panamá?" names Panama,
  "soy de Colombia" or "un gringo" speak of a person's origin, "nací en Miami" of a birth, "me extraditan a
  Estados Unidos" or "el tratado con Estados Unidos" of an act of the Panamanian state (unless the question opens
  abroad: "en Canadá, ¿a un turista lo pueden deportar...?").

A second rule once refused a question asking for a quantity (days, an amount, an age) that none of the articles to
be shown stated. On questions written after it, about the Constitution and about a fresh law, it refused answerable
questions whose articles state the quantity in words or set a charge by naming the rate that applies, and a fix in
general terms still refused some, so it was removed (figures: research/search/ablation.md).

The flag feeds the abstain rule (`search.Signals`), which weighs it against the cost of refusing an answerable
question.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..text import words
from .gazetteer import DEMONYMS, INSTITUTIONS, PLACES

# --- another country's law -------------------------------------------------------------------------------------

# Words that place a question in Panama. "nuestro país" does; the pronoun "nos" does not ("nos vamos a mudar a
# Montreal" is about Canada), so it is not here.
_PANAMA = frozenset(
    """panama panameno panamena panamenos panamenas istmo istmeno istmena aqui aca nuestro nuestra nuestros
    nuestras""".split()
)
# Before "en <place>": a birth there is a fact about a person, not the jurisdiction of the question.
_BIRTH = frozenset("naci nacio nacido nacida nacidos nacidas nacer nace nacen naciera nacieron nacimos".split())
# Before "de <place>": a person's origin ("soy de Colombia", "gente de Venezuela"), not the jurisdiction.
_ORIGIN = frozenset(
    """soy es eres somos son sea sean era vengo viene vienen venimos llegue llego llegaron oriundo oriunda
    originario originaria nativo nativa ciudadano ciudadana ciudadanos ciudadanas nacional nacionales inmigrante
    inmigrantes migrante migrantes extranjero extranjera extranjeros extranjeras refugiado refugiada refugiados
    persona personas gente familia hijo hija hijos hijas esposo esposa novio novia pareja""".split()
)
# Acts of the Panamanian state towards another country: extradition, deportation, expulsion, treaties.
_RELATION_PREFIXES = ("extradi", "deport", "expuls", "tratado", "convenio")
# Nouns of a legal order or its institutions: "la ley colombiana", "el gobierno venezolano".
_INSTITUTIONS = frozenset(
    """ley leyes constitucion codigo codigos gobierno presidente presidenta congreso senado camara parlamento
    policia corte cortes tribunal tribunales justicia estado legislacion sistema ejercito elecciones normas reglas
    derecho""".split()
)


# "Allá" points at a place away from the caller: with a foreign place or people named and Panama not, the question is
# set there ("me voy pa Alemania, ¿allá cobran la universidad?"), whatever the words around the place's name.
_THERE = frozenset("alla alli".split())

# Verbs whose subject, last in the question, is a legal order: "¿cuántos senadores tiene Estados Unidos?".
_ORDER_VERBS = frozenset("tiene tienen permite permiten prohibe prohiben exige exigen obliga aplica".split())


def _tokens(query: str) -> list[str]:
    return [w.replace("ñ", "n") for w in words(query)]


class _Names:
    """Finds the names of a set (folded, one or more words) in a question's tokens.

    Each first word maps to the most words a name starting with it has, so a question is scanned only where a name
    can start: a few n-grams instead of every n-gram up to the longest name."""

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self._longest: dict[str, int] = {}
        for name in names:
            first, *rest = name.split()
            self._longest[first] = max(self._longest.get(first, 0), 1 + len(rest))
        self._most = max(self._longest.values(), default=0)

    def spans(self, tokens: Sequence[str]) -> Iterable[tuple[int, int]]:
        """(start, end) of each name in `tokens`, longest names first, without overlaps."""
        starts = [(i, self._longest[t]) for i, t in enumerate(tokens) if t in self._longest]
        covered = [False] * len(tokens)
        for size in range(self._most, 0, -1):
            for start, most in starts:
                if size > most or start + size > len(tokens) or any(covered[start : start + size]):
                    continue
                if " ".join(tokens[start : start + size]) in self._names:
                    covered[start : start + size] = [True] * size
                    yield start, start + size


_PLACES = _Names(PLACES)
_FOREIGN_INSTITUTIONS = _Names(INSTITUTIONS)


def _jurisdiction_cue(tokens: Sequence[str], start: int, end: int) -> bool:
    """Whether the place at [start, end) is where the question is set: "en Costa Rica", "la ley de Colombia",
    "Venezuela todavía tiene ...", "¿cuántos senadores tiene Estados Unidos?"; but not "nací en Miami", "soy de
    Colombia" or "me mandan a Colombia"."""
    if start == 0:
        return True
    prev = tokens[start - 1]
    before = start - 1
    if prev in ("el", "la", "los", "las") and start >= 2:
        prev, before = tokens[start - 2], start - 2
    if prev == "en":
        return before == 0 or tokens[before - 1] not in _BIRTH
    if prev in ("de", "del"):
        return before > 0 and tokens[before - 1] not in _ORIGIN
    return prev in _ORDER_VERBS and end == len(tokens)


def foreign_jurisdiction(query: str) -> bool:
    """Whether `query` is set in another country's legal order and nowhere says it is about Panama."""
    tokens = _tokens(query)
    if any(t in _PANAMA for t in tokens):
        return False
    spans = list(_PLACES.spans(tokens))
    # "En Estados Unidos, ¿a un extranjero lo pueden deportar por...?" opens abroad: the deportation is theirs.
    opens_abroad = any(start == 1 and tokens[0] == "en" for start, _ in spans)
    if not opens_abroad and any(t.startswith(_RELATION_PREFIXES) for t in tokens):
        return False
    if any(_jurisdiction_cue(tokens, start, end) for start, end in spans):
        return True
    if any(t in _THERE for t in tokens) and (spans or any(t in DEMONYMS for t in tokens)):
        return True
    # A foreign institution ("el uscis me negó...", "la registraduría me tiene la cédula cancelada") is that
    # country's administration acting, wherever the caller is; Panama named or an act of its state is ruled out above.
    if next(iter(_FOREIGN_INSTITUTIONS.spans(tokens)), None) is not None:
        return True
    return any(t in DEMONYMS and i > 0 and tokens[i - 1] in _INSTITUTIONS for i, t in enumerate(tokens))
