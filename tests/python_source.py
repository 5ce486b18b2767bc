"""Parsing the project's own source in tests, safe from other tests' leftovers.

A clean-clone run failed with `SystemError: AST constructor recursion depth mismatch` in a test that only parses
a module. CPython 3.11 keeps the AST constructor's recursion count in interpreter-wide state and checks it when
the construction ends (python/cpython#106905 is one report, "in a threaded application"). A garbage collection
during the parse had finalized asyncio tasks an earlier test of the same worker left pending; their finalizers
run Python code, and with it the interpreter may hand the GIL to another thread that parses too. Reproduced
here: with a second thread parsing and finalizers of cyclic garbage running Python code, 25 of 28 plain parses
raised it in 30 s, and none of 1,983 made through `parse`. A test that reads source must not fail on another test's
leak, so the parse runs with the collector held off; what became garbage meanwhile is collected after it, as
usual. (No collection is forced before each parse: a full one per file took about 20 s over the layout tests.)
"""

from __future__ import annotations

import ast
import gc


def parse(source: str) -> ast.Module:
    """`ast.parse(source)`, with no garbage collection (and so no finalizer) running inside it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if enabled:
            gc.enable()
