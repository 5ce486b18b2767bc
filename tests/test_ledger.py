"""Evidence ledger on SQLite: round trip, WAL, migrations, append-only, failure isolation, CLI."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.contract import Source
from agent.ops import metrics
from agent.ops.digest import query_digest
from agent.ops.ledger import (
    SCHEMA_VERSION,
    EvidenceLedger,
    LedgerEntry,
    LedgerSchemaError,
    LedgerSource,
    LedgerStore,
    excerpt_sha256,
    sources_from,
)
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.reader import read_room
from agent.ops.ledger.render import escape_untrusted
from tests.ledger_helpers import EXCERPT, QUERY, entry


def _entry(room: str = "sala-1", turn: int = 1, **kw: object) -> LedgerEntry:
    """The shared entry with two sources (one with a link) and no server details, as these tests expect."""
    base: dict[str, object] = {
        "duration_ms": 123.4,
        "sources": (
            LedgerSource(
                "Constitución Política, art. 72", "https://www.gacetaoficial.gob.pa/x", EXCERPT, "Constitución"
            ),
            LedgerSource("Código de Trabajo, art. 105", None, "Artículo 105. …"),
        ),
        "server_name": None,
        "server_version": None,
        "index_version": None,
        "ts": datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    }
    base.update(kw)
    return entry(room, turn, **base)


def _raw_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("ledger.sqlite3*"))


async def _write(path: Path, *entries: LedgerEntry) -> EvidenceLedger:
    ledger = EvidenceLedger(path)
    await ledger.start()
    for e in entries:
        ledger.record(e)
    await ledger.close(timeout=5)
    return ledger


async def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "ledger.sqlite3"
    ledger = await _write(
        path, _entry(turn=1), _entry(turn=2, outcome="failed", reason="timeout", sources=()), _entry(room="otra")
    )
    assert ledger.written == 3 and ledger.failures == 0
    calls = read_room(path, "sala-1")
    assert [c["turn"] for c in calls] == [1, 2]
    first = calls[0]
    assert first["ts"] == "2025-01-02T03:04:05.678Z"
    assert first["session_id"] == "sess-1" and first["call_id"] == "call-1"
    assert "8-123-4567" not in first["query_redacted"]
    assert "[cédula]" in first["query_redacted"] and "artículo 72" in first["query_redacted"]
    assert first["query_digest"] == query_digest(QUERY)
    assert first["outcome"] == "completed" and first["duration_ms"] == pytest.approx(123.4)
    assert first["sources"][0] == {
        "position": 1,
        "title": "Constitución",
        "citation": "Constitución Política, art. 72",
        "official_source_url": "https://www.gacetaoficial.gob.pa/x",
        "excerpt": EXCERPT,
        "excerpt_sha256": hashlib.sha256(EXCERPT.encode("utf-8")).hexdigest(),
    }
    assert first["sources"][1]["official_source_url"] is None and first["sources"][1]["title"] is None
    assert calls[1]["outcome"] == "failed" and calls[1]["reason"] == "timeout" and calls[1]["sources"] == []
    # the question's personal data is not in the file; the excerpt as shown is
    raw = _raw_bytes(tmp_path)
    assert b"8-123-4567" not in raw
    assert b"maternidad" in raw


def test_sources_from_contract_sources() -> None:
    src = Source(title="t", citation="Ley 34 de 1949, art. 1", excerpt=" texto ", official_source_url=None)
    assert sources_from([src]) == (LedgerSource("Ley 34 de 1949, art. 1", None, "texto", "t"),)
    assert excerpt_sha256("texto") == hashlib.sha256(b"texto").hexdigest()


def test_unknown_outcome_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        _entry(outcome="maybe")


def test_wal_mode_and_migrations(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.touch()  # an empty existing file is migrated like a new one
    LedgerStore.open(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()
    assert LedgerStore.open(path).migrate() == []  # idempotent re-open
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"tool_calls", "sources"} <= tables
    finally:
        conn.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(LedgerSchemaError, match="newer"):
        LedgerStore.open(path)


async def test_append_only(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    await _write(path, _entry())
    conn = sqlite3.connect(path)
    try:
        for sql in (
            "UPDATE tool_calls SET outcome = 'failed'",
            "DELETE FROM tool_calls",
            "UPDATE sources SET citation = 'x'",
            "DELETE FROM sources",
        ):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute(sql)
    finally:
        conn.close()
    assert len(read_room(path, "sala-1")) == 1


async def test_duplicate_entry_id_is_written_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    e = _entry()
    await _write(path, e, e)
    calls = read_room(path, "sala-1")
    assert len(calls) == 1 and len(calls[0]["sources"]) == 2


async def test_failing_writes_are_counted_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    attempts = 0

    def flaky(p: str | Path) -> LedgerStore:
        nonlocal attempts
        attempts += 1
        if attempts <= 4:
            raise sqlite3.OperationalError("unable to open database file")
        return LedgerStore.open(p)

    before = metrics.ledger_write_failures_total._value.get()
    ledger = EvidenceLedger(path, connect=flaky, backoff_initial_s=0.001, backoff_max_s=0.01)
    await ledger.start()
    for _ in range(200):  # the store is opened at start; that attempt fails too, but it is not a write
        if attempts:
            break
        await asyncio.sleep(0.005)
    ledger.record(_entry())  # does not raise, does not block
    await ledger.close(timeout=5)
    assert ledger.failures == 3
    assert metrics.ledger_write_failures_total._value.get() - before == 3
    assert ledger.written == 1
    assert len(read_room(path, "sala-1")) == 1


async def test_the_store_is_opened_when_the_ledger_starts_not_at_the_first_entry(tmp_path: Path) -> None:
    """Opening checks the schema: paid while the person is greeted, not between a search and its entry."""
    path = tmp_path / "ledger.sqlite3"
    opened = asyncio.Event()
    loop = asyncio.get_running_loop()

    def connect(p: str | Path) -> LedgerStore:
        loop.call_soon_threadsafe(opened.set)
        return LedgerStore.open(p)

    ledger = EvidenceLedger(path, connect=connect)
    await ledger.start()
    await asyncio.wait_for(opened.wait(), 5)  # nothing recorded yet
    ledger.record(_entry())
    await ledger.close(timeout=5)
    assert ledger.written == 1 and len(read_room(path, "sala-1")) == 1


async def test_unwritable_path_never_reaches_the_caller(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the ledger directory should be")
    dropped_before = metrics.ledger_dropped_total._value.get()
    ledger = EvidenceLedger(blocker / "ledger.sqlite3", backoff_initial_s=0.001, backoff_max_s=0.01)
    await ledger.start()
    ledger.record(_entry())
    await asyncio.sleep(0.05)
    assert ledger.failures >= 1
    await ledger.close(timeout=0.05)  # gives up, counts the lost entry, does not raise
    assert ledger.dropped == 1
    assert metrics.ledger_dropped_total._value.get() - dropped_before == 1


async def test_bounded_queue_drops_newest(tmp_path: Path) -> None:
    ledger = EvidenceLedger(tmp_path / "ledger.sqlite3", max_queue=2)
    for turn in range(1, 6):  # writer not started: the queue fills
        ledger.record(_entry(turn=turn))
    assert ledger.pending == 2 and ledger.dropped == 3
    await ledger.start()
    await ledger.close(timeout=5)
    assert [c["turn"] for c in read_room(tmp_path / "ledger.sqlite3", "sala-1")] == [1, 2]


async def test_record_after_close_is_dropped_quietly(tmp_path: Path) -> None:
    ledger = await _write(tmp_path / "ledger.sqlite3")
    ledger.record(_entry())
    assert ledger.dropped == 1


async def test_cli_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.sqlite3"
    await _write(path, _entry(turn=1), _entry(turn=2, outcome="discarded", reason="stale", sources=()))

    assert ledger_main(["show", "--room", "sala-1", "--path", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Room sala-1: 2 tool call(s)" in text
    assert "[cédula]" in text and "8-123-4567" not in text
    assert query_digest(QUERY) in text
    assert "Constitución Política, art. 72" in text and excerpt_sha256(EXCERPT) in text
    assert f"«{EXCERPT}»" in text  # what the user read, not only its hash
    assert text.index("turn 1") < text.index("turn 2")
    assert "discarded (stale)" in text

    assert ledger_main(["show", "--room", "sala-1", "--json", "--path", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["room"] == "sala-1"
    assert [c["outcome"] for c in data["calls"]] == ["completed", "discarded"]
    assert data["calls"][0]["sources"][0]["excerpt_sha256"] == excerpt_sha256(EXCERPT)

    assert ledger_main(["show", "--room", "nadie", "--path", str(path)]) == 0
    assert "No tool calls" in capsys.readouterr().out


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ledger_main(["show", "--room", "x", "--path", str(tmp_path / "missing.sqlite3")]) == 1
    assert "no ledger file" in capsys.readouterr().err
    assert ledger_main(["show"]) == 2


async def test_long_query_is_cut_to_the_tool_limit_before_redaction_and_storage(tmp_path: Path) -> None:
    """A refused 20,000-character argument is stored as its first 2,000 characters, redacted, and no more."""
    path = tmp_path / "ledger.sqlite3"
    long_query = "Mi cédula es 8-123-4567. " + "x" * 20_000 + " FINAL-8-765-4321"
    await _write(path, _entry(query=long_query, outcome="failed", reason="invalid_arguments", sources=()))
    stored = read_room(path, "sala-1")[0]
    assert len(stored["query_redacted"]) <= 2_000
    assert "[cédula]" in stored["query_redacted"] and "8-123-4567" not in stored["query_redacted"]
    assert "FINAL" not in stored["query_redacted"]
    assert stored["query_digest"] == query_digest(long_query[:2_000])
    assert b"x" * 2_001 not in _raw_bytes(tmp_path)


async def test_ledger_file_and_folder_are_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "var"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # whatever the umask, the folder starts open to others
    path = folder / "ledger.sqlite3"
    await _write(path, _entry())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = sorted(folder.glob("ledger.sqlite3*"))
    assert path in files
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name

    fresh = tmp_path / "new" / "deeper" / "ledger.sqlite3"
    LedgerStore.open(fresh).close()
    assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600


async def test_cli_escapes_control_and_bidi_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A search result that carries terminal escapes or a right-to-left override is shown, not obeyed."""
    hostile = "Ley 1\x1b[2J\x1b]0;pwned\x07 art. \u202eevil\u2066 \x9b31m fin"
    path = tmp_path / "ledger.sqlite3"
    sources = (LedgerSource(hostile, "https://x.test/\u202e", "ex\x1b[2Jcerpt", "t\u202eitle"),)
    await _write(path, _entry(query="consulta\r\x1b[1A", sources=sources))
    assert ledger_main(["show", "--room", "sala-1", "--path", str(path)]) == 0
    text = capsys.readouterr().out
    for raw in ("\x1b", "\x07", "\u202e", "\u2066", "\x9b", "\r"):
        assert raw not in text, repr(raw)
    assert "\\u001b[2J" in text and "\\u202eevil" in text and "\\u009b31m" in text

    assert ledger_main(["show", "--room", "sala-1", "--json", "--path", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out
    assert json.loads(out)["calls"][0]["sources"][0]["citation"] == hostile  # escaped, not altered
    assert escape_untrusted("Constitución, art. 72") == "Constitución, art. 72"
