"""Retention, consent and export on SQLite: purge, forget, `LEXVOZ_LEDGER=off`, JSONL by period."""

from __future__ import annotations

import json
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ops.ledger import DisabledLedger, EvidenceLedger, LedgerSource, LedgerStore, job_ledger
from agent.ops.ledger.cli import ledger_main, parse_bound
from agent.ops.ledger.erase import purge_older_than
from agent.ops.ledger.reader import read_room
from agent.settings import Settings, SettingsError, get_settings
from tests.ledger_helpers import EXCERPT, entry, write


def _raw(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.glob("ledger.sqlite3*"))


async def test_purge_removes_only_what_is_older_and_records_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    now = datetime(2025, 6, 1, tzinfo=UTC)
    await write(
        path,
        entry(room="a", turn=1, ts=now - timedelta(days=31)),
        entry(room="a", turn=2, ts=now - timedelta(days=29)),
        entry(room="b", turn=1, ts=now - timedelta(days=90), sources=()),
    )
    store = LedgerStore.open(path)
    try:
        done = purge_older_than(store, 30, now=now)
        with pytest.raises(ValueError):
            purge_older_than(store, 0)
    finally:
        store.close()
    assert (done.calls_removed, done.sources_removed) == (2, 1)
    assert done.cutoff == "2025-05-02T00:00:00.000Z"
    assert [c["turn"] for c in read_room(path, "a")] == [2] and read_room(path, "b") == []
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT kind, cutoff, calls_removed, sources_removed FROM ledger_events").fetchall() == [
            ("purge", "2025-05-02T00:00:00.000Z", 2, 1)
        ]
        assert conn.execute("SELECT count(*) FROM ledger_erasure_gate").fetchone() == (0,)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):  # outside purge, still refused
            conn.execute("DELETE FROM tool_calls")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):  # the record of erasures is kept
            conn.execute("DELETE FROM ledger_events")
    finally:
        conn.close()


async def test_forget_erases_the_room_text_from_the_file_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "var"
    path = folder / "ledger.sqlite3"
    secret_excerpt = "Texto único OLVIDABLE-7731 que solo vio esta sala."
    await write(path, entry(room="olvidar", sources=(LedgerSource("cita", None, secret_excerpt),)))
    await write(path, entry(room="quedar"))
    assert b"OLVIDABLE-7731" in _raw(folder)
    assert ledger_main(["forget", "--room", "olvidar", "--path", str(path)]) == 0
    assert "forgot room olvidar: 1 tool call(s), 1 source(s)" in capsys.readouterr().out
    assert read_room(path, "olvidar") == [] and len(read_room(path, "quedar")) == 1
    assert b"OLVIDABLE-7731" not in _raw(folder)  # overwritten, not left in free pages or the WAL
    assert ledger_main(["show", "--room", "olvidar", "--path", str(path)]) == 0
    out = capsys.readouterr().out
    assert "No tool calls recorded" in out and "1 tool call(s) erased on request" in out


async def test_purge_cli_uses_the_retention_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite3"
    await write(path, entry(ts=datetime.now(UTC) - timedelta(days=10)), entry(turn=2, ts=datetime.now(UTC)))
    monkeypatch.delenv("LEXVOZ_LEDGER_RETENTION_DAYS", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    get_settings.cache_clear()
    try:
        assert ledger_main(["purge", "--path", str(path)]) == 2
        assert "LEXVOZ_LEDGER_RETENTION_DAYS" in capsys.readouterr().err
        monkeypatch.setenv("LEXVOZ_LEDGER_RETENTION_DAYS", "7")
        get_settings.cache_clear()
        assert ledger_main(["purge", "--path", str(path)]) == 0
        assert "purged 1 tool call(s)" in capsys.readouterr().out
        assert ledger_main(["purge", "--older-than-days", "0", "--path", str(path)]) == 2
    finally:
        get_settings.cache_clear()
    assert [c["turn"] for c in read_room(path, "sala-1")] == [2]


async def test_export_writes_jsonl_for_the_period(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.sqlite3"
    day = datetime(2025, 3, 3, tzinfo=UTC)
    await write(
        path,
        entry(room="antes", ts=day - timedelta(seconds=1)),
        entry(room="r1", turn=1, ts=day),
        entry(room="r2", turn=1, ts=day + timedelta(hours=23, minutes=59)),
        entry(room="despues", ts=day + timedelta(days=1)),
    )
    out = tmp_path / "export.jsonl"
    assert (
        ledger_main(
            ["export", "--since", "2025-03-03", "--until", "2025-03-03", "--path", str(path), "--output", str(out)]
        )
        == 0
    )
    assert "exported 2 tool call(s)" in capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["room"] for r in rows] == ["r1", "r2"]
    assert rows[0]["sources"][0]["excerpt"] == EXCERPT and "8-123-4567" not in out.read_text(encoding="utf-8")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # an exact time as the end is excluded; bad bounds are usage errors
    assert ledger_main(["export", "--since", "2025-03-03", "--until", "2025-03-03T23:59:00Z", "--path", str(path)]) == 0
    assert [json.loads(x)["room"] for x in capsys.readouterr().out.splitlines()] == ["r1"]
    assert ledger_main(["export", "--since", "2025-03-04", "--until", "2025-03-03", "--path", str(path)]) == 2
    assert ledger_main(["export", "--since", "ayer", "--until", "2025-03-03", "--path", str(path)]) == 2
    assert parse_bound("2025-03-03T10:00", end=False) == datetime(2025, 3, 3, 10, tzinfo=UTC)


def test_settings_choose_the_store(tmp_path: Path) -> None:
    default = Settings(LEXVOZ_LEDGER_PATH=tmp_path / "l.sqlite3")
    assert default.ledger_enabled and default.ledger_location == tmp_path / "l.sqlite3"
    pg = Settings(LEXVOZ_LEDGER_URL="postgresql://lexvoz:pw@db:5432/ledger")
    assert pg.ledger_location == "postgresql://lexvoz:pw@db:5432/ledger"
    assert Settings(LEXVOZ_LEDGER_URL="").ledger_location == Path("var/ledger.sqlite3")
    assert Settings(LEXVOZ_LEDGER_RETENTION_DAYS="90").ledger_retention_days == 90
    with pytest.raises(Exception, match="LEXVOZ_LEDGER_URL"):
        Settings(LEXVOZ_LEDGER_URL="mysql://x/y")
    with pytest.raises(Exception, match="LEXVOZ_LEDGER_RETENTION_DAYS"):
        Settings(LEXVOZ_LEDGER_RETENTION_DAYS="0")
    assert isinstance(SettingsError("x"), RuntimeError)


async def test_ledger_off_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    off = job_ledger(Settings(LEXVOZ_LEDGER="off", LEXVOZ_LEDGER_PATH=path))
    assert isinstance(off, DisabledLedger)
    await off.start()
    off.record(entry())
    await off.close()
    assert not path.exists() and not (tmp_path / "ledger-spool").exists()
    on = job_ledger(Settings(LEXVOZ_LEDGER_PATH=path))
    assert isinstance(on, EvidenceLedger) and on.location == tmp_path / "ledger-spool"


def test_cli_refuses_an_unknown_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert ledger_main(["show", "--room", "x", "--url", "mysql://h/db"]) == 2
    assert "unsupported ledger URL scheme" in capsys.readouterr().err
