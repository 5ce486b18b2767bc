"""Spent resume tokens stay spent: across a restart of the page service, across replicas, under a race.

A resume token is single-use. The page service used to remember spent ones in memory only, so after a
restart (or on a second replica with the same LiveKit secret) a copied token was accepted again, and
joining with it threw the real user out of their conversation. These tests spend a token on one service
and present it to another that shares the store: a SQLite file on one host, or the ledger's PostgreSQL
database (a real one the tests start, marker `postgres`, as the application role the compose file uses).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from agent.ops.ledger.cli import ledger_main
from agent.settings import Settings, get_settings
from agent.web.spent import PURGE_BATCH, PURGE_GRACE_S, SpentTokens
from tests.ports import free_port
from tests.postgres_server import PostgresServer
from tests.web_app import ClientFactory, make_settings

APP_ROLE = "lexvoz_app"


_names = itertools.count(1)


@pytest.fixture
def ledger_db(pg: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A ledger database migrated by its owner, and the URL of the application role the services use."""
    owner = pg.create_database(f"spent_{os.getpid()}_{next(_names)}")
    monkeypatch.setenv("LEXVOZ_LEDGER_APP_ROLE", APP_ROLE)
    get_settings.cache_clear()
    try:
        assert ledger_main(["migrate", "--url", owner]) == 0
    finally:
        get_settings.cache_clear()
    yield make_url(owner).set(username=APP_ROLE).render_as_string(hide_password=False)
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {APP_ROLE}")
        conn.execute(f"DROP ROLE {APP_ROLE}")


def _file_settings(tmp_path: Path) -> Settings:
    return make_settings(LEXVOZ_SPENT_TOKENS_PATH=str(tmp_path / "spent" / "resume.sqlite3"))


async def _new_session(client: Any) -> dict[str, Any]:
    resp = await client.post("/api/session")
    assert resp.status == 200
    body: dict[str, Any] = await resp.json()
    return body


async def test_a_spent_token_stays_spent_after_a_restart(tmp_path: Path, make_client: ClientFactory) -> None:
    settings = _file_settings(tmp_path)
    before = await make_client(settings)
    first = await _new_session(before)
    resumed = await before.post("/api/session", json={"resume": first["resume"]})
    assert resumed.status == 200
    following = (await resumed.json())["resume"]
    await before.close()  # the service restarts: a new process, nothing in memory
    after = await make_client(settings)
    again = await after.post("/api/session", json={"resume": first["resume"]})
    assert again.status == 401
    assert "ya se reanudó" in (await again.json())["error"]
    # the next token in the chain still works after the restart
    fresh = await after.post("/api/session", json={"resume": following})
    assert fresh.status == 200
    folder = tmp_path / "spent"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "resume.sqlite3").stat().st_mode) == 0o600


async def _race(clients: list[Any], token: str) -> list[int]:
    answers = await asyncio.gather(*(c.post("/api/session", json={"resume": token}) for c in clients))
    return sorted(a.status for a in answers)


async def test_replicas_on_one_host_spending_one_token_at_once_let_exactly_one_in(
    tmp_path: Path, make_client: ClientFactory
) -> None:
    settings = _file_settings(tmp_path)
    replicas = [await make_client(settings) for _ in range(3)]
    for _ in range(5):
        token = (await _new_session(replicas[0]))["resume"]
        assert await _race(replicas, token) == [200, 401, 401]


