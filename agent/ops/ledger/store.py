"""Where the ledger lives: a SQLite file (one host) or a PostgreSQL database (many workers, one record).

Why one module for both: an auditor asks the same questions of either, so both are reached through
SQLAlchemy Core with the same tables, steps and queries; only the connection set-up differs. SQLite gets
an owner-only folder and file, WAL, full sync and `BEGIN IMMEDIATE` (so a writer takes the lock up
front); PostgreSQL (psycopg 3) gets short connect and TCP timeouts, so a dead database fails a write
within seconds instead of holding the writer's thread.

A writable open migrates the store when the role may (SQLite's one owner; on PostgreSQL a superuser or
the database's or tables' owner). Workers on PostgreSQL log in as the application role (`roles`), which
only checks that the schema is current and otherwise fails with one line naming who must migrate.

Everything here is synchronous: the writer calls it from a worker thread, the CLI directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

from agent.ops.ledger.entry import LedgerRecord, StoredRow, stored_row
from agent.ops.ledger.errors import LedgerRejected
from agent.ops.ledger.schema import SCHEMA_VERSION, LedgerSchemaError, current_version, migrate_connection
from agent.ops.ledger.schema import sources as sources_table
from agent.ops.ledger.schema import tool_calls as calls_table
from agent.ops.ledger.schema import unverified_citations as citations_table
from agent.stores import PG_SCHEMES, SQLITE_BUSY_TIMEOUT_S, enable_wal, secure_sqlite_files

__all__ = [
    "LedgerLocationError",
    "LedgerStore",
    "StoredRow",
    "describe_location",
    "ledger_url",
    "probe_writable",
    "secure_ledger_files",
    "stored_row",
]

PG_CONNECT_TIMEOUT_S = 5


class LedgerLocationError(ValueError):
    """`LEXVOZ_LEDGER_URL` (or `--url`) names no store this program can use."""


def ledger_url(location: str | Path) -> URL:
    """The SQLAlchemy URL for a SQLite path, a `sqlite:///` URL or a `postgresql://` URL."""
    if isinstance(location, Path) or "://" not in location:
        path = Path(location)
        if not str(location).strip():
            raise LedgerLocationError("the ledger location is empty")
        return URL.create("sqlite+pysqlite", database=str(path))
    scheme = location.split("://", 1)[0].lower()
    try:
        url = make_url(location)
    except Exception:
        raise LedgerLocationError("the ledger URL cannot be parsed") from None
    if scheme in PG_SCHEMES:
        return url.set(drivername="postgresql+psycopg")
    if scheme in ("sqlite", "sqlite+pysqlite"):
        if not url.database:
            raise LedgerLocationError("a sqlite ledger URL needs a file path (sqlite:///var/ledger.sqlite3)")
        return url.set(drivername="sqlite+pysqlite")
    raise LedgerLocationError(f"unsupported ledger URL scheme {scheme!r}: use a file path or postgresql://")


def describe_location(location: str | Path) -> str:
    """The location for a log line or an error: never a password."""
    try:
        url = ledger_url(location)
    except LedgerLocationError:
        return "(invalid ledger location)"
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return url.render_as_string(hide_password=True)


def secure_ledger_files(path: Path) -> None:
    """The ledger's folder 0700 and its files 0600, created before SQLite opens them (`stores.secure_sqlite_files`)."""
    secure_sqlite_files(path, "ledger")


