"""The ledger on a real PostgreSQL that the tests start themselves (marker `postgres`).

Two worker processes writing at once, the server restarted in the middle of a conversation, migrations
from an empty database and from the previous schema, append-only with the controlled erasures, and
`ledger show`/`export` reading it back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, text

from agent.ops import metrics
from agent.ops.ledger import SCHEMA_VERSION, EvidenceLedger, LedgerStore
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.erase import forget_room, purge_older_than
from agent.ops.ledger.reader import read_room
from agent.ops.ledger.store import ledger_url
from agent.web.spent import spent_tokens
from tests.ledger_helpers import EXCERPT, entry, write
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parent.parent
_names = itertools.count(1)


@pytest.fixture
def db(pg: PostgresServer) -> str:
    """A fresh, empty database in the cluster."""
    return pg.create_database(f"ledger_{os.getpid()}_{next(_names)}")


def _scalar(url: str, sql: str) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
        return row[0] if row else None


def test_migrates_an_empty_database_and_enforces_append_only(db: str) -> None:
    store = LedgerStore.open(db)
    try:
        assert store.version() == SCHEMA_VERSION
        assert LedgerStore.open(db).migrate() == []  # a second worker finds nothing to do
        store.write([entry()])
    finally:
        store.close()
    for sql in (
        "UPDATE tool_calls SET outcome = 'failed'",
        "DELETE FROM tool_calls",
        "UPDATE sources SET excerpt = 'otra cosa'",
        "DELETE FROM sources",
        "TRUNCATE sources",
        "TRUNCATE tool_calls CASCADE",
    ):
        with psycopg.connect(db) as conn, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute(sql)
    assert _scalar(db, "SELECT count(*) FROM sources") == 1


def test_migrates_the_previous_schema_in_place(db: str) -> None:
    """A database left at schema 1 with entries in it: opened by this version, migrated, nothing lost."""
    engine = create_engine(ledger_url(db))
    v1 = LedgerStore(engine, db)
    assert v1.migrate(target=1) == [1]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO tool_calls (entry_id, ts, room, session_id, turn, call_id, tool, query_redacted,"
                " query_digest, outcome, duration_ms) VALUES ('e1', '2025-01-02T03:04:05.678Z', 'vieja', 's', 1,"
                " 'c1', 'search_panama_law', '[cédula]', 'abc', 'completed', 5.0)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sources (call_row, position, citation, excerpt_sha256)"
                " SELECT id, 1, 'Constitución, art. 1', 'f00' FROM tool_calls"
            )
        )
    engine.dispose()
    store = LedgerStore.open(db)
    try:
        assert store.version() == SCHEMA_VERSION
    finally:
        store.close()
    calls = read_room(db, "vieja")
    assert [c["call_id"] for c in calls] == ["c1"]
    assert calls[0]["server_name"] is None and calls[0]["sources"][0]["excerpt"] is None
    assert _scalar(db, "SELECT array_agg(version ORDER BY version) FROM ledger_schema_version") == list(
        range(1, SCHEMA_VERSION + 1)
    )


_WRITER = """
import asyncio, sys
from agent.ops.ledger import EvidenceLedger
from tests.ledger_helpers import entry

