"""What the programs' local stores share: an owner-only SQLite file in WAL mode, and which URLs are PostgreSQL.

Why a module of its own: the evidence ledger (`agent.ops.ledger`) and the page service's spent resume tokens
(`agent.web.spent`) each keep a SQLite file unless they are given a PostgreSQL URL, and the page service is a
separate program that may import only the shared base (`tests/test_layout.py`). The rules for those files are
security rules (no folder others can write to, no file others can read, the switch to WAL retried so that two
processes opening a new file together both succeed), so they live here once, where a fix reaches both stores.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any, Final

from tenacity import retry, retry_if_exception, stop_after_delay, wait_random

__all__ = [
    "OWNER_ONLY_DIR",
    "OWNER_ONLY_FILE",
    "PG_SCHEMES",
    "SQLITE_BUSY_TIMEOUT_S",
    "enable_wal",
    "is_postgres_url",
    "secure_sqlite_files",
]

OWNER_ONLY_DIR: Final = 0o700
OWNER_ONLY_FILE: Final = 0o600
SQLITE_BUSY_TIMEOUT_S: Final = 5.0  # how long a writer waits for another connection's lock on a SQLite file
PG_SCHEMES: Final = ("postgresql", "postgres", "postgresql+psycopg")


def is_postgres_url(location: str | Path) -> bool:
    """True when `location` is a PostgreSQL URL (any scheme PostgreSQL answers to), not a SQLite path or URL."""
    text = str(location)
    return "://" in text and text.split("://", 1)[0].lower() in PG_SCHEMES


def secure_sqlite_files(path: Path, what: str) -> None:
    """Make `path`'s folder 0700 and the file (and any -wal/-shm beside it) 0600, creating what is missing.

    The file is created before SQLite opens it because SQLite gives its WAL and shared-memory files the main
    file's mode. A shared sticky folder such as /tmp is never narrowed: `what` (the store, for the message)
    needs a folder of its own.
    """
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=OWNER_ONLY_DIR, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_mode & stat.S_ISVTX:
        raise PermissionError(f"{what} folder {folder} is a shared sticky folder; give the {what} its own folder")
    if stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.getuid():
        folder.chmod(OWNER_ONLY_DIR)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, OWNER_ONLY_FILE))
    for companion in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_IMODE(companion.stat().st_mode) != OWNER_ONLY_FILE:
                companion.chmod(OWNER_ONLY_FILE)


def _wal_switch_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


@retry(
    retry=retry_if_exception(_wal_switch_busy),
    stop=stop_after_delay(SQLITE_BUSY_TIMEOUT_S),
    wait=wait_random(0.01, 0.05),
    reraise=True,
)
def enable_wal(dbapi_conn: Any) -> None:
    """Put the file in WAL mode (it stays so: later connections find it already set).

    SQLite answers the switch with "database is locked" at once, without waiting out the busy timeout, while
    another connection holds a lock: two workers opening a new ledger together failed this way about half the
    time, and so did page-service replicas opening a new spent-token file. So the switch itself is retried for
    as long as the busy timeout would have waited.
    """
    dbapi_conn.execute("PRAGMA journal_mode=WAL")
