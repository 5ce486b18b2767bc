"""Callers' glosses: how ordinary people put what an article settles, indexed beside the article, never shown.

A caller says "me botaron sin pagarme nada" and the Código de Trabajo says "despido injustificado"; the stemmer,
the lexicon and a general-purpose embedding all miss part of that gap. A gloss is a short text in the caller's
words (an everyday question, a first-person situation, the matter in common synonyms) tied to one article. The
search ranks articles by their glosses too (BM25 and embedding, two more rankings in the fusion), but a gloss is
never an excerpt, a citation or anything the model or the page sees: evidence is only the law's own text.

The Constitution's glosses ship with the package (`data/constitucion_glosses.jsonl`): written article by article
from the Constitution's text and general Spanish alone, by writers who saw no question set and no search code,
2-4 per article. A team's `.jsonl` norms may carry their own (`"glosses": [...]` on an article's line).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from .norms import Article, NormError

PACKAGED = Path(__file__).parent / "data" / "constitucion_glosses.jsonl"
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


@cache
def _packaged() -> dict[int, tuple[str, ...]]:
    out: dict[int, tuple[str, ...]] = {}
    for line_no, line in enumerate(PACKAGED.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            out[int(row["article"])] = check(row["glosses"], f"{PACKAGED.name}:{line_no}")
    return out


def constitution(articles: Sequence[Article]) -> dict[int, tuple[str, ...]]:
    """The packaged glosses by article position in `articles` (the Constitution as parsed)."""
    by_number = _packaged()
    return {i: by_number[a.number] for i, a in enumerate(articles) if not a.suffix and a.number in by_number}


def digest(glosses: dict[int, tuple[str, ...]]) -> str:
    """A checksum of a norm's glosses, so an index can tell whether it holds the current ones."""
    h = hashlib.sha256()
    for pos in sorted(glosses):
        for text in glosses[pos]:
            h.update(f"{pos}\t{text}\n".encode())
    return h.hexdigest()
