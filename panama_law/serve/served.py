"""Which index generation each running search server serves, told through the data dir.

A server writes a small JSON record into `DATA_DIR/.served/` after each load (`record_served`) and removes it when
it stops; `import` and `remove` read them (`wait_until_served`) to say whether, and how soon, a running server took
their change. Through the data dir rather than a server's port, because it is the data dir that an import names:
this works with any number of data dirs and servers on one machine, and answers at once when no server runs there.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..index import disk as index

SERVED_DIR = ".served"
"""Beside the index: one JSON record per running server, naming the generation it serves."""


@dataclass(frozen=True, slots=True)
class ServedRecord:
    """What one running server serves from this data dir: written by the server after each load, removed when it
    stops. `host` and `pid` let a reader on the same host skip the record of a server that died without removing it
    (a server on another host, such as a container sharing the directory, is taken at its word)."""

    generation: str
    host: str
    pid: int
    since: float

    def is_live(self) -> bool:
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: it exists
            return True
        return True


def _served_dir(data_dir: Path) -> Path:
    return data_dir / SERVED_DIR


def record_served(data_dir: Path, instance: str, generation: str) -> None:
    """Say (atomically: write a copy, swap it in) that server `instance` now serves `generation` of this index."""
    folder = _served_dir(data_dir)
    folder.mkdir(exist_ok=True)
    body = {"generation": generation, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    fd, tmp = tempfile.mkstemp(prefix=".record-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out)
        os.chmod(tmp, 0o644)  # not a secret, and `import` may run as another user than the server
        os.replace(tmp, folder / f"{instance}.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def forget_served(data_dir: Path, instance: str) -> None:
    """Remove server `instance`'s record (it is stopping)."""
    (_served_dir(data_dir) / f"{instance}.json").unlink(missing_ok=True)


def served_records(data_dir: Path) -> list[ServedRecord]:
    """The records of the servers running on this data dir (dead ones on this host skipped); unreadable or
    half-understood records are skipped too: they only ever tell a reader about progress, never decide anything."""
    folder = _served_dir(data_dir)
    records: list[ServedRecord] = []
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            record = ServedRecord(str(raw["generation"]), str(raw["host"]), int(raw["pid"]), float(raw["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if record.is_live():
            records.append(record)
    return records


def serves(record_generation: str, written: str) -> bool:
    """Whether a server serving `record_generation` serves the write that produced `written`: the same one, or a
    later write of the index, which was made from it."""
    return record_generation == written or index.generation_seq(record_generation) > index.generation_seq(written)


@dataclass(frozen=True, slots=True)
class Uptake:
    """How a change reached the running servers: how many run on the data dir, how many serve it, and when the
    last of them took it (seconds after the wait began; None when not all did)."""

    running: int
    serving: int
    after_s: float | None


def wait_until_served(data_dir: Path, generation: str, timeout_s: float, poll_s: float = 0.05) -> Uptake:
    """Wait (at most `timeout_s`) until every server running on this data dir serves `generation`. Returns at once
    when none runs: nothing would take the change sooner than a server's start, which loads the index as it is."""
    started = time.monotonic()
    while True:
        records = served_records(data_dir)
        serving = sum(serves(r.generation, generation) for r in records)
        elapsed = time.monotonic() - started
        if not records or serving == len(records):
            return Uptake(len(records), serving, elapsed if records else None)
        if elapsed >= timeout_s:
            return Uptake(len(records), serving, None)
        time.sleep(poll_s)
