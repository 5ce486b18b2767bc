"""The host's ledger spool: entries on disk between a conversation and the store.

Why: a conversation must never wait for the ledger's store, and the store can be down longer than a conversation
lasts (a PostgreSQL restart of a minute outlives many). Each conversation puts its entries here (`SpoolSink`, one
fsynced file per batch), and the worker process's shipper writes the files to the store, then removes them; a
writer given the store itself leaves here what the store did not take by its close. The store ignores an entry it
already has (by `entry_id`), so a file written twice (two writers, or a crash between writing and removing) keeps
one row per entry.

What is kept is the stored form only (`stored_row`: the question redacted with its keyed digest, excerpts as
shown redacted, with their sha256), never a conversation's text in clear, in owner-only files (0600) in an
owner-only folder (0700), one file per batch a conversation wrote. A file is claimed by renaming it before it is
written, so two writers on one host do not both send the same file; a claim whose process is gone, or older than
`stale_claim_s`, is taken over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.ops.ledger.entry import LedgerRecord, StoredRow, stored_row
from agent.ops.ledger.errors import LedgerRejected
from agent.stores import OWNER_ONLY_DIR, OWNER_ONLY_FILE

__all__ = ["LedgerSpool", "SpoolSink"]

logger = logging.getLogger("lexvoz.ledger")

SUFFIX = ".jsonl"
CLAIMED = ".claimed"
REJECTED = ".rejected"


def _claimant_alive(claimed: Path) -> bool:
    """Whether the process named in a claim (`STEM.PID.jsonl.claimed`) still runs on this host. A worker killed in
    the middle of a pass left its claim behind; the next worker takes it at once instead of after `stale_claim_s`.
    Unsure (a name that is not ours, a process of another user) counts as alive."""
    parts = claimed.name.split(".")
    if len(parts) < 4 or not parts[1].isdigit():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class LedgerSpool:
    """A folder of spooled ledger entries: `put` at a writer's close, `replay` when a store is reachable."""

    def __init__(self, directory: Path, *, stale_claim_s: float = 600.0) -> None:
        self.directory = directory
        self.stale_claim_s = stale_claim_s

    def _ensure_dir(self) -> None:
        if not self.directory.exists():
            self.directory.mkdir(mode=OWNER_ONLY_DIR, parents=True, exist_ok=True)
        if self.directory.is_symlink() or not self.directory.is_dir():
            raise PermissionError(f"ledger spool {self.directory} is not a plain folder")
        self.directory.chmod(OWNER_ONLY_DIR)

    def put(self, rows: Sequence[StoredRow]) -> None:
        """Keep `rows` in a new file; it appears whole or not at all (written aside, then renamed)."""
        if not rows:
            return
        self._ensure_dir()
        name = f"{time.time_ns()}-{uuid.uuid4().hex}"
        partial = self.directory / f".{name}.partial"
        fd = os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, OWNER_ONLY_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, self.directory / f"{name}{SUFFIX}")

    def pending(self) -> int:
        """Files not yet written to a store (claimed or not)."""
        if not self.directory.is_dir():
            return 0
        return sum(1 for p in self.directory.iterdir() if p.name.endswith((SUFFIX, CLAIMED)))

    def _claimable(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        now = time.time()
        found = []
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(SUFFIX):
                found.append(path)
            elif path.name.endswith(CLAIMED):
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime > self.stale_claim_s or not _claimant_alive(path):
                        found.append(path)
        return found

    def replay(self, write_rows: Callable[[Sequence[StoredRow]], int]) -> int:
        """Write every spooled file through `write_rows`, removing each once written; returns entries sent.

        Raises what `write_rows` raises (the store went away again): the file it was writing is put back."""
        sent = 0
        for path in self._claimable():
            claimed = path.with_name(f"{path.name.split('.', 1)[0]}.{os.getpid()}{SUFFIX}{CLAIMED}")
            try:
                os.replace(path, claimed)  # another writer took it first: FileNotFoundError
            except FileNotFoundError:
                continue
            os.utime(claimed)
            try:
                rows = [json.loads(line) for line in claimed.read_text(encoding="utf-8").splitlines() if line]
            except (OSError, ValueError):
                logger.warning("ledger spool file %s is unreadable; left in place", claimed.name)
                continue
            try:
                write_rows(rows)
            except LedgerRejected:
                # the store refuses this data itself: set aside (kept, owner-only) for the operator, not retried forever
                with contextlib.suppress(OSError):
                    os.replace(claimed, claimed.with_name(f"{path.name.split('.', 1)[0]}{REJECTED}"))
                logger.error("ledger spool file %s refused by the store; set aside as %s", path.name, REJECTED)
                continue
            except BaseException:
                with contextlib.suppress(OSError):
                    os.replace(claimed, path)
                raise
            claimed.unlink(missing_ok=True)
            sent += len(rows)
        if sent:
            logger.info("ledger spool written: %d entries kept while the store was down", sent)
        return sent


class SpoolSink:
    """The spool as a job's ledger writes to it: each batch one new fsynced file, which the worker process's
    `SpoolShipper` writes to the store. `write` returns when the batch is on disk."""

    def __init__(self, spool: LedgerSpool) -> None:
        self.spool = spool

    def write(self, batch: Sequence[LedgerRecord]) -> int:
        return self.write_rows([stored_row(e) for e in batch])

    def write_rows(self, rows: Sequence[StoredRow]) -> int:
        self.spool.put(rows)
        return len(rows)

    def close(self) -> None:
        return None
