"""Ledger schema steps on SQLite: a version-1 file with entries is migrated in place, nothing lost.

The version-1 DDL below is the released one, byte for byte, so the test opens exactly the files that
deployed workers have been writing.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from agent.ops.ledger import SCHEMA_VERSION, LedgerStore
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.reader import read_room
from agent.ops.ledger.schema import LedgerSchemaError, metadata
from agent.ops.ledger.store import _sqlite_engine, ledger_url
from tests.ledger_helpers import EXCERPT, entry, write

RELEASED_V1 = """
CREATE TABLE tool_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    room TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    query_redacted TEXT NOT NULL,
    query_digest TEXT NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome IN ('completed', 'failed', 'discarded', 'duplicate', 'rejected')),
    duration_ms REAL NOT NULL,
    reason TEXT
);
CREATE INDEX tool_calls_room ON tool_calls (room, id);
CREATE TABLE sources (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    call_row INTEGER NOT NULL REFERENCES tool_calls (id),
    position INTEGER NOT NULL,
    citation TEXT NOT NULL,
    official_source_url TEXT,
    excerpt_sha256 TEXT NOT NULL,
    UNIQUE (call_row, position)
);
CREATE TRIGGER IF NOT EXISTS tool_calls_no_update BEFORE UPDATE ON tool_calls
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS tool_calls_no_delete BEFORE DELETE ON tool_calls
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS sources_no_update BEFORE UPDATE ON sources
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS sources_no_delete BEFORE DELETE ON sources
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
PRAGMA user_version = 1;
"""


def _version1_file(path: Path) -> None:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(RELEASED_V1)
    conn.execute(
        "INSERT INTO tool_calls (entry_id, ts, room, session_id, turn, call_id, tool, query_redacted,"
        " query_digest, outcome, duration_ms, reason) VALUES ('old-1', '2025-01-02T03:04:05.678Z', 'vieja', 's',"
        " 1, 'c1', 'search_panama_law', 'mi [cédula]', 'abcd', 'completed', 41.7, NULL)"
    )
    conn.execute(
        "INSERT INTO sources (call_row, position, citation, official_source_url, excerpt_sha256)"
        " VALUES (1, 1, 'Constitución, art. 1', NULL, 'f00d')"
    )
    conn.commit()
    conn.close()


async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "var" / "ledger.sqlite3"
    _version1_file(path)
    with pytest.raises(LedgerSchemaError, match="older"):  # a reader never migrates
        read_room(path, "vieja")
    await write(path, entry(room="nueva"))  # the worker's writer migrates on open
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    old = read_room(path, "vieja")
    assert [(c["call_id"], c["duration_ms"], c["server_name"]) for c in old] == [("c1", 41.7, None)]
    assert old[0]["sources"] == [
        {
            "position": 1,
            "title": None,
            "citation": "Constitución, art. 1",
            "official_source_url": None,
            "excerpt": None,
            "excerpt_sha256": "f00d",
        }
    ]
    assert read_room(path, "nueva")[0]["sources"][0]["excerpt"] == EXCERPT
    assert ledger_main(["show", "--room", "vieja", "--path", str(path)]) == 0
    assert "excerpt text not kept" in capsys.readouterr().out
    # still append-only after the triggers were replaced
    conn = sqlite3.connect(path)
    for sql in ("UPDATE tool_calls SET room = 'x'", "DELETE FROM tool_calls", "DELETE FROM sources"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    conn.close()


def test_the_steps_build_exactly_the_tables_the_program_reads(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    LedgerStore.open(path).close()
    engine = create_engine(ledger_url(path))
    try:
        found = inspect(engine)
        for table in metadata.tables.values():
            assert [c["name"] for c in found.get_columns(table.name)] == [c.name for c in table.columns], table.name
    finally:
        engine.dispose()


def test_two_openers_of_a_new_file_apply_each_step_once(tmp_path: Path) -> None:
    """Each step re-reads the version under the write lock: two workers starting together never both apply it."""
    path = tmp_path / "ledger.sqlite3"
    applied: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def opener() -> None:
        try:
            start.wait()
            store = LedgerStore(_sqlite_engine(ledger_url(path), readonly=False), path)
            applied.append(store.migrate())
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sorted(n for steps in applied for n in steps) == list(range(1, SCHEMA_VERSION + 1))


def test_a_store_no_writer_has_opened_yet_reads_as_empty(tmp_path: Path) -> None:
    """A reader racing the first writer (file created, schema not yet committed) sees no calls, not an error."""
    path = tmp_path / "ledger.sqlite3"
    path.touch()
    assert read_room(path, "sala-1") == []
    assert ledger_main(["export", "--since", "2025-01-01", "--until", "2025-01-02", "--path", str(path)]) == 0


def test_a_sqlite_ledger_keeps_no_spent_token_table(tmp_path: Path) -> None:
    """Step 3 is PostgreSQL's: on SQLite the page service keeps its own file, and the ledger only moves version."""
    path = tmp_path / "ledger.sqlite3"
    LedgerStore.open(path).close()
    engine = create_engine(ledger_url(path))
    try:
        assert "resume_tokens_spent" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
