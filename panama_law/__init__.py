"""Embedded MCP search server for the Constitución Política de la República de Panamá and the laws and codes a
team imports beside it (`python -m panama_law import`).

A separate program from the Lexvoz worker: it serves `search_panama_law` over streamable HTTP with the same
contract the gateway checks, so it and any other conforming server (e.g. LexLatam's) are interchangeable.

Split by stage, imports one way: `ingest` (source files to checked articles) < `index` (the SQLite file) <
`retrieve` (a question to ranked articles) < `serve` (the MCP tool over HTTP), all on a shared base (`norms`,
`text`, `embedding`, `settings`). `__main__` and `evaluate` are the command line's entries and reach every stage.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