def _sqlite_engine(url: URL, *, readonly: bool) -> Engine:
    path = Path(str(url.database))
    if readonly:
        if not path.exists():
            raise FileNotFoundError(str(path))
        engine = create_engine(f"sqlite+pysqlite:///file:{path.resolve()}?mode=ro&uri=true", poolclass=NullPool)
    else:
        secure_ledger_files(path)
        engine = create_engine(url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's implicit one
        if not readonly:
            enable_wal(dbapi_conn)
            dbapi_conn.execute("PRAGMA synchronous=FULL")
            dbapi_conn.execute("PRAGMA secure_delete=ON")  # erased rows are overwritten, not left in free pages
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return  # maintenance (a WAL checkpoint) runs outside any transaction
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def _pg_engine(url: URL, *, readonly: bool) -> Engine:
    options = "-c default_transaction_read_only=on" if readonly else ""
    return create_engine(
        url,
        pool_size=1,
        max_overflow=1,
        pool_pre_ping=True,
        connect_args={
            "connect_timeout": PG_CONNECT_TIMEOUT_S,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 3,
            "keepalives_count": 3,
            "tcp_user_timeout": 15_000,
            "application_name": "lexvoz-ledger",
            "options": options,
        },
    )


class LedgerStore:
    """An open ledger: its engine and the few operations every caller needs."""

    def __init__(self, engine: Engine, location: str | Path) -> None:
        self.engine = engine
        self.location = location
        self.empty = False  # a reader found no schema at all: no writer has opened it yet

    @classmethod
    def open(cls, location: str | Path, *, readonly: bool = False) -> LedgerStore:
        """Open the store; a writable one is brought to the current schema, a read-only one must be on it."""
        url = ledger_url(location)
        if url.get_backend_name() == "sqlite":
            engine = _sqlite_engine(url, readonly=readonly)
        else:
            engine = _pg_engine(url, readonly=readonly)
        store = cls(engine, location)
        try:
            if readonly:
                store.check_version()
            elif store.is_sqlite or store.may_migrate():
                store.migrate()
            else:
                store.require_current()
        except BaseException:
            engine.dispose()
            raise
        return store

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def version(self) -> int:
        with self.engine.connect() as conn:
            return current_version(conn)

    def check_version(self) -> None:
        """For a reader: the store is on this program's schema, or still empty (nothing written yet)."""
        version = self.version()
        self.empty = version == 0
        if version != SCHEMA_VERSION and not self.empty:
            state = "newer than" if version > SCHEMA_VERSION else "older than"
            hint = "" if version > SCHEMA_VERSION else "; run `python -m agent ledger migrate` as the owner"
            raise LedgerSchemaError(f"ledger schema {version} is {state} this program's ({SCHEMA_VERSION}){hint}")

    def may_migrate(self) -> bool:
        """PostgreSQL: may this role change the schema? A superuser, the database's owner or the tables' owner.

        Workers and the page service log in as an application role that may only read and insert; it must
        never try DDL (it would fail halfway, or worse, succeed and own the tables).
        """
        with self.engine.connect() as conn:
            allowed: bool = conn.execute(
                text(
                    "SELECT r.rolsuper OR pg_has_role(current_user, d.datdba, 'MEMBER')"
                    " OR coalesce(pg_has_role(current_user, (SELECT relowner FROM pg_class"
                    " WHERE oid = to_regclass('tool_calls')), 'MEMBER'), false)"
                    " FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()"
                )
            ).scalar_one()
        return allowed

    def require_current(self) -> None:
        """For a role that may not migrate: the store is on this program's schema, or one clear line says why not."""
        version = self.version()
        if version > SCHEMA_VERSION:
            raise LedgerSchemaError(f"ledger schema {version} is newer than this program's ({SCHEMA_VERSION})")
        if version < SCHEMA_VERSION:
            raise LedgerSchemaError(
                f"ledger schema {version} is older than this program's ({SCHEMA_VERSION}) and this role may not"
                " change it: run `python -m agent ledger migrate` as the owner"
            )

    def migrate(self, target: int = SCHEMA_VERSION) -> list[int]:
        """Apply pending steps up to `target`, each in its own transaction; returns the steps applied."""
        applied: list[int] = []
        for number in range(1, target + 1):
            with self.engine.begin() as conn:
                if migrate_connection(conn, number):
                    applied.append(number)
        return applied

    def write(self, batch: Sequence[LedgerRecord]) -> int:
        """Write a batch in one transaction; returns how many entries were new.

        Re-writing an entry (a retry after a commit whose answer was lost) is a no-op, by its `entry_id`.
        """
        return self.write_rows([stored_row(e) for e in batch])

    def write_rows(self, rows: Sequence[StoredRow]) -> int:
        """Write entries already in their stored form (`stored_row`), in one transaction; new ones counted.

        Raises `LedgerRejected` when the store refuses the data itself (a constraint), which no retry can help."""
        try:
            return self._write_rows(rows)
        except IntegrityError as exc:
            raise LedgerRejected(f"the ledger refused an entry ({type(exc.orig).__name__})") from exc

    def _write_rows(self, rows: Sequence[StoredRow]) -> int:
        written = 0
        make_insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        with self.engine.begin() as conn:
            for r in rows:
                if r["kind"] == "citation":
                    cited = make_insert(citations_table).values(**r["values"])
                    written += conn.execute(cited.on_conflict_do_nothing(index_elements=["entry_id"])).rowcount
                    continue
                stmt = (
                    make_insert(calls_table)
                    .values(**r["values"])
                    .on_conflict_do_nothing(index_elements=["entry_id"])
                    .returning(calls_table.c.id)
                )
                row = conn.execute(stmt).scalar_one_or_none()
                if row is None:
                    continue
                written += 1
                if r["sources"]:
                    conn.execute(insert(sources_table), [{"call_row": row, **source} for source in r["sources"]])
        return written

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def probe_writable(location: str | Path) -> None:
    """Raise unless a worker could write here: the store opens (migrated by an owner, current for an app role)
    and grants a write transaction."""
    with LedgerStore.open(location) as store, store.engine.begin() as conn:
        # SQLite: BEGIN IMMEDIATE takes the write lock or fails
        if not store.is_sqlite:
            allowed: bool = conn.exec_driver_sql(
                "SELECT has_table_privilege('tool_calls', 'INSERT') AND has_table_privilege('sources', 'INSERT')"
                " AND has_table_privilege('unverified_citations', 'INSERT')"
            ).scalar_one()
            if not allowed:
                raise PermissionError(
                    "the ledger's role may not insert into tool_calls, sources and unverified_citations"
                )
        conn.rollback()
