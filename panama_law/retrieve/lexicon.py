"""A bridge from everyday (Panamanian and general Latin-American) Spanish to the words the law is written in.

Two tables, one bridge. The Constitution's (`data/constitution_lexicon.txt`, see `data/CONSTITUTION_LEXICON.md`)
maps callers' words to the Constitution's own vocabulary. The everyday-law table (`data/everyday_lexicon.txt`, see
`data/EVERYDAY_LEXICON.md`) does the same for the matters callers ask about most and the Constitution barely touches
(work, leases, neighbours, animals, family, inheritance, consumers, utilities, schools, traffic, street trade,
health, water, environment, police, permits and procedure), in the words Panamanian codes, laws and municipal rules
use: it serves the norms a team imports, whose text this package never sees. It was written from general knowledge,
domain by domain, without seeing any imported law or question set. The Constitution's table expands every question;
the everyday table's terms are added for the norms without callers' glosses only (`search.Searcher`), since a norm
with glosses already holds its callers' wordings and more terms only compete with them. On the four development laws
(122 questions, no glosses) the everyday table took recall@3 from 82 to 87 of 122 and MRR@10 from 0.587 to 0.620;
the Constitution alone is untouched, and its development questions on the indexes that hold one of those laws found
943 of 993 in the first three against 945 (out of scope abstained 397 of 570 both times). Added for every norm
instead, it gave 86 of 122, took a glossed development law from 29 to 27 of 30, and moved the Constitution's abstain
signal enough to need a refit.

Callers speak of "botar", "la plata" or "la cana"; the text says "despedido", "salario" and "privado de su
libertad". Neither the stemmer nor a general-purpose embedding crosses that gap reliably, so the query is expanded
with the formal terms, which are appended (with a lower weight) and never replace what was said.

How the Constitution's table was built, so that its coverage does not depend on any particular set of
questions: it walks the Constitution Título by Título (and Capítulo by Capítulo), lists the concepts each one
regulates, and for each concept the everyday words, slang and short phrasings people use for it, mapped to the
words the articles themselves use. Rules the table keeps:

* every expansion term occurs in the Constitution (checked by a test); a term the text never uses only adds noise;
* a key is a word or short phrase with its common inflections written out (matching is on folded words, not
  stems, because sound-alike stems collide: "votar"/"botar", "casa"/"casado");
* entries are general vocabulary for a concept, never a paraphrase of one question.

The everyday table keeps the second and third rules; its terms are the codes' words, so no text here can check
them. Both tables are data files in `panama_law/data/`, read with one parser: each entry is `variant, variant, … =
formal terms` (indented lines continue the entry above, `#` starts a comment line); keys are folded (lowercase, no
accents, ñ as n) when parsed. A line that is not an entry is an error naming its file and line, so a slip in a table
fails at import instead of silently mapping words to nothing.
"""

from __future__ import annotations

from importlib import resources

from ..text import fold, words


def _plain(tokens: list[str]) -> list[str]:
    """Keys and queries meet without ñ as well: "panameño" is often typed (or transcribed) as "panameno"."""
    return [t.replace("ñ", "n") for t in tokens]


def _parse(table: str, source: str) -> dict[str, str]:
    """The `variant, … = formal terms` entries of `table` (the text of the file `source`), keyed by folded variant."""
    out: dict[str, str] = {}
    entries: list[tuple[int, str]] = []  # (line number where the entry starts, the entry on one line)
    for number, raw in enumerate(table.splitlines(), start=1):
        if raw.startswith("    ") and entries:  # an indented line continues the entry above
            entries[-1] = (entries[-1][0], f"{entries[-1][1]} {raw.strip()}")
        elif raw.strip() and not raw.startswith("#"):
            entries.append((number, raw.strip()))
    for number, line in entries:
        keys, equals, expansion = line.partition("=")
        target = expansion.strip()
        folded_keys = [" ".join(_plain(words(key))) for key in keys.split(",")]
        if not equals or "=" in expansion or not words(target) or not any(folded_keys):
            raise ValueError(f"{source}, line {number}: not a `variant, variant = formal terms` entry: {line!r}")
        for folded in filter(None, folded_keys):
            # The same everyday word can name several concepts ("casa": home / own house): keep them all.
            out[folded] = f"{out[folded]} {target}" if folded in out else target
    return out


def read_table(filename: str) -> dict[str, str]:
    """The table in `panama_law/data/<filename>`, read as package data so an installed wheel finds it too."""
    text = resources.files("panama_law").joinpath("data", filename).read_text(encoding="utf-8")
    return _parse(text, filename)


class Lexicon:
    """One table of `variant, … = formal terms` entries, and the expansion of a question by it."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self._max_phrase = max((len(key.split()) for key in table), default=0)

    def expand(self, query: str) -> str:
        """Return the formal terms this table adds for `query` (empty when none apply).

        Longer phrases win: a word already covered by a matched phrase does not also add its single-word entry.
        """
        tokens = _plain(words(query))
        covered = [False] * len(tokens)
        added: list[str] = []
        for size in range(self._max_phrase, 0, -1):
            for start in range(len(tokens) - size + 1):
                if any(covered[start : start + size]):
                    continue
                extra = self.table.get(" ".join(tokens[start : start + size]))
                if extra is not None:
                    added.append(extra)
                    covered[start : start + size] = [True] * size
        return " ".join(added)

    def formal_terms(self) -> set[str]:
        """Every word the table expands to, folded (for the Constitution table's corpus-coverage check)."""
        return {w for target in self.table.values() for w in words(fold(target))}


CONSTITUTION = Lexicon(read_table("constitution_lexicon.txt"))
EVERYDAY = Lexicon(read_table("everyday_lexicon.txt"))
