"""The application role of a PostgreSQL ledger: what workers and the page service log in as.

Why two roles: the append-only triggers protect the evidence only from a role that cannot drop or disable
them, and the owner of a table always can. So the owner (the role that created the tables) runs the
migrations and the erasures (`ledger migrate`, `purge`, `forget`), and everything that runs all day
(every worker, the page service) logs in as an application role that may only:

- read and insert evidence (`tool_calls`, `sources`, `unverified_citations`, and the sequences that number them);
- read the erasure record and the schema version (`ledger_events`, `ledger_schema_version`), so a worker
  can tell a store that is behind and `ledger show` works under this role too;
- read, insert and delete spent resume tokens (`resume_tokens_spent`, the page service's table).

It gets no UPDATE or DELETE on evidence, nothing on `ledger_erasure_gate` (so it can never open the gate the
triggers ask for), owns nothing, and cannot create, alter or drop. `python -m agent ledger migrate`, run with
the owner's URL and `LEXVOZ_LEDGER_APP_ROLE` set, creates the role (or updates its password) and grants
exactly this, every time, so a new table of a later step is covered by running it again.
"""

from __future__ import annotations

import re
from typing import Final

from psycopg import sql
from sqlalchemy import Connection, text

from agent.ops.ledger.store import LedgerStore

__all__ = ["APP_GRANTS", "LedgerRoleError", "grant_app_role", "valid_role_name"]

_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# table -> privileges of the application role; every other privilege on these tables is revoked.
APP_GRANTS: Final[dict[str, str]] = {
    "tool_calls": "SELECT, INSERT",
    "sources": "SELECT, INSERT",
    "unverified_citations": "SELECT, INSERT",
    "ledger_events": "SELECT",
    "ledger_schema_version": "SELECT",
    "ledger_erasure_gate": "",
    "resume_tokens_spent": "SELECT, INSERT, DELETE",
}
_SEQUENCES: Final = ("tool_calls", "sources", "unverified_citations")  # serial ids an INSERT draws from


class LedgerRoleError(ValueError):
    """The application role cannot be set up as asked (bad name, or a role that is the owner)."""


def valid_role_name(name: str) -> str:
    """A plain lower-case PostgreSQL identifier (so it needs no quoting anywhere an operator types it)."""
    if not _ROLE_NAME.fullmatch(name):
        raise LedgerRoleError(f"invalid role name {name!r}: use lower-case letters, digits and _ (at most 63)")
    return name


def grant_app_role(store: LedgerStore, role: str, password: str | None) -> bool:
    """Create or update `role` and grant it exactly APP_GRANTS, in one transaction; True if it was created.

    Run as the owner on a migrated store. Refuses a role that is a superuser or a member of the tables' owner
    (it would not be restricted at all). Without a password an existing role keeps its own; a new one gets
    none (log-in then depends on the server's other methods, e.g. peer or certificates).
    """
    valid_role_name(role)
    if store.is_sqlite:
        raise LedgerRoleError("a SQLite ledger has one owner and no roles: the application role is for PostgreSQL")
    with store.engine.begin() as conn:
        exists = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).scalar() is not None
        if exists:
            _refuse_privileged(conn, role)
        attrs: sql.Composable = sql.SQL("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT")
        if password:
            attrs = sql.SQL("{} PASSWORD {}").format(attrs, sql.Literal(password))
        verb = "ALTER" if exists else "CREATE"
        _run(conn, sql.SQL(verb + " ROLE {} WITH {}").format(sql.Identifier(role), attrs))
        who = sql.Identifier(role)
        database: str = conn.execute(text("SELECT current_database()")).scalar_one()
        schema: str = conn.execute(text("SELECT current_schema()")).scalar_one()
        _run(conn, sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), who))
        _run(conn, sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), who))
        for table, privileges in APP_GRANTS.items():
            name = sql.Identifier(table)
            _run(conn, sql.SQL("REVOKE ALL ON TABLE {} FROM {}").format(name, who))
            if privileges:
                _run(conn, sql.SQL("GRANT " + privileges + " ON TABLE {} TO {}").format(name, who))
        for table in _SEQUENCES:
            sequence: str = conn.execute(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table}).scalar_one()
            _run(conn, sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(sql.SQL(sequence), who))
    return not exists


def _refuse_privileged(conn: Connection, role: str) -> None:
    privileged: bool = conn.execute(
        text(
            "SELECT r.rolsuper OR pg_has_role(r.oid, d.datdba, 'MEMBER') OR coalesce(pg_has_role(r.oid,"
            " (SELECT relowner FROM pg_class WHERE oid = to_regclass('tool_calls')), 'MEMBER'), false)"
            " FROM pg_roles r, pg_database d WHERE r.rolname = :r AND d.datname = current_database()"
        ),
        {"r": role},
    ).scalar_one()
    if privileged:
        raise LedgerRoleError(
            f"role {role!r} is a superuser or an owner of the ledger: choose another LEXVOZ_LEDGER_APP_ROLE"
        )


def _run(conn: Connection, statement: sql.Composable) -> None:
    """A utility statement (no bind parameters in PostgreSQL DDL), composed with psycopg's quoting."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(statement)
    finally:
        cursor.close()
