"""Entries a conversation could not write before it ended are kept on the host and written later.

Found by the soak benchmark (bench/soak.py): with the ledger's database stopped for a minute, every conversation
that ended in that minute dropped its unwritten entries ("unflushed at close"), so searches the page had shown
were missing from the ledger.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

from agent.ops.ledger import EvidenceLedger, LedgerStore, UnverifiedCitation, job_ledger
from agent.ops.ledger.entry import stored_row
from agent.ops.ledger.reader import read_room, read_room_citations
from agent.ops.ledger.spool import LedgerSpool
from agent.settings import Settings
from tests.ledger_helpers import EXCERPT, QUERY, entry


def _down(_location: str | Path) -> LedgerStore:
    raise sqlite3.OperationalError("connection refused")


async def _end_while_down(spool: LedgerSpool | None, *records: object) -> EvidenceLedger:
    ledger = EvidenceLedger("unused", connect=_down, backoff_initial_s=0.001, backoff_max_s=0.01, spool=spool)
    await ledger.start()
    for record in records:
        ledger.record(record)  # type: ignore[arg-type]
    await ledger.close(timeout=0.05)
    return ledger


async def test_entries_unwritten_at_close_are_spooled_then_written_by_the_next_writer(tmp_path: Path) -> None:
    spool = LedgerSpool(tmp_path / "spool")
    citation = UnverifiedCitation(room="sala-1", session_id="sess-1", turn=2, article="75", norm="constitucion")
    first = await _end_while_down(spool, entry(turn=1), entry(turn=2), citation)
    assert first.dropped == 0 and first.spooled == 3

    store = tmp_path / "ledger.sqlite3"
    later = EvidenceLedger(store, spool=spool)  # the next conversation on this host, with the store back
    await later.start()
    await later.flush_spool()
    await later.close(timeout=5)
    assert [c["turn"] for c in read_room(store, "sala-1")] == [1, 2]
    assert [c["article"] for c in read_room_citations(store, "sala-1")] == ["75"]
    assert spool.pending() == 0


async def test_a_spool_written_twice_keeps_one_row_per_entry(tmp_path: Path) -> None:
    spool = LedgerSpool(tmp_path / "spool")
    one = entry(turn=1)
    await _end_while_down(spool, one)
    store = tmp_path / "ledger.sqlite3"
    with LedgerStore.open(store) as s:
        s.migrate()
        s.write([one])  # the entry reached the store once already (its answer was lost)
    later = EvidenceLedger(store, spool=spool)
    await later.start()
    await later.flush_spool()
    await later.close(timeout=5)
    assert len(read_room(store, "sala-1")) == 1


async def test_the_spool_holds_only_what_the_ledger_would_keep(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    await _end_while_down(LedgerSpool(spool_dir), entry(turn=1))
    files = list(spool_dir.iterdir())
    assert files
    text = "".join(f.read_text(encoding="utf-8") for f in files)
    assert "8-123-4567" not in text and QUERY not in text  # the question as redacted, as the ledger keeps it
    assert EXCERPT[:20] in text  # excerpts are kept (redacted) as shown, as in the ledger
    assert stat.S_IMODE(spool_dir.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)


async def test_without_a_spool_unwritten_entries_are_still_counted_as_dropped(tmp_path: Path) -> None:
    ledger = await _end_while_down(None, entry(turn=1))
    assert ledger.dropped == 1


async def test_a_conversations_ledger_spools_beside_the_local_ledger_file(tmp_path: Path) -> None:
    settings = Settings(LEXVOZ_LEDGER_PATH=str(tmp_path / "var" / "ledger.sqlite3"))
    ledger = job_ledger(settings)
    assert isinstance(ledger, EvidenceLedger) and ledger.location == tmp_path / "var" / "ledger-spool"
    await ledger.start()
    assert not (tmp_path / "var" / "ledger-spool").exists()  # made when first needed, not at every job start
    ledger.record(entry(turn=1))
    await ledger.close()
    assert LedgerSpool(tmp_path / "var" / "ledger-spool").pending() == 1


def test_a_claim_left_by_a_process_that_is_gone_is_taken_over_at_once(tmp_path: Path) -> None:
    # A worker killed in the middle of a pass leaves its claim; waiting `stale_claim_s` (10 minutes) would keep
    # those entries out of the ledger that long.
    spool = LedgerSpool(tmp_path / "spool")
    spool.put([stored_row(entry(turn=1))])
    (pending,) = list(spool.directory.iterdir())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stem = pending.name.split(".", 1)[0]
    os.replace(pending, pending.with_name(f"{stem}.{gone.pid}.jsonl.claimed"))
    alive = spool.directory / f"{time.time_ns()}-x.{os.getpid()}.jsonl.claimed"
    alive.write_text(json.dumps(stored_row(entry(turn=2))) + "\n", encoding="utf-8")  # a pass still running here

    written: list[object] = []
    assert spool.replay(lambda rows: written.extend(rows) or len(rows)) == 1
    assert [r["values"]["turn"] for r in written] == [1]  # type: ignore[index]
    assert alive.exists()
