"""The evidence ledger: an append-only SQLite record of every research tool call and what it showed.

Why: an answer about the law is only as good as the sources behind it, and after a conversation
someone may need to know which questions were researched and which sources the caller was shown.
The ledger stores that without storing the person: the query is kept redacted plus a digest of the
original, and each excerpt is kept as a sha256 of exactly the text that was shown.

Writing must never slow or break a conversation, so `EvidenceLedger.record()` only enqueues; a
background task writes through `asyncio.to_thread`, counts failures, and retries with backoff.

The query is cut to the tool's limit (2,000 characters) before redaction and storage, its digest is keyed,
and the file and folder are owner-only. Reading it (`ledger show`) lives in `agent.ops.ledger_show`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sqlite3
import stat
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.contract import MAX_QUERY_CHARS, OUTCOMES, FailureReason, Outcome
from agent.ops import metrics
from agent.ops.digest import query_digest
from agent.ops.redact import redact

__all__ = [
    "EvidenceLedger",
    "LedgerEntry",
    "LedgerSource",
    "excerpt_sha256",
    "open_ledger",
    "secure_ledger_files",
    "sources_from",
    "stored_query",
]

logger = logging.getLogger("lexvoz.ledger")


LedgerSource = tuple[str, str | None, str]
"""(citation, official_source_url or None, excerpt exactly as shown)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One tool invocation. `query` and each excerpt are the ORIGINAL text: the ledger redacts
    and hashes them itself, so a caller cannot forget to."""

    room: str
    session_id: str
    turn: int
    call_id: str
    tool: str
    query: str
    outcome: Outcome
    duration_ms: float
    reason: FailureReason | None = None
    sources: tuple[LedgerSource, ...] = ()
    ts: datetime = field(default_factory=_utcnow)
    entry_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown ledger outcome {self.outcome!r}")


def sources_from(sources: Iterable[Any]) -> tuple[LedgerSource, ...]:
    """Ledger tuples from `agent.contract.Source` objects (anything with citation/url/excerpt)."""
    return tuple((s.citation, s.official_source_url, s.excerpt) for s in sources)


def stored_query(query: str) -> tuple[str, str]:
    """(redacted text, digest) of the query as the ledger keeps it: cut to the tool's limit first.

    Cutting first bounds the redaction work and the row size whatever a caller sent; the digest covers the
    same cut text, so it still joins the row to the log lines and spans about that question.
    """
    cut = query[:MAX_QUERY_CHARS]
    return redact(cut), query_digest(cut)


def excerpt_sha256(excerpt: str) -> str:
    """sha256 of the excerpt's UTF-8 bytes, unnormalized: it must match what the caller saw."""
    return hashlib.sha256(excerpt.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Schema. Append a new step to MIGRATIONS to change it; never edit a released step.

_APPEND_ONLY = """
CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
BEGIN SELECT RAISE(ABORT, 'evidence ledger is append-only'); END;
"""

MIGRATIONS: tuple[str, ...] = (
    # 1: tool calls and the sources they showed
    """
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
    """
    + _APPEND_ONLY.format(table="tool_calls")
    + _APPEND_ONLY.format(table="sources"),
)
SCHEMA_VERSION = len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    """Split a migration into statements (trigger bodies contain semicolons too)."""
    out: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                out.append(current.strip())
            current = ""
    return out


def _migrate(conn: sqlite3.Connection) -> None:
    """Apply pending steps, each in its own transaction with its version bump.

    The version is re-read under the write lock, so two processes opening a new file at once do
    not both apply the same step.
    """
    for number in range(1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(f"ledger schema {version} is newer than this program ({SCHEMA_VERSION})")
            if version < number:
                for statement in _statements(MIGRATIONS[number - 1]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise


OWNER_ONLY_DIR = 0o700
OWNER_ONLY_FILE = 0o600


def secure_ledger_files(path: Path) -> None:
    """Make the ledger's folder 0700 and the file (and any -wal/-shm beside it) 0600, creating what is missing.

    The file is created before SQLite opens it because SQLite gives its WAL and shared-memory files the
    main file's mode. A shared sticky folder such as /tmp is never narrowed: the ledger needs its own.
    """
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=OWNER_ONLY_DIR, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_mode & stat.S_ISVTX:
        raise PermissionError(f"ledger folder {folder} is a shared sticky folder; give the ledger its own folder")
    if stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.getuid():
        folder.chmod(OWNER_ONLY_DIR)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, OWNER_ONLY_FILE))
    for companion in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_IMODE(companion.stat().st_mode) != OWNER_ONLY_FILE:
                companion.chmod(OWNER_ONLY_FILE)


def open_ledger(path: str | Path) -> sqlite3.Connection:
    """Open (creating an owner-only folder, file and schema as needed) a ledger connection in WAL mode."""
    p = Path(path)
    secure_ledger_files(p)
    conn = sqlite3.connect(p, timeout=5.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _write(conn: sqlite3.Connection, batch: Sequence[LedgerEntry]) -> None:
    """Write a batch in one transaction. Re-writing an entry (a retry after an unclear commit) is a no-op."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for e in batch:
            query_redacted, digest = stored_query(e.query)
            cur = conn.execute(
                "INSERT OR IGNORE INTO tool_calls (entry_id, ts, room, session_id, turn, call_id, tool,"
                " query_redacted, query_digest, outcome, duration_ms, reason)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    e.entry_id,
                    e.ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    e.room,
                    e.session_id,
                    e.turn,
                    e.call_id,
                    e.tool,
                    query_redacted,
                    digest,
                    e.outcome,
                    float(e.duration_ms),
                    e.reason,
                ),
            )
            if cur.rowcount == 0:
                continue
            row = cur.lastrowid
            conn.executemany(
                "INSERT INTO sources (call_row, position, citation, official_source_url, excerpt_sha256)"
                " VALUES (?, ?, ?, ?, ?)",
                [(row, i, c, u, excerpt_sha256(x)) for i, (c, u, x) in enumerate(e.sources, start=1)],
            )
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


# ---------------------------------------------------------------------------------------------
# The writer


class EvidenceLedger:
    """Non-blocking, bounded, retrying writer for the ledger.

    `record()` never raises and never waits. When the queue is full the NEW entry is dropped (the
    backlog stays a contiguous, ordered prefix) and `voice_ledger_dropped_total` counts it.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_queue: int = 1000,
        batch_size: int = 64,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 5.0,
        connect: Callable[[Path], sqlite3.Connection] = open_ledger,
    ) -> None:
        self.path = Path(path)
        self._queue: asyncio.Queue[LedgerEntry] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._inflight = 0
        self._failing = False
        self.written = 0
        self.failures = 0
        self.dropped = 0

    @classmethod
    def from_settings(cls, settings: Any, **kwargs: Any) -> EvidenceLedger:
        return cls(settings.ledger_path, **kwargs)

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def start(self) -> None:
        """Start the background writer. Never raises: an unopenable file is retried like any write."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="evidence-ledger-writer")

    def record(self, entry: LedgerEntry) -> None:
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
        logger.warning("ledger entries dropped", extra={"count": n, "why": why})

    def _write_batch(self, batch: list[LedgerEntry]) -> None:
        if self._conn is None:
            self._conn = self._connect(self.path)
        _write(self._conn, batch)

    def _reset_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            self._inflight = len(batch)
            delay = self._backoff_initial
            while True:
                try:
                    await asyncio.to_thread(self._write_batch, batch)
                    self.written += len(batch)
                    if self._failing:
                        self._failing = False
                        logger.info("ledger writes recovered")
                    break
                except sqlite3.IntegrityError as exc:
                    # the data itself is refused: retrying cannot help
                    self._count_failure(exc)
                    self._drop(len(batch), "rejected by schema")
                    break
                except Exception as exc:
                    self._count_failure(exc)
                    self._reset_connection()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self._backoff_max)
            self._inflight = 0
            for _ in batch:
                self._queue.task_done()

    def _count_failure(self, exc: BaseException) -> None:
        self.failures += 1
        metrics.ledger_write_failures_total.inc()
        # the type only: sqlite messages can quote values. One warning per streak of failures.
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        logger.log(level, "ledger write failed; will retry", extra={"error": type(exc).__name__})

    async def close(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - the API takes a flush budget
        """Flush what is queued (up to `timeout` seconds), then stop. Unflushed entries are counted."""
        self._closing = True
        if self._task is not None:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except TimeoutError:
                pass
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        left = self._queue.qsize() + self._inflight
        self._inflight = 0
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
        if left:
            self._drop(left, "unflushed at close")
        await asyncio.to_thread(self._reset_connection)
