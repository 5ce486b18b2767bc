"""Where spent resume tokens are remembered: a table every replica of the page service shares.

Why not memory: a set in one process forgets everything on restart, and a second replica (sharing the
LiveKit secret, so accepting the same tokens) never saw it; a copied resume token was accepted again and,
joining as the same identity, threw the real user out of their conversation. So a spent token's id (its
`jti`) is written to a table until the token expires:

- PostgreSQL, when `LEXVOZ_LEDGER_URL` is one: the ledger database, table `resume_tokens_spent`, created by
  the ledger's migration step 3 (run `python -m agent ledger migrate` as the owner; this service never runs
  DDL there and its role needs only SELECT, INSERT and DELETE on that table);
- otherwise a SQLite file (`LEXVOZ_SPENT_TOKENS_PATH`, default beside the ledger) in an owner-only folder, in
  WAL mode with a busy timeout (the same file rules as the ledger's, from `agent.stores`), so the replicas on
  one host share it safely.

Spending is one INSERT of the jti as primary key: of two replicas spending the same token at once, the
database lets exactly one row in and the other sees the conflict. Expired rows are purged a bounded batch
at a time, after the spend, and only once they are well past expiry (`PURGE_GRACE_S`), so a replica whose
clock runs a little behind never accepts a token whose row another replica already dropped.

The table is defined here rather than imported from the ledger package: this separate program may import
only the shared base (settings, contract, stores: `tests/test_layout.py`). The ledger's step 3 builds the
same columns, which `tests/test_ledger_postgres.py` checks against `spent_tokens` below.

Every call is blocking database I/O and runs in a worker thread (`asyncio.to_thread`), never on the event
loop. Any failure to reach or use the store raises `SpentStoreUnavailable`: the caller refuses the resume.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from sqlalchemy import BigInteger, Column, Engine, MetaData, Table, Text, create_engine, delete, event, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

from agent.settings import Settings
from agent.stores import SQLITE_BUSY_TIMEOUT_S, enable_wal, is_postgres_url, secure_sqlite_files

__all__ = ["PURGE_BATCH", "PURGE_GRACE_S", "SpentStoreUnavailable", "SpentTokens", "spent_tokens"]

log = logging.getLogger("lexvoz.web")

TABLE_NAME: Final = "resume_tokens_spent"
# Expired rows removed per spend: the work of one request stays bounded however many piled up.
PURGE_BATCH: Final = 100
# A row outlives its token by this much, covering clock differences between replicas.
PURGE_GRACE_S: Final = 300
CONNECT_TIMEOUT_S: Final = 5
STATEMENT_TIMEOUT_MS: Final = 5000

metadata = MetaData()
spent_tokens = Table(
    TABLE_NAME,
    metadata,
    Column("jti", Text, primary_key=True),
    Column("expires_at", BigInteger, nullable=False, index=True),
)


class SpentStoreUnavailable(RuntimeError):
    """The store of spent tokens cannot be reached or used; a resume must be refused, not trusted."""


def _pg_url(location: str) -> URL | None:
    """The SQLAlchemy URL when `location` is a PostgreSQL URL, else None."""
    return make_url(location).set(drivername="postgresql+psycopg") if is_postgres_url(location) else None


def _sqlite_engine(path: Path) -> Engine:
    url = URL.create("sqlite+pysqlite", database=str(path))
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's implicit one
        enable_wal(dbapi_conn)
        dbapi_conn.execute("PRAGMA synchronous=FULL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock up front, waiting up to the busy timeout

    return engine


def _pg_engine(url: URL) -> Engine:
    return create_engine(
        url,
        pool_size=4,
        max_overflow=4,
        pool_timeout=CONNECT_TIMEOUT_S,
        pool_pre_ping=True,
        connect_args={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "tcp_user_timeout": 15_000,
            "application_name": "lexvoz-web",
            # two replicas inserting one jti: the second waits for the first's commit, never for long
            "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        },
    )


class SpentTokens:
    """The shared record of spent resume tokens: `spend` once per jti, across restarts and replicas."""

    def __init__(self, location: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.location = location
        self._clock = clock
        url = _pg_url(location) if isinstance(location, str) else None
        self.shared_database = url is not None
        self._url = url
        self._engine: Engine | None = None
        self._opening = threading.Lock()
        self._purge_failing = False

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> SpentTokens:
        """The ledger's PostgreSQL database when LEXVOZ_LEDGER_URL is one, else the local file."""
        url = settings.ledger_url
        if url is not None and is_postgres_url(url):
            return cls(url, **kwargs)
        return cls(settings.spent_tokens_file, **kwargs)

    def _open(self) -> Engine:
        with self._opening:
            return self._engine or self._create()

    def _create(self) -> Engine:
        if self._engine is None:
            if self._url is not None:
                self._engine = _pg_engine(self._url)
            else:
                path = Path(self.location)
                secure_sqlite_files(path, "spent-token store")
                engine = _sqlite_engine(path)
                try:
                    metadata.create_all(engine)  # this service's own file: it owns the schema
                except BaseException:
                    engine.dispose()
                    raise
                self._engine = engine
        return self._engine

    def spend_now(self, jti: str, expires_at: int) -> bool:
        """Record `jti` as spent; True if this call spent it, False if it already was. Blocking."""
        insert = pg_insert if self.shared_database else sqlite_insert
        try:
            engine = self._open()
            with engine.begin() as conn:
                stmt = (
                    insert(spent_tokens)
                    .values(jti=jti, expires_at=int(expires_at))
                    .on_conflict_do_nothing()
                    .returning(spent_tokens.c.jti)
                )
                won = conn.execute(stmt).scalar_one_or_none() is not None
        except (SQLAlchemyError, OSError) as exc:
            raise SpentStoreUnavailable(type(exc).__name__) from exc
        try:
            self.purge_now()
        except (SQLAlchemyError, OSError) as exc:  # the spend is committed; cleaning up can wait
            if not self._purge_failing:
                log.warning("expired spent resume tokens not purged (%s); will retry", type(exc).__name__)
            self._purge_failing = True
        else:
            self._purge_failing = False
        return won

    def purge_now(self) -> int:
        """Delete at most PURGE_BATCH rows whose tokens expired more than PURGE_GRACE_S ago. Blocking."""
        cutoff = int(self._clock()) - PURGE_GRACE_S
        oldest = (
            select(spent_tokens.c.jti)
            .where(spent_tokens.c.expires_at < cutoff)
            .order_by(spent_tokens.c.expires_at)
            .limit(PURGE_BATCH)
        )
        # No FOR UPDATE SKIP LOCKED: PostgreSQL would demand UPDATE on the table. Two replicas purging at once
        # at worst wait on each other's rows for a moment (or one fails, which only postpones its purge).
        with self._open().begin() as conn:
            gone = conn.execute(
                delete(spent_tokens).where(spent_tokens.c.jti.in_(oldest)).returning(spent_tokens.c.jti)
            )
            return len(gone.all())

    async def spend(self, jti: str, expires_at: int) -> bool:
        """`spend_now` in a worker thread, so the event loop never waits on the database."""
        return await asyncio.to_thread(self.spend_now, jti, expires_at)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
