"""What the indexed norms cannot answer, told from what they are rather than from how questions are worded.

Two kinds of question look constitutional to every retrieval signal and still have no answer in the text:

* **Another country's law.** "¿En Costa Rica a qué edad se vota?" shares every content word with the article on
  Panamanian suffrage. The Constitution is Panama's; a question placed in a foreign jurisdiction (a country,
  capital, US state or city from `gazetteer`, "la ley colombiana", "allá" with a foreign place named, or a foreign
  institution such as "el USCIS") and never in Panama is about some other law. A
  question about foreigners *in* Panama stays in scope: "soy colombiano, ¿puedo votar en Panamá?" names Panama,
  "soy de Colombia" or "un gringo" speak of a person's origin, "nací en Miami" of a birth, "me extraditan a
  Estados Unidos" or "el tratado con Estados Unidos" of an act of the Panamanian state (unless the question opens
  abroad: "en Canadá, ¿a un turista lo pueden deportar...?").
* **Statutory detail.** "¿Cuántos días de vacaciones me tocan?", "¿de cuánto es la multa?": the Constitution
  says that workers have paid holidays and that the law sets fines, never how many days or how much money. A
  question that asks for a quantity (an amount of money, a percentage, a number of some unit, an age, a
  duration, a time of day) is answerable only if one of the articles to be shown states such a quantity
  ("treinta días", "cinco años", "veinte por ciento", "B/. 50.00", "un mes", "dos terceras partes", "la mitad").
  An amount of money is also answered by an article that says which rate applies ("paga la tarifa comercial",
  "la cuota que fije la junta"):
  "¿cuánto me cobran?" asked of a law that sets a rate rather than a figure has that rule for its answer. Only an
  article that hands the amount to some other law ("la Ley fijará las multas"), as the Constitution does, leaves
  it unstated. `ArticleQuantities` reads what each article states, once, from the text; nothing here lists the
  Constitution's numbers by hand.

Both are flags for the abstain rule (`search.Signals`), which weighs them against the cost of refusing an
answerable question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..text import fold, stem, words
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


# --- statutory detail ----------------------------------------------------------------------------------------------

MONEY = "$"
PERCENT = "%"
CLOCK = "clock"
PAPERS = "papers"
CHARGE = "charge"
"""Units that are not words of the text: an amount of money, a percentage, a time of day, the papers an errand
needs ("¿qué papeles piden para ...?": a list an office or a law sets, which an article states only if it lists
documents to be presented), and the rule that sets a charge (an article naming the rate, due or tariff to pay
without handing it to another law), which answers a question about an amount of money as a figure does."""

_TIME_UNITS = frozenset(stem(w) for w in ("años", "meses", "semanas", "días", "horas", "minutos"))
_YEAR = frozenset({stem("años")})
_PERIOD_UNITS = frozenset(stem(w) for w in ("días", "semanas", "meses"))
_PEOPLE = frozenset(stem(w) for w in ("gente", "personas", "ciudadanos", "firmas", "votos", "electores"))
# Counts of people of a kind: "un adulto por cada diez menores" answers "¿cuántas personas tiene que haber?", and
# "más de cuatro huéspedes" answers "¿cuánta gente puedo tener?".
_PERSONS = _PEOPLE | frozenset(
    stem(w)
    for w in """adultos menores niños niñas alumnos estudiantes trabajadores empleados miembros socios propietarios
    dueños inquilinos huéspedes pasajeros usuarios clientes vecinos padres hijos cuidadores""".split()
)

_NUMBER_WORDS = (
    "dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince dieciseis diecisiete dieciocho "
    "diecinueve veinte veintiun veintiuno veintidos veintitres veinticuatro veinticinco veintiseis veintisiete "
    "veintiocho veintinueve treinta cuarenta cincuenta sesenta setenta ochenta noventa cien ciento doscientos "
    "trescientos cuatrocientos quinientos seiscientos setecientos ochocientos novecientos mil millon millones"
).split()
_NUMBER = r"(?:\d+(?:[.,]\d+)*|" + "|".join(_NUMBER_WORDS) + r")"
# A stated quantity in folded text: a number ("treinta y cinco", "setenta y un", "35", "(35)") and its unit. An
# item number ("1. Los ...") is followed by punctuation, not by a unit, so it does not count.
_STATED = re.compile(
    rf"\b{_NUMBER}(?:\s+y\s+(?:{_NUMBER}|un|una|uno))*(?:\s*\(\d+\))?\s+(?:(?P<percent>por\s+ciento|%)|(?P<unit>[a-zñ]+))"
    # "tres perros o gatos": a number of gatos too. Never a number: "dos días y tres meses" states months as well.
    rf"(?:\s+(?:o|u|y|e|ni)\s+(?!(?:{_NUMBER}|un|una|uno)\b)(?P<also>[a-zñ]+))?"
)
# "Un mes", "una semana", "media hora", "un año y medio": one of a unit of time or money is a quantity of it. Only
# those units: "un trabajador" or "una persona" is an indefinite article, not a count.
_ONE = re.compile(
    r"\b(?:un|una|media|medio)\s+(?P<unit>anos?|mes(?:es)?|semanas?|dias?|horas?|minutos?|balboas?|dolar(?:es)?)\b"
)
# A share of something: "la mitad", "dos terceras partes", "la quinta parte", "un tercio", "el doble del alquiler".
_SHARE = re.compile(
    r"\bmitad\b|\btercios?\b|\b(?:tercer|cuart|quint|sext|septim|octav|noven|decim)as?\s+partes?\b"
    r"|\bel\s+(?:doble|triple)\s+del?\b"
)
# A figure after a currency sign: "B/. 50.00", "B/.1,000", "$25", "US$ 10".
_CURRENCY = re.compile(r"(?:\bb/\.?|\$)\s*\d")
# A rate named in a sentence: the tariff, due or fee to pay ("pagan la tarifa comercial", "la cuota que fije la
# junta") says which rule sets the amount. Not every word for money: the Constitution speaks of wages, pensions,
# taxes and fines throughout and states the amount of none, so naming them says nothing of how much. A sentence that
# hands the rate to another law ("las tasas que fije la Ley") does not say it either.
_RATE = re.compile(r"\b(?:tarifas?|cuotas?|tasas?|arancel(?:es)?|canon|honorarios)\b")
_DEFERS = re.compile(r"\b(?:la|una|por|de|las)\s+(?:ley|leyes)\b")
_SENTENCE = re.compile(r"[.;:]\s")
_CLOCK_TIME = re.compile(rf"\ba\s+las\s+{_NUMBER}\b|\b{_NUMBER}\s+de\s+la\s+(?:manana|tarde|noche)\b")
_MONEY_UNITS = frozenset(stem(w) for w in ("balboas", "dólares", "centésimos"))
# An article that asks for documents to be handed in: a document word and a presenting word in one article. Not
# "cédula": the Constitution names it as what a voter shows, beside "presentar", in articles that list no papers.
_DOCUMENT = re.compile(
    r"\b(?:documentos?|papeles|certificados?|certificacion(?:es)?|constancias?|copias?|comprobantes?"
    r"|pasaportes?|carnets?)\b"
)
_PRESENTING = re.compile(r"\b(?:present(?:ar|e|en|ara|aran)|aport(?:ar|e|en)|acompan\w*|adjunt\w*|requisitos?)\b")

_MONEY_VERBS = frozenset(
    "cuesta cuestan costar vale valen cobra cobran cobrar cobro pago pagan pagar paga gana ganan sale salen".split()
)
# Things that are amounts of money whatever else they are: a wage, a pension, a grant, a rent. "¿Cuánto está el
# salario mínimo?" asks for balboas, which an article states only as a figure.
_MONEY_NOUNS = frozenset(
    """multa multas precio precios tarifa tarifas costo costos monto recargo interes intereses itbms pasaje salario
    salarios sueldo sueldos pension pensiones beca becas matricula mensualidad alquiler""".split()
)
_PERCENT_NOUNS = frozenset("porcentaje tasa".split())
_DURATION_WORDS = frozenset("tiempo dura duran durar demora demoran tarda tardan tardar plazo".split())
_QUANTITY = frozenset("cuanto cuanta cuantos cuantas".split())
# "¿Cuánto me toca?", "¿cuánto le corresponde?": someone's share of something, an amount of whatever it is.
_SHARE_VERBS = frozenset("toca tocan corresponde corresponden".split())
# "¿Quién decide cuánto se cobra?" asks who decides, not how much: the quantity is inside an indirect question.
_INDIRECT = frozenset("quien quienes decide deciden fija fijan establece establecen determina determinan".split())
_SKIP = frozenset("de del la el los las se me le te nos les".split())
# "¿Qué papeles piden / necesito / hay que llevar ...?": a request for the papers of an errand.
_PAPER_NOUNS = frozenset("papeles documentos papeleo".split())
_PAPER_VERBS = frozenset(
    """necesito necesita necesitan necesitamos piden pide exigen exige requieren requiere llevo llevar llevamos
    hay tengo tiene tenemos debo debe presento presentar sacar""".split()
)


def stated_units(text: str) -> frozenset[str]:
    """The units that `text` states a quantity of (stems, or `MONEY`, `PERCENT`, `CLOCK`): "treinta días"."""
    # "carné" (an identity or vaccination card) folds to "carne", meat: it is read as a document before folding.
    folded = fold(re.sub(r"\b([Cc])arnés?\b", r"\1arnet", text)).replace("ñ", "n")
    out: set[str] = set()
    for match in _STATED.finditer(folded):
        unit = match.group("unit")
        if unit is None:
            out.add(PERCENT)
            continue
        for word in (unit, match.group("also")):
            if word:
                st = stem(word)
                out.add(MONEY if st in _MONEY_UNITS else st)
    for match in _ONE.finditer(folded):
        # Stemmed as the plural a question asks with ("¿cuántos días?"): the stemmer leaves "día" and "días" apart.
        word = match.group("unit")
        st = stem(word if word.endswith("s") else word + ("es" if word.endswith("r") else "s"))
        out.add(MONEY if st in _MONEY_UNITS else st)
    if _SHARE.search(folded):
        out.add(PERCENT)
    if _CURRENCY.search(folded):
        out.add(MONEY)
    if any(_names_a_charge(sentence) for sentence in _SENTENCE.split(folded)):
        out.add(CHARGE)
    if _CLOCK_TIME.search(folded):
        out.add(CLOCK)
    if _DOCUMENT.search(folded) and _PRESENTING.search(folded):
        out.add(PAPERS)
    return frozenset(out)


def _names_a_charge(sentence: str) -> bool:
    """Whether a folded sentence names the rate to pay without handing it to another law."""
    return bool(_RATE.search(sentence)) and not _DEFERS.search(sentence)


@dataclass(frozen=True, slots=True)
class Asked:
    """A quantity a question asks for: any of `units` answers it, stated in an article that also uses every
    stem of `about` (the "vacaciones" of "cuántos días de vacaciones"). `papers`: it also asks for the papers
    of an errand, which only an article listing documents to present answers, whatever else it states."""

    units: frozenset[str]
    about: frozenset[str] = frozenset()
    papers: bool = False
    plain: frozenset[str] = frozenset()
    """Units asked on their own ("¿desde qué edad?", "¿a qué hora?"): stated anywhere, about anything, they answer,
    even when another quantity of the question is asked of a named thing ("cuántos años de carrera ... y desde
    qué edad")."""


def _how_much(token: str, following: Sequence[str], units: set[str], about: set[str]) -> None:
    """What "cuánto/cuántos ..." asks for, from the (up to six) words that follow it: its units ("cuánto cuesta"
    money, "cuánto tiempo" or "cuánto dura" a duration, "cuánta gente" people) and what the amount is about
    ("cuántos días de vacaciones": vacaciones; "cuánto me toca de prima": prima, `_share_named`)."""
    after = following[:4]
    if any(t in _MONEY_VERBS for t in after):
        units.add(MONEY)
    if any(t in _DURATION_WORDS for t in after):
        units |= _TIME_UNITS
    if token in ("cuantos", "cuantas") and after and after[0] not in ("veces", "tiempo"):
        unit = stem(after[0])
        units |= _PERSONS | {PERCENT} if unit in _PERSONS else {unit}
        if len(after) >= 3 and after[1] == "de" and after[2] not in _SKIP:
            about.add(stem(after[2]))
    if token in ("cuanta", "cuantas") and after and after[0] in ("gente", "personas"):
        units |= _PERSONS | {PERCENT}
    share = _share_named(following) if token == "cuanto" else None
    if share is not None:
        about.add(share)


def _share_named(after: Sequence[str]) -> str | None:
    """The thing whose amount is asked in "¿cuánto me toca de prima?" or "¿cuánto me pagan de la liquidación?".

    Without it, any amount an article states about anything would answer the question."""
    if "de" not in after[:3] or not any(t in _SHARE_VERBS or t in _MONEY_VERBS for t in after[:2]):
        return None  # "¿cuánto tiempo de licencia…?" asks a duration, which an article may state in other words
    named = [t for t in after[after.index("de") + 1 :][:3] if t not in _SKIP]
    return stem(named[0]) if named else None


def _which_is(before: Sequence[str]) -> bool:
    """Whether `before` is "cuál es la", "cuáles son las"…: the noun that follows is asked for, as after "qué"."""
    return (
        len(before) == 3
        and before[0] in ("cual", "cuales")
        and before[1] in ("es", "son", "seria")
        and before[2] in ("el", "la", "los", "las")
    )


def asked_quantity(query: str) -> Asked | None:
    """The quantity (or the papers of an errand) a question asks for, None if it asks for none."""
    tokens = words(query)
    units: set[str] = set()
    plain: set[str] = set()
    about: set[str] = set()
    interrogative = some_amount = indirect = papers = False
    for i, token in enumerate(tokens):
        after = tokens[i + 1 : i + 5]
        before = tokens[max(i - 2, 0) : i]
        indirect |= i > 0 and tokens[i - 1] in _INDIRECT
        if token in _QUANTITY:
            if indirect:
                continue
            interrogative = True
            _how_much(token, tokens[i + 1 : i + 7], units, about)
            # "¿(de) cuánto es / está ...?": some amount, of a kind the rest of the question may name.
            some_amount |= token == "cuanto" and (
                after[:1] in (["es"], ["son"], ["esta"], ["estan"]) or any(t in _SHARE_VERBS for t in after[:2])
            )
        elif token == "edad" and before[-1:] == ["que"]:
            plain |= _YEAR
        elif token == "hora" and before == ["a", "que"]:
            plain.add(CLOCK)
        elif token in _PAPER_NOUNS and before[-1:] in (["que"], ["cuales"]) and any(t in _PAPER_VERBS for t in after):
            papers = True
        elif (interrogative or before[-1:] == ["que"] or _which_is(tokens[max(i - 3, 0) : i])) and not indirect:
            if token in _MONEY_NOUNS:
                units.add(MONEY)
            elif token in _PERCENT_NOUNS:
                units.add(PERCENT)
    return _asked(units, plain, about, papers, some_amount)


def _asked(units: set[str], plain: set[str], about: set[str], papers: bool, some_amount: bool) -> Asked | None:
    """What `asked_quantity` read, as an `Asked` (None if it read no quantity and no papers)."""
    if some_amount and not units and not plain:  # "¿de cuánto es ...?" and nothing says of what: any amount
        units = units | _TIME_UNITS | {MONEY, PERCENT}
    if not (units or plain or papers):
        return None
    return Asked(frozenset(units | plain), frozenset(about), papers, frozenset(plain))


class ArticleQuantities:
    """For each article (by position), the units its text states a quantity of and its stems; read once."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._units = [stated_units(t) for t in texts]
        self._stems = [frozenset(stem(w) for w in words(t)) for t in texts]

    def unstated(self, asked: Asked | None, positions: Sequence[int]) -> bool:
        """Whether a question asking for `asked` gets it from none of the articles at `positions`."""
        if asked is None:
            return False
        if asked.papers and not any(PAPERS in self._units[p] for p in positions):
            return True
        # An amount of money is stated as a figure or as the rate that applies; a period in days, weeks or months
        # in any of them ("¿cuántos días?": "un mes"). Hours measure a working day, not a period of days, and
        # "¿cuántos años?" asks an age as often as a period: they stay apart.
        units = asked.units | {CHARGE} if MONEY in asked.units else asked.units
        if units & _PERIOD_UNITS:
            units = units | _PERIOD_UNITS
        return bool(units) and not any(
            asked.plain & self._units[p] or (units & self._units[p] and asked.about <= self._stems[p])
            for p in positions
        )
