"""A conversation's ledger entries go to the host's spool; the worker process writes the spool to the store.

Why: a job process that opened the store carried SQLAlchemy and a database connection of its own, and held each
entry in memory until its insert committed. The soak lost one entry that way (a worker killed seconds after its
job's search). Now an entry is an fsynced file of the spool within milliseconds, and one writer per worker sends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.ops.ledger import LedgerStore, UnverifiedCitation, job_ledger
from agent.ops.ledger.reader import read_room, read_room_citations
from agent.ops.ledger.shipper import SpoolShipper
from agent.ops.ledger.spool import REJECTED, LedgerSpool
from agent.settings import Settings
from tests.ledger_helpers import QUERY, entry


def _settings(tmp_path: Path) -> Settings:
    return Settings(LEXVOZ_REHEARSAL=True, LEXVOZ_LEDGER_PATH=tmp_path / "ledger.sqlite3")


async def test_a_jobs_ledger_puts_each_entry_in_the_spool_and_never_opens_the_store(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    ledger = job_ledger(settings)
    await ledger.start()
    ledger.record(entry(turn=1))
    ledger.record(UnverifiedCitation(room="sala-1", session_id="sess-1", turn=1, article="75", norm="constitucion"))
    await ledger.flush()  # type: ignore[union-attr]
    spool = LedgerSpool(settings.ledger_spool_dir)
    assert spool.pending() >= 1  # on disk before the job ends
    await ledger.close()
    assert not settings.ledger_path.exists()  # the job never touched the store
    text = "".join(p.read_text(encoding="utf-8") for p in settings.ledger_spool_dir.iterdir())
    assert "8-123-4567" not in text and QUERY not in text  # only the stored (redacted) form is spooled

    shipper = SpoolShipper(settings.ledger_location, spool)
    await shipper.close()
    assert shipper.shipped == 2 and spool.pending() == 0
    assert [r["turn"] for r in read_room(settings.ledger_path, "sala-1")] == [1]
    assert [c["article"] for c in read_room_citations(settings.ledger_path, "sala-1")] == ["75"]


async def test_the_shipper_writes_what_conversations_spool_while_it_runs(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    shipper = SpoolShipper(settings.ledger_location, LedgerSpool(settings.ledger_spool_dir), interval_s=0.02)
    shipper.start()
    try:
        for turn in (1, 2):
            ledger = job_ledger(settings)  # two conversations, one after the other
            await ledger.start()
            ledger.record(entry(turn=turn, call_id=f"call-{turn}"))
            await ledger.close()
        for _ in range(200):
            if shipper.shipped == 2:  # written without waiting for a close
                break
            await asyncio.sleep(0.02)
        assert [r["turn"] for r in read_room(settings.ledger_path, "sala-1")] == [1, 2]
    finally:
        await shipper.close()


async def test_a_store_that_is_down_keeps_the_entries_in_the_spool_until_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path)
    spool = LedgerSpool(settings.ledger_spool_dir)
    down = True

    def connect(location: str | Path) -> LedgerStore:
        if down:
            raise sqlite3.OperationalError("connection refused")
        return LedgerStore.open(location)

    shipper = SpoolShipper(settings.ledger_location, spool, interval_s=0.01, backoff_max_s=0.02, connect=connect)
    ledger = job_ledger(settings)
    await ledger.start()
    ledger.record(entry(turn=1))
    await ledger.close()
    shipper.start()
    try:
        await asyncio.sleep(0.2)
        assert shipper.failures >= 2 and spool.pending() == 1  # retried, nothing lost
        assert caplog.text.count("ledger write to") == 1  # one warning per streak, not one per try
        down = False
        for _ in range(200):
            if spool.pending() == 0:
                break
            await asyncio.sleep(0.01)
        assert [r["turn"] for r in read_room(settings.ledger_path, "sala-1")] == [1]
    finally:
        await shipper.close()


async def test_a_spool_file_the_store_refuses_is_set_aside_and_the_rest_is_written(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    spool = LedgerSpool(settings.ledger_spool_dir)
    bad = {"kind": "call", "values": {"entry_id": "x", "outcome": "not-an-outcome"}, "sources": []}
    spool.put([bad])  # a row no store can take (its outcome breaks a constraint)
    ledger = job_ledger(settings)
    await ledger.start()
    ledger.record(entry(turn=1))
    await ledger.close()
    shipper = SpoolShipper(settings.ledger_location, spool)
    await shipper.close()
    assert [r["turn"] for r in read_room(settings.ledger_path, "sala-1")] == [1]
    assert spool.pending() == 0  # not retried forever
    aside = [p for p in settings.ledger_spool_dir.iterdir() if p.name.endswith(REJECTED)]
    assert len(aside) == 1 and json.loads(aside[0].read_text(encoding="utf-8"))["values"]["entry_id"] == "x"


def test_an_entry_recorded_before_its_job_is_killed_reaches_the_store(tmp_path: Path) -> None:
    """The soak's lost entry: a worker killed (SIGKILL) seconds after its job's search. Spooled, it survives."""
    settings = _settings(tmp_path)
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from agent.ops.ledger import job_ledger
        from agent.settings import Settings
        from tests.ledger_helpers import entry

        async def main():
            ledger = job_ledger(Settings(LEXVOZ_REHEARSAL=True, LEXVOZ_LEDGER_PATH={str(settings.ledger_path)!r}))
            await ledger.start()
            ledger.record(entry(turn=1))
            await ledger.flush()
            os.kill(os.getpid(), signal.SIGKILL)  # no close, no shutdown callback

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]

    asyncio.run(SpoolShipper(settings.ledger_location, LedgerSpool(settings.ledger_spool_dir)).close())
    assert [r["turn"] for r in read_room(settings.ledger_path, "sala-1")] == [1]
