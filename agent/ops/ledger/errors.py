"""The ledger's own errors, apart from the store so that a job process can name them without SQLAlchemy."""

from __future__ import annotations

__all__ = ["LedgerRejected", "LedgerSchemaError"]


class LedgerSchemaError(RuntimeError):
    """The store's schema is not one this program can use (newer, or older for a read-only reader)."""


class LedgerRejected(ValueError):
    """The store refused the data itself (a constraint, not an outage): writing it again cannot help."""
