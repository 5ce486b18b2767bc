"""The `search_panama_law` contract as this server speaks it: the tool's name and description, its limits and its
JSON schemas. Every stage reads these limits (the importer bounds a norm's metadata by them, the search its excerpts
and result count, the server its schemas), so they live once, here.

They mirror what the Lexvoz worker's gateway checks (`agent/contract.py`), written twice on purpose: this is a
separate program that must stay interchangeable with other servers of the same contract, so it does not import the
worker's code. `tests/test_contract.py` pins the two equal where they must be, and this side never looser.
"""

from __future__ import annotations

from typing import Any

TOOL_NAME = "search_panama_law"
TOOL_DESCRIPTION = (
    "Busca en las normas panameñas indexadas (la Constitución Política de la República de Panamá y las leyes y "
    "códigos importados) los artículos pertinentes a una pregunta en español (coloquial o técnica). Devuelve hasta "
    "3 fuentes con cita (norma y artículo), título (la ruta de Título y Capítulo) y el pasaje que mejor responde; "
    "devuelve una lista vacía si ninguna norma indexada trata el tema."
)
NO_RESULTS_TEXT = "Sin resultados en las normas indexadas para esta consulta."
MAX_QUERY_CHARS = 2_000
MAX_TITLE_CHARS = 1_000
MAX_CITATION_CHARS = 1_000
MAX_EXCERPT_CHARS = 750
MAX_RESULTS = 3
# What the importer accepts for a norm's Gaceta number and link (`norms.check_gaceta`, `norms.check_url`), so no
# source carries more than the worker takes (its `Source` model).
MAX_META_CHARS = 200
MAX_URL_CHARS = 2_000

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
        "date": {"type": "string", "maxLength": MAX_META_CHARS},
        "gaceta": {"type": "string", "maxLength": MAX_META_CHARS},
        "official_source_name": {"type": "string", "maxLength": MAX_TITLE_CHARS},
        "official_source_url": {"type": "string", "format": "uri", "maxLength": MAX_URL_CHARS},
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
