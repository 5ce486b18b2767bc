"""The evidence ledger: an append-only record of every research tool call and what its user was shown.

Why: an answer about the law is only as good as the sources behind it, and months after a conversation
an auditor may need to know what was researched in a room and what the user read, whichever worker ran
it. Each call keeps the question redacted (cut to the tool's 2,000-character limit first) with a keyed
digest, the sources as shown (title, citation, link, the redacted excerpt and a sha256 of the exact
text), the MCP server's name and version, the embedded index's version, the duration, outcome and reason.
Each article the agent named while speaking that no source given to it held is kept too (its article, the
norm's key, the turn and the time; never the words said), so an audit shows what the user heard unsupported.

The store is a SQLite file (one host; the default) or a PostgreSQL database shared by every worker
(`LEXVOZ_LEDGER_URL`); both get the same schema and steps through SQLAlchemy Core. On PostgreSQL the
owner runs the migrations and erasures, and workers log in as a role that cannot change or drop evidence.

- `entry`: what an entry holds and how its text is made safe to keep
- `schema`: tables, numbered migration steps, append-only triggers
- `store`: opening either store, writing a batch
- `writer`: the conversation's non-blocking, bounded, retrying writer (or none, `LEXVOZ_LEDGER=off`); a job's
  goes to the host's `spool`, which the worker process's `shipper` writes to the store through one connection
- `erase`: the retention purge and `forget`, the only deletions allowed, each recorded
- `roles`: PostgreSQL's application role, which workers use: read and insert only (the owner migrates)
- `reader`, `render`, `cli`: `python -m agent ledger show|export|purge|forget|migrate`
"""

from typing import TYPE_CHECKING, Any

from agent.ops.ledger.entry import (
    LedgerEntry,
    LedgerRecord,
    LedgerSource,
    UnverifiedCitation,
    excerpt_sha256,
    sources_from,
    stored_excerpt,
    stored_query,
)
from agent.ops.ledger.errors import LedgerRejected, LedgerSchemaError
from agent.ops.ledger.writer import DisabledLedger, EvidenceLedger, Ledger, job_ledger

if TYPE_CHECKING:
    from agent.ops.ledger.schema import SCHEMA_VERSION
    from agent.ops.ledger.store import LedgerLocationError, LedgerStore, ledger_url, secure_ledger_files

# The store's names load SQLAlchemy; a job process, which only spools (`job_ledger`), never touches them.
_FROM_STORE = {"LedgerLocationError", "LedgerStore", "ledger_url", "secure_ledger_files"}


def __getattr__(name: str) -> Any:
    if name == "SCHEMA_VERSION":
        from agent.ops.ledger import schema

        return schema.SCHEMA_VERSION
    if name in _FROM_STORE:
        from agent.ops.ledger import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SCHEMA_VERSION",
    "DisabledLedger",
    "EvidenceLedger",
    "Ledger",
    "LedgerEntry",
    "LedgerLocationError",
    "LedgerRecord",
    "LedgerRejected",
    "LedgerSchemaError",
    "LedgerSource",
    "LedgerStore",
    "UnverifiedCitation",
    "excerpt_sha256",
    "job_ledger",
    "ledger_url",
    "secure_ledger_files",
    "sources_from",
    "stored_excerpt",
    "stored_query",
]
