"""Shared test setup: every test process digests with its own throwaway key, never a file in the checkout."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from agent.ops import digest


@pytest.fixture(autouse=True, scope="session")
def _digest_key() -> Iterator[None]:
    digest.configure(secrets.token_bytes(32))
    yield
    digest.configure(None)
