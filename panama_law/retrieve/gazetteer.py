"""Places whose law is not Panama's: countries, their demonyms and capitals, the states of the United States and
foreign cities and regions that Panamanians travel to or come from, written in Spanish; and foreign institutions.

It serves `scope.foreign_jurisdiction`, which tells a question about another country's law ("en Costa Rica ...",
"la ley colombiana ...") from a question about foreigners in Panama ("soy colombiano, ¿puedo votar?"). All of it is
data in `panama_law/data/`, described with its source in `data/FOREIGN_PLACES.md`:

* `foreign_countries.txt`: 76 countries and territories as Spanish names them, with their usual gentilicios and
  capitals, the states of the United States and 18 foreign cities often named in Panama; general knowledge,
  written out by hand with the first version of the foreign-law rule, not drawn from any question set. It is not
  every sovereign state: most of the Americas and Europe, and the larger or more often named countries elsewhere.
* `foreign_cities.txt` (cities and regions) and `foreign_institutions.txt` (the institutions, documents and
  programs callers name: "el uscis", "la registraduría", "la green card"), written later, from general knowledge,
  by a writer who saw no question set and no code, with everything Panama shares left out.

Left out on purpose, because the same words name Panamanian places or everyday things: Panamá itself, Colón,
Santiago, David, San Juan, La Paz ("la paz"), Santo Domingo, San José, Victoria. India's demonym "indio/india" is
left out (in Panama it names indigenous people, whom the Constitution speaks of); the country is kept as "la India".

`foreign_countries.txt` is `names | demonym forms | capitals and other places` a line, names and places separated
by "/"; the other two files are `country | name` a line. Names are folded (lowercase, no accents, ñ as n) when read,
and a line of another shape is an error naming its file and line.
"""

from __future__ import annotations

from importlib import resources

from ..text import words


def _fold_phrase(text: str) -> str:
    return " ".join(w.replace("ñ", "n") for w in words(text))


def _rows(filename: str, fields: int) -> list[list[str]]:
    """The `|`-separated rows of `panama_law/data/<filename>` (package data, so an installed wheel finds it too),
    each with exactly `fields` stripped fields; blank lines and `#` comment lines are skipped."""
    text = resources.files("panama_law").joinpath("data", filename).read_text(encoding="utf-8")
    rows: list[list[str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        row = [field.strip() for field in line.split("|")]
        if len(row) != fields or not row[0] or not any(row[1:]):
            raise ValueError(f"{filename}, line {number}: expected {fields} fields separated by '|': {line!r}")
        rows.append(row)
    return rows


def _names(filename: str) -> frozenset[str]:
    """The names of a `country | name` data file, folded."""
    return frozenset(_fold_phrase(name) for _, name in _rows(filename, 2))


def _countries() -> tuple[frozenset[str], frozenset[str]]:
    """Folded place names (countries, capitals, states, cities) and demonym forms of `foreign_countries.txt`."""
    places: set[str] = set()
    demonyms: set[str] = set()
    for names, forms, others in _rows("foreign_countries.txt", 3):
        places.update(_fold_phrase(name) for name in f"{names}/{others}".split("/") if name.strip())
        demonyms.update(_fold_phrase(form) for form in forms.split())
    return frozenset(places), frozenset(demonyms)


PLACES, DEMONYMS = _countries()
PLACES = PLACES | _names("foreign_cities.txt")
"""Folded names of foreign countries, capitals, US states, cities and regions; folded demonym forms."""

INSTITUTIONS = _names("foreign_institutions.txt")
"""Folded names of foreign institutions, documents and programs ("uscis", "registraduria", "green card"): a
question that names one is about that country's administration, wherever it is set."""