async def main(url: str, worker: str, count: int) -> None:
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start together
    ledger = EvidenceLedger(url, batch_size=16)
    await ledger.start()
    for turn in range(1, count + 1):
        ledger.record(entry(room=f"sala-{worker}", turn=turn, session_id=worker))
        if turn % 10 == 0:
            await asyncio.sleep(0)
    await ledger.close(timeout=60)
    print(ledger.written, ledger.dropped, ledger.failures, flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def test_two_worker_processes_write_at_once(db: str) -> None:
    """Both start on an empty database: one migrates, the other waits for it; every entry lands once."""
    count = 150
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, db, name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for name in ("a", "b")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        written, dropped, _failures = (int(x) for x in out.split())
        assert (written, dropped) == (count, 0)
    for name in ("a", "b"):
        calls = read_room(db, f"sala-{name}")
        assert [c["turn"] for c in calls] == list(range(1, count + 1))
    assert _scalar(db, "SELECT count(*) FROM sources") == 2 * count
    assert _scalar(db, "SELECT array_agg(version ORDER BY version) FROM ledger_schema_version") == list(
        range(1, SCHEMA_VERSION + 1)
    )


class _WriteFailures(logging.Handler):
    """Watches for a writer's report of the first failure of a streak (its one WARNING line).

    Each watch is a fresh event taken before the action that should cause the line, so a line from an
    earlier step can never satisfy a later wait.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._watch: asyncio.Event | None = None

    def expect(self) -> asyncio.Event:
        self._watch = asyncio.Event()
        return self._watch

    def emit(self, record: logging.LogRecord) -> None:
        if "ledger write to" in record.getMessage() and self._watch is not None:
            self._watch.set()
            self._watch = None


async def _seen(line: asyncio.Event) -> None:
    async with asyncio.timeout(30):
        await line.wait()


async def test_restart_in_the_middle_of_a_conversation_replays_and_counts_losses(
    pg: PostgresServer, db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes made while the server is down are kept and replayed; only what overflows is lost, and counted."""
    ledger = EvidenceLedger(db, backoff_initial_s=0.01, backoff_max_s=0.2)
    small = EvidenceLedger(db, max_queue=2, backoff_initial_s=0.01, backoff_max_s=0.2)
    failures = _WriteFailures()
    logging.getLogger("lexvoz.ledger").addHandler(failures)
    await ledger.start()
    await small.start()
    try:
        ledger.record(entry(turn=1))
        await ledger.flush()
        assert ledger.written == 1  # connected and writing: the conversation is under way
        failures_before = metrics.ledger_write_failures_total._value.get()
        dropped_before = metrics.ledger_dropped_total._value.get()
        first_failure = failures.expect()
        await asyncio.to_thread(pg.stop, "fast")
        try:
            for turn in range(2, 6):
                ledger.record(entry(turn=turn))
            await _seen(first_failure)
            small_failure = failures.expect()
            small.record(entry(room="sala-llena", turn=1))
            await _seen(small_failure)  # its first entry is in flight, failing
            with caplog.at_level(logging.WARNING, logger="lexvoz.ledger"):
                for turn in range(2, 6):  # two more fit the queue; the last two cannot be kept
                    small.record(entry(room="sala-llena", turn=turn))
            assert small.dropped == 2
            assert sum("ledger entries dropped" in r.getMessage() for r in caplog.records) == 2
            assert ledger.dropped == 0 and ledger.written == 1  # held for replay, not lost
        finally:
            await asyncio.to_thread(pg.start)
        await ledger.flush()
        await small.flush()
    finally:
        logging.getLogger("lexvoz.ledger").removeHandler(failures)
        await ledger.close(timeout=30)
        await small.close(timeout=30)
    assert ledger.dropped == 0 and ledger.written == 5
    assert [c["turn"] for c in read_room(db, "sala-1")] == [1, 2, 3, 4, 5]
    assert [c["turn"] for c in read_room(db, "sala-llena")] == [1, 2, 3]
    assert metrics.ledger_write_failures_total._value.get() > failures_before
    assert metrics.ledger_dropped_total._value.get() - dropped_before == 2


async def test_purge_and_forget_are_the_only_deletions_and_are_recorded(db: str) -> None:
    now = datetime.now(UTC)
    await write(
        db,
        entry(room="antigua", turn=1, ts=now - timedelta(days=40)),
        entry(room="reciente", turn=1, ts=now - timedelta(days=1)),
        entry(room="olvidar", turn=1, ts=now),
    )
    store = LedgerStore.open(db)
    try:
        purged = purge_older_than(store, 30, now=now)
        forgot = forget_room(store, "olvidar")
    finally:
        store.close()
    assert (purged.calls_removed, purged.sources_removed) == (1, 1)
    assert (forgot.calls_removed, forgot.sources_removed) == (1, 1)
    assert read_room(db, "antigua") == [] and read_room(db, "olvidar") == []
    assert len(read_room(db, "reciente")) == 1
    with psycopg.connect(db) as conn:
        events = conn.execute("SELECT kind, room, calls_removed FROM ledger_events ORDER BY id").fetchall()
        assert events == [("purge", None, 1), ("forget", "olvidar", 1)]
        assert conn.execute("SELECT count(*) FROM ledger_erasure_gate").fetchone() == (0,)
    with psycopg.connect(db) as conn, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        conn.execute("DELETE FROM ledger_events")


async def test_show_and_export_read_postgres(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    await write(db, entry(turn=1), entry(turn=2, outcome="failed", reason="timeout", sources=()))
    assert ledger_main(["show", "--room", "sala-1", "--url", db]) == 0
    shown = capsys.readouterr().out
    assert "Room sala-1: 2 tool call(s)" in shown and f"«{EXCERPT}»" in shown
    assert "server panama-law 0.1.0, index 0.1.0" in shown and "failed (timeout)" in shown
    assert "8-123-4567" not in shown
    assert ledger_main(["export", "--since", "2025-03-03", "--until", "2025-03-03", "--url", db]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(c["turn"], c["outcome"]) for c in lines] == [(1, "completed"), (2, "failed")]
    assert lines[0]["sources"][0]["excerpt"] == EXCERPT


def test_step_3_builds_the_page_services_spent_token_table(db: str) -> None:
    """The page service defines its own copy of the table (it may not import the ledger): the step matches it."""
    with LedgerStore.open(db) as store:
        found = inspect(store.engine)
        columns = found.get_columns(spent_tokens.name)
        assert [c["name"] for c in columns] == [c.name for c in spent_tokens.columns]
        assert [c["nullable"] for c in columns] == [c.nullable for c in spent_tokens.columns]
        assert found.get_pk_constraint(spent_tokens.name)["constrained_columns"] == ["jti"]
        assert [ix["column_names"] for ix in found.get_indexes(spent_tokens.name)] == [["expires_at"]]
