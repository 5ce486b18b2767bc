"""The contract (`panama_law.contract`) applied: a call's arguments checked, a hit mapped to a source, a result's
plain-text rendering."""

from __future__ import annotations

import unicodedata
from typing import Any

from .. import embedding
from ..contract import (
    MAX_CITATION_CHARS,
    MAX_EXCERPT_CHARS,
    MAX_QUERY_CHARS,
    MAX_TITLE_CHARS,
    NO_RESULTS_TEXT,
)
from ..retrieve.search import Hit

# A query's size once normalised, checked before any search runs (`check_query_size`). The schema's 2,000
# characters are counted as sent, but a search reads the query normalised: the encoder applies NFKC and the
# lexical side folds with NFKD, and a single character can grow 18-fold ("\ufdfa"), so 2,000 of those were 36,000
# characters and half a second of encoder time on the event loop. A search costs about 3.5 ms plus about 50 µs per
# encoder token (bench/search_stall.py), so the token bound is what keeps the worst accepted query near 20 ms.
# The longest question in the evaluation sets (bench/eval, 1,647 questions) is 283 characters, 56 words and 63
# encoder tokens: 256 tokens leaves four times that. The character bound is the schema's own, applied to the NFKC
# form (folding's NFKD form without its combining marks, which is what the index reads, is at most three times
# longer, for Hangul); it keeps counting the tokens cheap.
MAX_NORMALISED_CHARS = MAX_QUERY_CHARS
MAX_QUERY_TOKENS = 256


class QueryError(ValueError):
    """The arguments break the input schema; the message names the rule."""


def validate_query(arguments: Any) -> str:
    """Check arguments against INPUT_SCHEMA by hand (cheaper than a schema engine per call); return the query."""
    if not isinstance(arguments, dict):
        raise QueryError("arguments must be an object")
    if "query" not in arguments:
        raise QueryError("missing required property 'query'")
    extra = sorted(set(arguments) - {"query"})
    if extra:
        raise QueryError(f"unexpected properties: {', '.join(extra)}")
    query = arguments["query"]
    if not isinstance(query, str):
        raise QueryError("'query' must be a string")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"'query' is longer than {MAX_QUERY_CHARS} characters")
    query = query.strip()
    if not query:
        raise QueryError("'query' is empty or blank")
    return query


def check_query_size(query: str) -> None:
    """Refuse (QueryError) a query too long once normalised for a search to stay cheap; nothing is searched.

    Characters first (NFKC, a fraction of a millisecond even for 36,000), then the encoder's tokens, counted on
    at most `MAX_NORMALISED_CHARS` characters. Needs the encoder loaded (a searcher's first search loads it)."""
    normalised = len(unicodedata.normalize("NFKC", query))
    if normalised > MAX_NORMALISED_CHARS:
        raise QueryError(f"'query' is longer than {MAX_NORMALISED_CHARS} characters once normalised ({normalised})")
    tokens = embedding.token_count(query)
    if tokens > MAX_QUERY_TOKENS:
        raise QueryError(f"'query' has more than {MAX_QUERY_TOKENS} tokens ({tokens}); ask a shorter question")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def to_source(hit: Hit) -> dict[str, str]:
    """The citation names norm and article; the title is the Título/Capítulo path (the norm's name when it has
    none), so a card need not repeat the norm. Date, Gaceta and link only when the importer was given them."""
    article = hit.article
    source = {
        "title": _clip(article.path or article.norm, MAX_TITLE_CHARS),
        "citation": _clip(article.citation, MAX_CITATION_CHARS),
        "excerpt": _clip(hit.excerpt, MAX_EXCERPT_CHARS),
    }
    norm = hit.norm
    if norm is not None:
        for key, value in (("date", norm.date), ("gaceta", norm.gaceta), ("official_source_url", norm.url)):
            if value:
                source[key] = value
    return source


def text_rendering(sources: list[dict[str, str]]) -> str:
    """The tool's plain-text content: numbered citations and excerpts (the structured content carries the rest)."""
    if not sources:
        return NO_RESULTS_TEXT
    return "\n\n".join(f"[{i}] {s['citation']}\n{s['excerpt']}" for i, s in enumerate(sources, 1))
