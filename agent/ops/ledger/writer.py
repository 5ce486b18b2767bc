"""The ledger writer a conversation talks to: never waits, never raises, bounded, retrying.

Why a queue and a thread: where entries go can be slow or gone (a full disk, a PostgreSQL server restarting),
and a person is talking meanwhile. `record()` only enqueues; one background task writes batches through
`asyncio.to_thread` to its sink, and on failure keeps the batch, backs off and tries again. A conversation's sink
is the host's spool (`job_ledger`: each batch one fsynced file, which the worker process's `shipper` writes to
the store); a writer given the store itself (the default sink) writes there, and at close
leaves what the store did not take in the spool. Only what cannot be kept is lost, and each such entry is
counted in `voice_ledger_dropped_total` and logged: the queue is full (the newest entry is refused, so the
backlog stays an ordered prefix), the sink refuses the data itself, or the job ends with entries its sink never
took and no spool can keep them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent.ops import metrics
from agent.ops.ledger.entry import LedgerRecord, StoredRow, stored_row
from agent.ops.ledger.errors import LedgerRejected, LedgerSchemaError
from agent.ops.ledger.spool import LedgerSpool, SpoolSink

__all__ = ["DisabledLedger", "EvidenceLedger", "Ledger", "LedgerSink", "job_ledger"]

logger = logging.getLogger("lexvoz.ledger")


class LedgerSink(Protocol):
    """Where the writer's batches go: the store itself (`LedgerStore`), or the host's spool (`SpoolSink`)."""

    def write(self, batch: Sequence[LedgerRecord]) -> int: ...

    def write_rows(self, rows: Sequence[StoredRow]) -> int: ...

    def close(self) -> None: ...


def open_store(location: str | Path) -> LedgerSink:
    """The store at `location` (SQLAlchemy is imported here, never by a job process that only spools)."""
    from agent.ops.ledger.store import LedgerStore

    return LedgerStore.open(location)


def _describe(location: str | Path) -> str:
    from agent.ops.ledger.store import describe_location

    return describe_location(location)


class Ledger(Protocol):
    """What a job needs of a ledger: start it, hand it entries, close it."""

    async def start(self) -> None: ...

    def record(self, entry: LedgerRecord) -> None: ...

    async def close(self, timeout: float = 5.0) -> None: ...  # noqa: ASYNC109 - a flush budget


class DisabledLedger:
    """`LEXVOZ_LEDGER=off`: nothing is kept, nothing is counted as lost."""

    enabled = False

    async def start(self) -> None:
        logger.info("evidence ledger is off (LEXVOZ_LEDGER=off): no tool calls are recorded")

    def record(self, entry: LedgerRecord) -> None:
        return None

    async def close(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - same signature as the writer
        return None


def job_ledger(settings: Any, **kwargs: Any) -> EvidenceLedger | DisabledLedger:
    """A conversation's ledger: its entries go to the host's spool, which the worker process writes to the store
    (`shipper`), or nothing when the operator turned it off.

    Why not the store itself: a job process that opens the store carries SQLAlchemy and a database connection
    of its own (one PostgreSQL connection per conversation, ~10 MB of each job process's memory, a schema check
    at each job's start), and an entry waits in the job's memory until its insert commits, so a job killed by
    then loses it. Through the spool an entry is on the host's disk (fsynced) within milliseconds, whatever
    happens to the job after that, and one connection per worker writes them all."""
    if not settings.ledger_enabled:
        return DisabledLedger()
    spool = LedgerSpool(settings.ledger_spool_dir)
    return EvidenceLedger(
        settings.ledger_spool_dir,
        connect=lambda _: SpoolSink(spool),
        describe=lambda path: f"the spool {path}",
        **kwargs,
    )


class EvidenceLedger:
    """Non-blocking, bounded, retrying writer for the ledger.

    `record()` never raises and never waits. When the queue is full the NEW entry is dropped (the
    backlog stays a contiguous, ordered prefix) and `voice_ledger_dropped_total` counts it.
    """

    enabled = True

    def __init__(
        self,
        location: str | Path,
        *,
        max_queue: int = 1000,
        batch_size: int = 64,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 5.0,
        connect: Callable[[str | Path], LedgerSink] = open_store,
        spool: LedgerSpool | None = None,
        describe: Callable[[str | Path], str] = _describe,
    ) -> None:
        self.location = location
        self._queue: asyncio.Queue[LedgerRecord] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self._connect = connect
        self._store: LedgerSink | None = None
        self._store_lock = threading.Lock()  # the writer's and the spool's threads open the store once between them
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._inflight: list[LedgerRecord] = []
        self._failing = False
        self.spool = spool
        self._describe = describe
        self.spooled = 0
        self._spool_task: asyncio.Task[None] | None = None
        self.written = 0
        self.failures = 0
        self.dropped = 0

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def start(self) -> None:
        """Start the background writer, and open the store at once. Never raises: an unopenable store is retried
        like any write.

        Why open it now: opening checks or migrates the schema, a few round trips that a fresh job process on a
        busy host took long enough for a worker killed just after a search to lose that search's entry (its
        `completed` already on the page). Opened while the person is greeted, the first entry waits only for its
        own insert."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="evidence-ledger-writer")
            # then what conversations before this one could not write
            self._spool_task = asyncio.create_task(self.flush_spool(open_store=True), name="evidence-ledger-open")

    def _open_store(self) -> LedgerSink:
        with self._store_lock:
            if self._store is None:
                self._store = self._connect(self.location)
            return self._store

    def record(self, entry: LedgerRecord) -> None:
        try:
            if self._closing:
                raise asyncio.QueueFull
            self._queue.put_nowait(entry)
        except asyncio.QueueFull:
            self._drop(1, "queue full" if not self._closing else "ledger closed")
        except Exception:  # never let bookkeeping break the conversation
            logger.exception("ledger record failed")

    def _drop(self, n: int, why: str) -> None:
        self.dropped += n
        metrics.ledger_dropped_total.inc(n)
        logger.warning("ledger entries dropped: %d (%s)", n, why, extra={"count": n, "why": why})

    def _write_batch(self, batch: list[LedgerRecord]) -> None:
        self._open_store().write(batch)

    def _reset_store(self) -> None:
        with self._store_lock:
            store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()

    def _replay_spool(self, *, open_store: bool = False) -> None:
        """Write what earlier conversations on this host left in the spool (the store is reachable now)."""
        if open_store:
            self._open_store()
        if self.spool is None or self.spool.pending() == 0:
            return
        self.spool.replay(self._open_store().write_rows)

    async def flush_spool(self, *, open_store: bool = False) -> None:
        """Write the spool now (`open_store`: open the store even with nothing to replay); a store still down
        leaves both for later, to the first write (never raises)."""
        try:
            await asyncio.to_thread(self._replay_spool, open_store=open_store)
        except Exception as exc:
            logger.debug("ledger store not opened or spool not written yet (%s)", type(exc).__name__)
            await asyncio.to_thread(self._reset_store)

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            self._inflight = batch
            delay = self._backoff_initial
            while True:
                try:
                    await asyncio.to_thread(self._write_batch, batch)
                    self.written += len(batch)
                    if self._failing:
                        self._failing = False
                        logger.info("ledger writes recovered")
                        await self.flush_spool()
                    break
                except LedgerRejected as exc:
                    # the data itself is refused: retrying cannot help
                    self._count_failure(exc)
                    self._drop(len(batch), "rejected by schema")
                    break
                except Exception as exc:
                    self._count_failure(exc)
                    await asyncio.to_thread(self._reset_store)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self._backoff_max)
            self._inflight = []
            for _ in batch:
                self._queue.task_done()

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
            "ledger write to %s failed (%s); will retry",
            self._describe(self.location),
            what,
            extra={"error": type(exc).__name__},
        )

    async def flush(self) -> None:
        """Wait until every entry recorded so far is written or given up (no time limit: see `close`)."""
        await self._queue.join()

    async def close(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - the API takes a flush budget
        """Flush what is queued (up to `timeout` seconds), then stop. Unflushed entries are counted."""
        self._closing = True
        if self._spool_task is not None:  # its thread shares the store: let it finish first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._spool_task), timeout)
        if self._task is not None:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except TimeoutError:
                pass
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        left = list(self._inflight)
        self._inflight = []
        while not self._queue.empty():
            left.append(self._queue.get_nowait())
            self._queue.task_done()
        if left:
            await self._spool_or_drop(left)
        await asyncio.to_thread(self._reset_store)

    async def _spool_or_drop(self, left: list[LedgerRecord]) -> None:
        """Entries the store did not take before the job ends: into the host's spool, else counted as lost."""
        if self.spool is not None:
            try:
                await asyncio.to_thread(self.spool.put, [stored_row(e) for e in left])
            except Exception as exc:
                logger.warning("ledger spool unusable (%s)", type(exc).__name__)
            else:
                self.spooled += len(left)
                logger.warning(
                    "ledger entries spooled: %d (store unreachable at close; the next writer writes them)",
                    len(left),
                    extra={"count": len(left)},
                )
                return
        self._drop(len(left), "unflushed at close")
