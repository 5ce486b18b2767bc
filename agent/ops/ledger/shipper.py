"""The worker process's one writer of the ledger: what its conversations put in the host's spool, into the store.

Why here and not in each conversation: a job process that opened the store carried SQLAlchemy and a database
connection of its own (one PostgreSQL connection per conversation), checked the schema at every job's start, and
held an entry in memory until its insert committed. Conversations now put each batch in the spool, fsynced
(`writer.job_ledger`), and this shipper, in the worker's main process, writes the spool to the store through one
connection: files in the order they were written, each in one transaction, removed once committed. A store that
is down is retried with backoff (one warning per streak); the files wait on disk meanwhile, as they wait across a
worker restart. The store ignores an entry it already has, so a file sent twice (a crash between commit and
removal, two workers on one host) keeps one row per entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from agent.ops import metrics
from agent.ops.ledger.errors import LedgerSchemaError
from agent.ops.ledger.spool import LedgerSpool
from agent.ops.ledger.store import LedgerStore, describe_location

__all__ = ["SpoolShipper"]

logger = logging.getLogger("lexvoz.ledger")


class SpoolShipper:
    """Writes the spool to the store every `interval_s` while there is something to write; `close` sends the rest."""

    def __init__(
        self,
        location: str | Path,
        spool: LedgerSpool,
        *,
        interval_s: float = 0.2,
        backoff_max_s: float = 5.0,
        connect: Callable[[str | Path], LedgerStore] = LedgerStore.open,
    ) -> None:
        self.location = location
        self.spool = spool
        self.interval_s = interval_s
        self.backoff_max_s = backoff_max_s
        self._connect = connect
        self._store: LedgerStore | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = threading.Lock()  # one pass at a time: the loop's, or the last one at close
        self._closing = False
        self._failing = False
        self.shipped = 0
        self.failures = 0

    def start(self) -> None:
        """Open the store and start shipping (in the background; never raises: a store that is down is retried)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="evidence-ledger-shipper")

    def ship_once(self) -> int:
        """One pass, in the caller's thread: open the store if needed and write every spooled file. Raises what the
        store raises (the store is down); files not written stay in the spool."""
        with self._lock:
            if self._store is None:
                self._store = self._connect(self.location)  # checks or migrates the schema
            if self.spool.pending() == 0:
                return 0
            sent = self.spool.replay(self._store.write_rows)
            self.shipped += sent
            return sent

    def _last_pass(self) -> None:
        try:
            self.ship_once()
        except Exception as exc:
            what = type(exc).__name__
            logger.warning("ledger spool not fully written at shutdown (%s); kept for the next start", what)
        self._reset_store()

    async def _run(self) -> None:
        try:
            await self._ship_forever()
        except asyncio.CancelledError:
            # the worker's loop is ending (livekit-agents cancels every task once its jobs are done): what they
            # spooled last is sent now rather than at the next start
            if not self._closing:
                await asyncio.to_thread(self._last_pass)
            raise

    async def _ship_forever(self) -> None:
        delay = self.interval_s
        while True:
            try:
                await asyncio.to_thread(self.ship_once)
            except Exception as exc:
                self._count_failure(exc)
                await asyncio.to_thread(self._reset_store)
                delay = min(max(delay * 2, 0.05), self.backoff_max_s)
            else:
                if self._failing:
                    self._failing = False
                    logger.info("ledger writes recovered")
                delay = self.interval_s
            await asyncio.sleep(delay)

    def _count_failure(self, exc: BaseException) -> None:
        self.failures += 1
        metrics.ledger_write_failures_total.inc()
        # the type only: database messages can quote values. One warning per streak of failures.
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        what = type(exc).__name__
        if isinstance(exc, LedgerSchemaError):  # our own words (who must migrate), never stored data
            what = f"{what}: {exc}"
        logger.log(
            level,
            "ledger write to %s failed (%s); the spool keeps the entries and it will retry",
            describe_location(self.location),
            what,
            extra={"error": type(exc).__name__},
        )

    def _reset_store(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()

    async def close(self) -> None:
        """Stop, then send what the spool holds; what the store does not take stays on disk for the next writer on
        this host."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self._last_pass)
