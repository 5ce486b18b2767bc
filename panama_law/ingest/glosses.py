"""Callers' glosses: how ordinary people put what an article settles, indexed beside the article, never shown.

A caller says "me botaron sin pagarme nada" and the Código de Trabajo says "despido injustificado"; the stemmer,
the lexicon and a general-purpose embedding all miss part of that gap. A gloss is a short text in the caller's
words (an everyday question, a first-person situation, the matter in common synonyms) tied to one article. The
search counts a gloss as one more passage of its article in the two passage rankings (BM25 and embedding, its
cosine discounted: `search.SearchConfig`), but a gloss is never an excerpt, a citation or anything the model or
the page sees: evidence is only the law's own text.

The Constitution's glosses ship with the package (`data/constitucion_glosses.jsonl`): written article by article
from the Constitution's text and general Spanish alone, by writers who saw no question set and no search code:
2-4 per article in a first round, then 2-4 more in a second round by other writers, asked for other voices and
other words than the first round's (4-8 per article in all). A team's `.jsonl` norms may carry their own
(`"glosses": [...]` on an article's line), and any norm may take them from a glosses file in the same
one-article-per-line form (`import --glosses FILE`, or a `NAME.glosses.jsonl` beside the norm's file in a norms
folder).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..norms import Article, NormError, label_key, parse_label

PACKAGED = Path(__file__).parent.parent / "data" / "constitucion_glosses.jsonl"
MAX_GLOSSES = 8
"""Per article: a few ways of putting each matter the article settles; more only dilutes its ranking."""
MAX_GLOSS_CHARS = 300


def check(raw: Any, where: str) -> tuple[str, ...]:
    """A `glosses` value from an import file: a list of short non-empty strings; NormError naming the line if not."""
    if not isinstance(raw, list) or not all(isinstance(g, str) and g.strip() for g in raw):
        raise NormError(f"{where}: 'glosses' must be a list of non-empty strings")
    if len(raw) > MAX_GLOSSES:
        raise NormError(f"{where}: at most {MAX_GLOSSES} glosses per article, got {len(raw)}")
    long = next((g for g in raw if len(g) > MAX_GLOSS_CHARS), None)
    if long is not None:
        raise NormError(f"{where}: a gloss is at most {MAX_GLOSS_CHARS} characters, got {len(long)}")
    return tuple(" ".join(g.split()) for g in raw)


def read(path: Path) -> dict[str, tuple[str, ...]]:
    """A glosses file, one article per line: {"article": "12-A", "glosses": ["...", ...]}; keyed by the article's
    label as `norms.label_key` folds it. NormError naming the line for anything malformed or repeated."""
    out: dict[str, tuple[str, ...]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise NormError(f"cannot read glosses file {path.name}: {exc}") from exc
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path.name}:{line_no}"
        try:
            row: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NormError(f"{where}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict) or not isinstance(row.get("article"), (str, int)) or "glosses" not in row:
            raise NormError(f"{where}: each line needs 'article' (string or number) and 'glosses' (list of strings)")
        try:
            key = label_key(*parse_label(str(row["article"])))
        except NormError as exc:
            raise NormError(f"{where}: {exc}") from exc
        if key in out:
            raise NormError(f"{where}: artículo {row['article']} appears twice")
        out[key] = check(row["glosses"], where)
    return out


def attach(
    articles: Sequence[Article], by_label: dict[str, tuple[str, ...]], source: str
) -> dict[int, tuple[str, ...]]:
    """Glosses keyed by label → by article position; a label the norm does not have is refused, naming it."""
    positions = _positions(articles)
    unknown = [key for key in by_label if key not in positions]
    if unknown:
        raise NormError(f"{source}: glosses for articles the norm does not have: {', '.join(unknown[:5])}")
    return {positions[key]: texts for key, texts in by_label.items()}


@cache
def _packaged() -> dict[str, tuple[str, ...]]:
    return read(PACKAGED)


def constitution(articles: Sequence[Article]) -> dict[int, tuple[str, ...]]:
    """The packaged glosses by article position in `articles` (the Constitution as parsed).

    Lenient where a team's glosses file is strict: another edition imported with `--no-checksum` may lack some
    of the articles they were written for, and those glosses are simply left out."""
    packaged = _packaged()
    return {pos: packaged[key] for key, pos in _positions(articles).items() if key in packaged}


def _positions(articles: Sequence[Article]) -> dict[str, int]:
    return {label_key(a.number, a.suffix): i for i, a in enumerate(articles)}


def digest(glosses: dict[int, tuple[str, ...]]) -> str:
    """A checksum of a norm's glosses, so an index can tell whether it holds the current ones."""
    h = hashlib.sha256()
    for pos in sorted(glosses):
        for text in glosses[pos]:
            h.update(f"{pos}\t{text}\n".encode())
    return h.hexdigest()
