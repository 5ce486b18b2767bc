"""Tests that parse the project's source run no garbage collection inside the parse (tests/python_source.py)."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.python_source import parse

SOURCE = Path("panama_law/retrieve/bm25.py").read_text(encoding="utf-8")  # thousands of nodes: many allocations


@pytest.fixture
def collections_seen() -> Iterator[list[str]]:
    """Every garbage collection that starts while the fixture is active, with the collector set to run after a few
    allocations (how many a parse takes before one runs differs between Python versions and with what ran before)."""
    seen: list[str] = []
    thresholds = gc.get_threshold()
    gc.set_threshold(10, 10, 10)

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(f"generation {info['generation']}")

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*thresholds)


def test_a_plain_parse_of_a_module_runs_the_collector_inside_it(collections_seen: list[str]) -> None:
    # The hazard the helper exists for: a collection inside the parse, and with it other objects' finalizers.
    ready = len(collections_seen)
    ast.parse(SOURCE)
    assert collections_seen[ready:]


def test_the_helper_runs_no_collection_inside_the_parse(
    collections_seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    inside: list[str] = []
    plain = ast.parse

    def watched(*args: Any, **kwargs: Any) -> ast.Module:  # pytest's own reports parse too while this is on
        start = len(collections_seen)
        tree = plain(*args, **kwargs)
        inside.extend(collections_seen[start:])
        return tree

    monkeypatch.setattr(ast, "parse", watched)
    for _ in range(5):
        assert parse(SOURCE).body
    assert inside == []
    assert gc.isenabled()  # the collector is left as it was found
