"""The ledger's tables and the numbered steps that build them, the same for SQLite and PostgreSQL.

Why numbered steps run by the program itself: every worker opens the ledger at start, so a new version
must bring an old store (a SQLite file of version 1 with years of entries, or a shared PostgreSQL
database) up to date in place, once, even when several workers start together. Each step runs in its
own transaction with its version bump, under SQLite's write lock or a PostgreSQL advisory lock.
Append a step to change the schema; never edit a released one.

Append-only is enforced by the stores themselves (triggers), not by this program's good manners: rows
of `tool_calls`, `sources`, `unverified_citations` and `ledger_events` can never be updated, and evidence
rows can be deleted only inside a transaction that holds a row in `ledger_erasure_gate`, which only the
retention purge and `forget` write (and remove again before they commit, so no other transaction ever sees one).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from agent.ops.ledger.errors import LedgerSchemaError

__all__ = [
    "SCHEMA_VERSION",
    "LedgerSchemaError",
    "current_version",
    "erasure_gate",
    "ledger_events",
    "metadata",
    "migrate_connection",
    "sources",
    "tool_calls",
    "unverified_citations",
]

APPEND_ONLY_MESSAGE = "evidence ledger is append-only"
# An id that stays a rowid alias in SQLite and is 64-bit in PostgreSQL.
_ID = BigInteger().with_variant(Integer(), "sqlite")
_OUTCOMES = "outcome IN ('completed', 'failed', 'discarded', 'duplicate', 'rejected')"
# Any constant: serialises the migration steps of every worker that opens the same PostgreSQL database.
_PG_MIGRATION_LOCK = 0x1E7F0D6E


# ---------------------------------------------------------------------------------------------
# The current tables, for reading and writing. `tests/test_ledger_migrations.py` checks that the
# steps below produce exactly these columns.

metadata = MetaData()

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("entry_id", Text, nullable=False, unique=True),
    Column("ts", Text, nullable=False),
    Column("room", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("call_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("query_redacted", Text, nullable=False),
    Column("query_digest", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("reason", Text),
    Column("server_name", Text),
    Column("server_version", Text),
    Column("index_version", Text),
)

sources = Table(
    "sources",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("call_row", _ID, ForeignKey("tool_calls.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("citation", Text, nullable=False),
    Column("official_source_url", Text),
    Column("excerpt_sha256", Text, nullable=False),
    Column("title", Text),
    Column("excerpt", Text),
)

ledger_events = Table(
    "ledger_events",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("ts", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("room", Text),
    Column("cutoff", Text),
    Column("calls_removed", Integer, nullable=False),
    Column("sources_removed", Integer, nullable=False),
    Column("citations_removed", Integer),
)

unverified_citations = Table(
    "unverified_citations",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    Column("entry_id", Text, nullable=False, unique=True),
    Column("ts", Text, nullable=False),
    Column("room", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("article", Text, nullable=False),
    Column("norm", Text),
)

erasure_gate = Table("ledger_erasure_gate", metadata, Column("token", Text, primary_key=True))


# ---------------------------------------------------------------------------------------------
# Step 1 (released): tool calls and the sources they showed, as hashes only.


def _step1(conn: Connection) -> None:
    v1 = MetaData()
    Table(
        "tool_calls",
        v1,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("entry_id", Text, nullable=False, unique=True),
        Column("ts", Text, nullable=False),
        Column("room", Text, nullable=False),
        Column("session_id", Text, nullable=False),
        Column("turn", Integer, nullable=False),
        Column("call_id", Text, nullable=False),
        Column("tool", Text, nullable=False),
        Column("query_redacted", Text, nullable=False),
        Column("query_digest", Text, nullable=False),
        Column("outcome", Text, CheckConstraint(_OUTCOMES), nullable=False),
        Column("duration_ms", Float, nullable=False),
        Column("reason", Text),
        sqlite_autoincrement=True,
    )
    Table(
        "sources",
        v1,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("call_row", _ID, ForeignKey("tool_calls.id"), nullable=False),
        Column("position", Integer, nullable=False),
        Column("citation", Text, nullable=False),
        Column("official_source_url", Text),
        Column("excerpt_sha256", Text, nullable=False),
        UniqueConstraint("call_row", "position"),
        sqlite_autoincrement=True,
    )
    v1.create_all(conn)
    conn.execute(text("CREATE INDEX tool_calls_room ON tool_calls (room, id)"))
    if conn.dialect.name == "sqlite":
        for table in ("tool_calls", "sources"):
            for op in ("UPDATE", "DELETE"):
                conn.exec_driver_sql(
                    f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table}"
                    f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
                )
    else:
        conn.exec_driver_sql(
            "CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}'; END $$"
        )
        for table in ("tool_calls", "sources"):
            _pg_guard(conn, table)


def _pg_guard(conn: Connection, table: str) -> None:
    conn.exec_driver_sql(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}"
        " FOR EACH ROW EXECUTE FUNCTION ledger_append_only()"
    )
    conn.exec_driver_sql(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
        " FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()"
    )


# ---------------------------------------------------------------------------------------------
# Step 2: what the user saw (title, redacted excerpt), which server and index answered, retention.


def _step2(conn: Connection) -> None:
    for table, column in (
        ("tool_calls", "server_name"),
        ("tool_calls", "server_version"),
        ("tool_calls", "index_version"),
        ("sources", "title"),
        ("sources", "excerpt"),
    ):
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    conn.execute(text("CREATE INDEX tool_calls_ts ON tool_calls (ts)"))
    v2 = MetaData()
    Table(
        "ledger_events",
        v2,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("ts", Text, nullable=False),
        Column("kind", Text, CheckConstraint("kind IN ('purge', 'forget')"), nullable=False),
        Column("room", Text),
        Column("cutoff", Text),
        Column("calls_removed", Integer, nullable=False),
        Column("sources_removed", Integer, nullable=False),
        sqlite_autoincrement=True,
    )
    Table("ledger_erasure_gate", v2, Column("token", Text, primary_key=True))
    v2.create_all(conn)
    gate_closed = "NOT EXISTS (SELECT 1 FROM ledger_erasure_gate)"
    if conn.dialect.name == "sqlite":
        for table in ("tool_calls", "sources"):
            conn.exec_driver_sql(f"DROP TRIGGER {table}_no_delete")
            conn.exec_driver_sql(
                f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} WHEN {gate_closed}"
                f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
            )
        for op in ("UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER ledger_events_no_{op.lower()} BEFORE {op} ON ledger_events"
                f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
            )
    else:
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF TG_OP = 'DELETE' AND TG_TABLE_NAME IN ('tool_calls', 'sources')"
            f" AND NOT ({gate_closed}) THEN RETURN OLD; END IF;"
            f" RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}'; END $$"
        )
        _pg_guard(conn, "ledger_events")


# ---------------------------------------------------------------------------------------------
# Step 3: spent resume tokens of the page service, shared by its replicas (PostgreSQL only).
# The page service reads and writes this table (`agent/web/spent.py`, which defines the same columns: a
# separate program imports nothing from here); a SQLite ledger is one host's file and the page service
# keeps its own file beside it, so on SQLite this step only moves the version.


def _step3(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        return
    v3 = MetaData()
    Table(
        "resume_tokens_spent",
        v3,
        Column("jti", Text, primary_key=True),
        Column("expires_at", BigInteger, nullable=False),
    )
    v3.create_all(conn)
    conn.execute(text("CREATE INDEX ix_resume_tokens_spent_expires_at ON resume_tokens_spent (expires_at)"))


# ---------------------------------------------------------------------------------------------
# Step 4: the articles the agent named while speaking that no delivered source held (the article and the
# norm's key, never the words), erased with the room's evidence; erasures count them too.


def _step4(conn: Connection) -> None:
    v4 = MetaData()
    Table(
        "unverified_citations",
        v4,
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("entry_id", Text, nullable=False, unique=True),
        Column("ts", Text, nullable=False),
        Column("room", Text, nullable=False),
        Column("session_id", Text, nullable=False),
        Column("turn", Integer, nullable=False),
        Column("article", Text, nullable=False),
        Column("norm", Text),
        sqlite_autoincrement=True,
    )
    v4.create_all(conn)
    conn.execute(text("CREATE INDEX unverified_citations_room ON unverified_citations (room, id)"))
    conn.execute(text("CREATE INDEX unverified_citations_ts ON unverified_citations (ts)"))
    conn.exec_driver_sql("ALTER TABLE ledger_events ADD COLUMN citations_removed INTEGER")
    gate_closed = "NOT EXISTS (SELECT 1 FROM ledger_erasure_gate)"
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "CREATE TRIGGER unverified_citations_no_update BEFORE UPDATE ON unverified_citations"
            f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER unverified_citations_no_delete BEFORE DELETE ON unverified_citations WHEN {gate_closed}"
            f" BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
        )
    else:
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF TG_OP = 'DELETE' AND TG_TABLE_NAME IN ('tool_calls', 'sources', 'unverified_citations')"
            f" AND NOT ({gate_closed}) THEN RETURN OLD; END IF;"
            f" RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}'; END $$"
        )
        _pg_guard(conn, "unverified_citations")


STEPS: tuple[Callable[[Connection], None], ...] = (_step1, _step2, _step3, _step4)
SCHEMA_VERSION = len(STEPS)


# ---------------------------------------------------------------------------------------------
# Versions: SQLite keeps it in the file header (as version 1 did); PostgreSQL in a table of bumps.


def current_version(conn: Connection) -> int:
    """The store's schema version; 0 for an empty store."""
    if conn.dialect.name == "sqlite":
        return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())
    exists: bool = conn.execute(text("SELECT to_regclass('ledger_schema_version') IS NOT NULL")).scalar_one()
    if not exists:
        return 0
    return int(conn.execute(text("SELECT coalesce(max(version), 0) FROM ledger_schema_version")).scalar_one())


def _set_version(conn: Connection, number: int) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA user_version = {int(number)}")
    else:
        conn.execute(text("INSERT INTO ledger_schema_version (version) VALUES (:v)"), {"v": number})


def migrate_connection(conn: Connection, number: int) -> bool:
    """Apply step `number` on `conn` (inside its open transaction) if the store is below it.

    The caller opens one transaction per step; the version is read here, under the lock, so two
    processes starting at once never apply the same step twice. Returns True when it applied the step.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        conn.execute(text("CREATE TABLE IF NOT EXISTS ledger_schema_version (version INTEGER NOT NULL)"))
    version = current_version(conn)
    if version > SCHEMA_VERSION:
        raise LedgerSchemaError(f"ledger schema {version} is newer than this program ({SCHEMA_VERSION})")
    if version >= number:
        return False
    STEPS[number - 1](conn)
    _set_version(conn, number)
    return True
