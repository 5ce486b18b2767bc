"""The ledger's two roles on a real PostgreSQL (marker `postgres`): the owner migrates, workers only insert and read.

`python -m agent ledger migrate`, run with the owner's URL and `LEXVOZ_LEDGER_APP_ROLE`, creates the
application role and grants it exactly what a worker and the page service need. Logged in as that role,
nothing can rewrite or remove evidence, or take the append-only triggers away; a worker still writes and
reads, and one that finds the schema behind says in one line who must migrate it instead of trying.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from agent.doctor import CheckFailed, check_ledger, check_resume_store
from agent.ops.ledger import SCHEMA_VERSION, LedgerSchemaError, LedgerStore
from agent.ops.ledger.cli import ledger_main
from agent.ops.ledger.reader import read_room
from agent.ops.ledger.store import ledger_url, probe_writable
from agent.settings import Settings, get_settings
from tests.ledger_helpers import EXCERPT, entry, write
from tests.postgres_server import SUPERUSER, PostgresServer

pytestmark = pytest.mark.postgres
APP_ROLE = "lexvoz_app"
_names = itertools.count(1)


@pytest.fixture
def db(pg: PostgresServer) -> Iterator[str]:
    """A fresh database (the owner's URL), and a cluster without the app role afterwards."""
    url = pg.create_database(f"roles_{os.getpid()}_{next(_names)}")
    yield url
    with psycopg.connect(url, autocommit=True) as conn:
        if _role_exists(conn):
            conn.execute(f"DROP OWNED BY {APP_ROLE}")
            conn.execute(f"DROP ROLE {APP_ROLE}")


@pytest.fixture
def app_role_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("LEXVOZ_LEDGER_APP_ROLE", APP_ROLE)
    monkeypatch.setenv("LEXVOZ_LEDGER_APP_PASSWORD", "app-password-1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _role_exists(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone() is not None


def as_role(url: str, role: str) -> str:
    return make_url(url).set(username=role, password=None).render_as_string(hide_password=False)


@pytest.mark.usefixtures("app_role_env")
async def test_the_app_role_inserts_and_reads_but_cannot_rewrite_or_unprotect_evidence(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ledger_main(["migrate", "--url", db]) == 0
    assert f"role {APP_ROLE} created" in capsys.readouterr().out
    app = as_role(db, APP_ROLE)
    # the worker's path, end to end, as the app role: open (no DDL), write through the writer, read back
    probe_writable(app)
    ledger = await write(app, entry(turn=1), entry(turn=2))
    assert (ledger.written, ledger.dropped) == (2, 0)
    calls = read_room(app, "sala-1")
    assert [c["turn"] for c in calls] == [1, 2] and calls[0]["sources"][0]["excerpt"] == EXCERPT
    forbidden = (
        "UPDATE tool_calls SET outcome = 'failed'",
        "DELETE FROM tool_calls",
        "UPDATE sources SET excerpt = 'otra cosa'",
        "DELETE FROM sources",
        "TRUNCATE sources",
        "DELETE FROM ledger_events",
        "INSERT INTO ledger_erasure_gate (token) VALUES ('x')",  # the gate the triggers let deletions through
        "DROP TABLE sources",
        "ALTER TABLE tool_calls ADD COLUMN note TEXT",
        "ALTER TABLE tool_calls DISABLE TRIGGER tool_calls_append_only",
        "ALTER TABLE sources DISABLE TRIGGER ALL",
        "DROP TRIGGER tool_calls_append_only ON tool_calls",
        "DROP FUNCTION ledger_append_only() CASCADE",
        "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RETURN OLD; END $$",
        "SET session_replication_role = replica",  # which would skip every trigger
        "ALTER ROLE lexvoz_app SUPERUSER",
    )
    for sql in forbidden:
        with psycopg.connect(app) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql)
    # the page service's spent resume tokens: insert, read, delete
    with psycopg.connect(app) as conn:
        conn.execute("INSERT INTO resume_tokens_spent (jti, expires_at) VALUES ('j1', 1)")
        assert conn.execute("SELECT count(*) FROM resume_tokens_spent").fetchone() == (1,)
        assert conn.execute("DELETE FROM resume_tokens_spent WHERE jti = 'j1'").rowcount == 1
    # the erasures are the owner's: under the app role they are refused, and nothing was removed
    assert ledger_main(["forget", "--room", "sala-1", "--url", app]) == 1
    assert ledger_main(["purge", "--older-than-days", "1", "--url", app]) == 1
    assert len(read_room(db, "sala-1")) == 2
    with psycopg.connect(db) as conn:  # the owner (a superuser here) sees that a password was set
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (APP_ROLE,)).fetchone()
        assert stored is not None and stored[0] is not None and "app-password-1" not in stored[0]
        super_or_owner = conn.execute(
            "SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = %s", (APP_ROLE,)
        ).fetchone()
        assert super_or_owner == (False,)


@pytest.mark.usefixtures("app_role_env")
def test_migrate_again_updates_the_role_and_keeps_the_grants(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert ledger_main(["migrate", "--url", db]) == 0
    assert ledger_main(["migrate", "--url", db]) == 0
    assert f"role {APP_ROLE} updated" in capsys.readouterr().out
    with psycopg.connect(as_role(db, APP_ROLE)) as conn:
        conn.execute("INSERT INTO resume_tokens_spent (jti, expires_at) VALUES ('j2', 1)")


def test_the_owner_is_never_made_the_app_role(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert ledger_main(["migrate", "--url", db, "--app-role", SUPERUSER]) == 2
    assert "choose another LEXVOZ_LEDGER_APP_ROLE" in capsys.readouterr().err
    assert ledger_main(["migrate", "--url", db, "--app-role", "Bad-Name; DROP"]) == 2


async def test_a_worker_as_the_app_role_never_migrates_and_says_who_must(
    db: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A store left one step behind: the app role's open fails with one line and the store is untouched."""
    engine = create_engine(ledger_url(db))
    LedgerStore(engine, db).migrate(target=SCHEMA_VERSION - 1)
    engine.dispose()
    with psycopg.connect(db, autocommit=True) as conn:  # the grants an earlier deployment gave its workers
        conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN")
        conn.execute(f"GRANT SELECT, INSERT ON tool_calls, sources TO {APP_ROLE}")
        conn.execute(f"GRANT SELECT ON ledger_events, ledger_schema_version TO {APP_ROLE}")
    app = as_role(db, APP_ROLE)
    with pytest.raises(LedgerSchemaError) as caught:
        LedgerStore.open(app)
    message = str(caught.value)
    assert "\n" not in message and "run `python -m agent ledger migrate` as the owner" in message
    assert ledger_main(["migrate", "--url", app]) == 1
    assert "as the owner" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING, logger="lexvoz.ledger"):  # a conversation's writer: one clear line
        ledger = await write(app, entry(), flush_s=0.5)
    assert ledger.written == 0
    warned = [r.getMessage() for r in caplog.records if r.name == "lexvoz.ledger" and r.levelno == logging.WARNING]
    assert any("run `python -m agent ledger migrate` as the owner" in line for line in warned), warned
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT max(version) FROM ledger_schema_version").fetchone() == (SCHEMA_VERSION - 1,)
    with LedgerStore.open(db) as owner:  # the owner's open migrates as before
        assert owner.version() == SCHEMA_VERSION
    with LedgerStore.open(app) as store:
        assert store.version() == SCHEMA_VERSION


@pytest.mark.usefixtures("app_role_env")
async def test_doctor_fails_a_ledger_the_workers_own_and_checks_the_resume_store_as_the_app_role(db: str) -> None:
    """The probe's finding was workers logging in as the owner, which can drop the append-only triggers: the
    doctor says so, and passes the app role's URL, with the spent resume tokens' table reachable by it."""
    app = make_url(as_role(db, APP_ROLE)).set(password="app-password-1").render_as_string(hide_password=False)
    with pytest.raises(CheckFailed) as before_migrate:  # the table does not exist yet
        await check_resume_store(Settings(LEXVOZ_LEDGER_URL=db))
    assert "ledger migrate" in before_migrate.value.fix
    assert ledger_main(["migrate", "--url", db]) == 0
    with pytest.raises(CheckFailed) as owner:
        await check_ledger(Settings(LEXVOZ_LEDGER_URL=db))
    assert "owns the ledger" in owner.value.detail and "LEXVOZ_LEDGER_APP_ROLE" in owner.value.fix
    assert "writable" in await check_ledger(Settings(LEXVOZ_LEDGER_URL=app))
    assert "spent resume tokens are kept" in await check_resume_store(Settings(LEXVOZ_LEDGER_URL=app))
    with psycopg.connect(db) as conn:  # the probe leaves nothing behind
        assert conn.execute("SELECT count(*) FROM resume_tokens_spent").fetchone() == (0,)