def test_spending_one_jti_from_many_threads_at_once_succeeds_once(tmp_path: Path) -> None:
    stores = [SpentTokens(tmp_path / "spent" / "resume.sqlite3") for _ in range(6)]
    start = threading.Barrier(len(stores))
    won: list[bool] = []

    def spend(store: SpentTokens) -> None:
        start.wait()
        won.append(store.spend_now("jti-1", 2_000_000_000))

    threads = [threading.Thread(target=spend, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for s in stores:
        s.close()
    assert sorted(won) == [False] * (len(stores) - 1) + [True]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_expired_ids_are_purged_a_bounded_batch_per_spend(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Rows go once their token is past expiry by the grace; each spend removes at most PURGE_BATCH of them.

    A purged id cannot be replayed: the token it belonged to is expired, which `ResumeTokens` refuses first.
    On PostgreSQL this runs as the application role, whose DELETE on the table the purge needs.
    """
    expiry = 1_000_000
    now = [float(expiry)]
    location = tmp_path / "spent" / "resume.sqlite3" if backend == "sqlite" else request.getfixturevalue("ledger_db")
    store = SpentTokens(location, clock=lambda: now[0])

    def rows() -> int:
        with store._open().connect() as conn:
            return int(conn.exec_driver_sql("SELECT count(*) FROM resume_tokens_spent").scalar_one())

    try:
        for n in range(PURGE_BATCH + 30):
            assert store.spend_now(f"old-{n}", expiry)
        assert rows() == PURGE_BATCH + 30  # expired just now: kept
        now[0] = expiry + PURGE_GRACE_S - 1  # past expiry, inside the grace left for other replicas' clocks
        assert store.spend_now("new-1", expiry + 10_000)
        assert rows() == PURGE_BATCH + 31
        now[0] = expiry + PURGE_GRACE_S + 1
        assert store.spend_now("new-2", expiry + 10_000)
        assert rows() == 30 + 2  # one batch gone, the rest left for the next call
        assert store.spend_now("new-3", expiry + 10_000)
        assert rows() == 3  # the old ones are all gone; the fresh ones stay
        assert not store.spend_now("new-1", expiry + 10_000)  # and stay spent
    finally:
        store.close()


@pytest.mark.parametrize("where", ["postgres-down", "file-unusable"])
async def test_resumes_are_refused_with_503_while_the_store_is_unreachable(
    where: str, tmp_path: Path, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    if where == "postgres-down":  # nothing listens on this port
        settings = make_settings(LEXVOZ_LEDGER_URL=f"postgresql://{APP_ROLE}@127.0.0.1:{free_port()}/ledger")
    else:  # the store's folder cannot be created: its parent is a file
        (tmp_path / "not-a-folder").write_text("x")
        settings = make_settings(LEXVOZ_SPENT_TOKENS_PATH=str(tmp_path / "not-a-folder" / "spent.sqlite3"))
    client = await make_client(settings)
    first = await _new_session(client)  # a new session spends nothing: it still works
    with caplog.at_level(logging.WARNING, logger="lexvoz.web"):
        for _ in range(2):
            refused = await client.post("/api/session", json={"resume": first["resume"]})
            assert refused.status == 503
            assert "no se puede reanudar" in (await refused.json())["error"]
    assert sum("spent-token store is unavailable" in r.getMessage() for r in caplog.records) == 1
    assert all("secret" not in r.getMessage() and first["resume"] not in r.getMessage() for r in caplog.records)


@pytest.mark.postgres
async def test_a_token_spent_on_one_replica_is_refused_by_another_on_postgres(
    ledger_db: str, make_client: ClientFactory
) -> None:
    settings = make_settings(LEXVOZ_LEDGER_URL=ledger_db)
    a, b = await make_client(settings), await make_client(settings)
    first = await _new_session(a)
    assert (await a.post("/api/session", json={"resume": first["resume"]})).status == 200
    again = await b.post("/api/session", json={"resume": first["resume"]})
    assert again.status == 401 and "ya se reanudó" in (await again.json())["error"]
    for _ in range(5):
        token = (await _new_session(a))["resume"]
        assert await _race([a, b, a, b], token) == [200, 401, 401, 401]


@pytest.mark.postgres
async def test_a_ledger_database_without_the_table_refuses_resumes(
    pg: PostgresServer, make_client: ClientFactory
) -> None:
    """Not migrated yet (the owner has not run `ledger migrate`): refused, never accepted unchecked."""
    url = pg.create_database(f"bare_{os.getpid()}_{next(_names)}")
    client = await make_client(make_settings(LEXVOZ_LEDGER_URL=url))
    first = await _new_session(client)
    assert (await client.post("/api/session", json={"resume": first["resume"]})).status == 503
