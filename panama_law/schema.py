"""The `search_panama_law` contract as this server speaks it, and the mapping from a hit to a source.

It mirrors what the Lexvoz gateway checks, duplicated on purpose: this is a separate program that must stay
interchangeable with other servers of the same contract, so it does not import the worker's code.
"""

from __future__ import annotations

from typing import Any

from .search import Hit

TOOL_NAME = "search_panama_law"
TOOL_DESCRIPTION = (
    "Busca en la Constitución Política de la República de Panamá los artículos pertinentes a una pregunta en "
    "español (coloquial o técnica). Devuelve hasta 3 fuentes con cita, título y el pasaje que mejor responde; "
    "devuelve una lista vacía si la Constitución no trata el tema."
)
MAX_QUERY_CHARS = 2_000
MAX_TITLE_CHARS = 1_000
MAX_CITATION_CHARS = 1_000
MAX_EXCERPT_CHARS = 750
MAX_RESULTS = 3

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "La pregunta o los términos de búsqueda sobre derecho panameño.",
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}

SOURCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
        "citation": {"type": "string", "maxLength": MAX_CITATION_CHARS},
        "excerpt": {"type": "string", "maxLength": MAX_EXCERPT_CHARS},
        "date": {"type": "string"},
        "gaceta": {"type": "string"},
        "official_source_name": {"type": "string"},
        "official_source_url": {"type": "string", "format": "uri"},
    },
    "required": ["title", "citation", "excerpt"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"results": {"type": "array", "items": SOURCE_SCHEMA, "maxItems": MAX_RESULTS}},
    "required": ["results"],
    "additionalProperties": False,
}


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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def to_source(hit: Hit) -> dict[str, str]:
    """Only fields that are known and true: no Gaceta or date, since the texto único's are not verified."""
    return {
        "title": _clip(hit.article.heading, MAX_TITLE_CHARS),
        "citation": _clip(hit.article.citation, MAX_CITATION_CHARS),
        "excerpt": _clip(hit.excerpt, MAX_EXCERPT_CHARS),
    }
