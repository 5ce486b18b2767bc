"""Unverified citations in the ledger: step 4 on a store of the released step 3, append-only, erased with the
room, shown by `ledger show`, and never the words the agent said."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from agent.ops.ledger import SCHEMA_VERSION, LedgerStore, UnverifiedCitation
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.erase import purge_older_than
from agent.ops.ledger.reader import read_room, read_room_citations
from agent.ops.ledger.schema import unverified_citations
from agent.ops.ledger.store import _pg_engine, _sqlite_engine, ledger_url
from tests.ledger_helpers import entry, write
from tests.postgres_server import PostgresServer

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def cited(
    room: str = "sala-1", turn: int = 1, article: str = "99", norm: str | None = "constitucion", **kw: object
) -> UnverifiedCitation:
    return UnverifiedCitation(room=room, session_id="sess-1", turn=turn, article=article, norm=norm, **kw)  # type: ignore[arg-type]


def _raw(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.glob("ledger.sqlite3*"))


async def test_a_released_step_3_store_gains_the_citations_and_keeps_its_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite3"
    old = LedgerStore(_sqlite_engine(ledger_url(path), readonly=False), path)
    assert old.migrate(target=3) == [1, 2, 3]
    old.write([entry(room="vieja")])
    old.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (3,)
    assert "unverified_citations" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()

    await write(path, cited(room="vieja", turn=2))  # the worker's writer brings it to step 4
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (4,)
    conn.close()
    assert [c["call_id"] for c in read_room(path, "vieja")] == ["call-1"]
    assert [(c["turn"], c["article"], c["norm"]) for c in read_room_citations(path, "vieja")] == [
        (2, "99", "constitucion")
    ]
    assert ledger_main(["show", "--room", "vieja", "--path", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Unverified citations: 1" in out and "turn 2  artículo 99 (the Constitution)" in out
    assert ledger_main(["show", "--room", "vieja", "--json", "--path", str(path)]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [(c["article"], c["norm"], c["session_id"]) for c in body["unverified_citations"]] == [
        ("99", "constitucion", "sess-1")
    ]


async def test_unverified_citations_are_append_only_and_written_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    again = cited(norm=None)
    ledger = await write(path, again, again, cited(article="12-A", norm="ley 6 de 2002"))
    assert ledger.dropped == 0
    assert [(c["article"], c["norm"]) for c in read_room_citations(path, "sala-1")] == [
        ("99", None),
        ("12-A", "ley 6 de 2002"),
    ]
    conn = sqlite3.connect(path)
    try:
        for sql in ("UPDATE unverified_citations SET article = '1'", "DELETE FROM unverified_citations"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute(sql)
    finally:
        conn.close()


async def test_forget_and_purge_erase_the_citations_and_count_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "var"
    path = folder / "ledger.sqlite3"
    await write(
        path,
        cited(room="olvidar", article="4711"),
        cited(room="quedar", article="31", ts=NOW - timedelta(days=40)),
        cited(room="quedar", article="32", ts=NOW - timedelta(days=2)),
    )
    assert ledger_main(["forget", "--room", "olvidar", "--path", str(path)]) == 0
    assert "1 unverified citation(s)" in capsys.readouterr().out
    assert read_room_citations(path, "olvidar") == []
    assert b"4711" not in _raw(folder)
    with LedgerStore.open(path) as store:
        done = purge_older_than(store, 30, now=NOW)
    assert (done.calls_removed, done.citations_removed) == (0, 1)
    assert [c["article"] for c in read_room_citations(path, "quedar")] == ["32"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT kind, citations_removed FROM ledger_events ORDER BY id").fetchall() == [
            ("forget", 1),
            ("purge", 1),
        ]
    finally:
        conn.close()
    assert ledger_main(["show", "--room", "olvidar", "--path", str(path)]) == 0
    assert "0 tool call(s) and 1 unverified citation(s) erased on request" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("article", "norm"),
    [
        ("el artículo 74 dice que", "constitucion"),
        ("74", "Mi cédula es 8-123-4567"),
        ("74", "la constitución dice que el trabajador Juan Pérez"),
        ("74", "ley 6 de 2002, que me leyó mi abogado y que dice"),
    ],
)
def test_an_unverified_citation_holds_only_an_article_and_a_norm_key(article: str, norm: str) -> None:
    with pytest.raises(ValueError):
        cited(article=article, norm=norm)


def test_the_stored_columns_are_the_citation_never_the_words() -> None:
    assert [c.name for c in unverified_citations.columns] == [
        "id",
        "entry_id",
        "ts",
        "room",
        "session_id",
        "turn",
        "article",
        "norm",
    ]


@pytest.mark.postgres
async def test_postgres_step_4_app_role_inserts_citations_but_cannot_remove_them(
    pg: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.settings import get_settings
    from tests.test_ledger_roles import APP_ROLE, as_role

    url = pg.create_database("citations_step4")
    monkeypatch.setenv("LEXVOZ_LEDGER_APP_ROLE", APP_ROLE)
    monkeypatch.setenv("LEXVOZ_LEDGER_APP_PASSWORD", "app-password-1")
    get_settings.cache_clear()
    try:
        old = LedgerStore(_pg_engine(ledger_url(url), readonly=False), url)
        assert old.migrate(target=3) == [1, 2, 3]
        old.close()
        assert ledger_main(["migrate", "--url", url]) == 0  # the owner applies step 4 and grants the table
        app = as_role(url, APP_ROLE)
        ledger = await write(app, cited(room="pg"), entry(room="pg"))
        assert (ledger.written, ledger.dropped) == (2, 0)
        assert [c["article"] for c in read_room_citations(app, "pg")] == ["99"]
        for sql in ("UPDATE unverified_citations SET article = '1'", "DELETE FROM unverified_citations"):
            with psycopg.connect(app) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
        with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("DELETE FROM unverified_citations")  # even the owner, outside an erasure
        assert ledger_main(["forget", "--room", "pg", "--url", url]) == 0
        assert read_room_citations(url, "pg") == []
    finally:
        get_settings.cache_clear()
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone():
                conn.execute(f"DROP OWNED BY {APP_ROLE}")
                conn.execute(f"DROP ROLE {APP_ROLE}")


async def test_export_citations_gives_a_periods_unverified_citations_in_order_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger export --citations`: the period's unverified citations, oldest first, across rooms, as JSON lines;
    a citation outside the period and the tool calls stay out; the calls export is unchanged."""
    path = tmp_path / "ledger.sqlite3"
    day = datetime(2025, 3, 3, 12, tzinfo=UTC)
    await write(
        path,
        entry(room="r1", turn=1),
        cited(room="r2", article="7", ts=day + timedelta(hours=2)),
        cited(room="r1", article="12-A", norm="ley 6 de 2002", ts=day),
        cited(room="r1", article="40", ts=day + timedelta(days=1)),
    )
    assert (
        ledger_main(["export", "--path", str(path), "--since", "2025-03-03", "--until", "2025-03-03", "--citations"])
        == 0
    )
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["room"], r["article"], r["norm"]) for r in rows] == [
        ("r1", "12-A", "ley 6 de 2002"),
        ("r2", "7", "constitucion"),
    ]
    assert set(rows[0]) == {"id", "ts", "room", "session_id", "turn", "article", "norm"}
    assert "exported 2 unverified citation(s)" in err
    assert ledger_main(["export", "--path", str(path), "--since", "2025-03-03", "--until", "2025-03-03"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["call_id"] for line in out.splitlines()] == ["call-1"] and "1 tool call(s)" in err
