"""Keyed digests: the digest of user text cannot be undone by hashing guesses, and the key stays private."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.ops import digest
from agent.ops.digest import DigestKeyError, load_or_create_key, query_digest
from agent.settings import get_settings

CEDULA = "8-123-4567"


@pytest.fixture
def lazy_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Let the digest load its key from the settings, as a real process does, into a fresh folder."""
    key_path = tmp_path / "state" / "digest.key"
    monkeypatch.setenv("LEXVOZ_DIGEST_KEY_PATH", str(key_path))
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    digest.configure(None)
    yield key_path
    get_settings.cache_clear()
    digest.configure(os.urandom(32))


def test_digest_of_a_known_cedula_is_not_its_plain_hash(lazy_key: Path) -> None:
    value = query_digest(CEDULA)
    for plain in (CEDULA, CEDULA.casefold()):
        full = hashlib.sha256(plain.encode("utf-8")).hexdigest()
        assert value != full[: len(value)]
        assert value not in full
    # what a guesser can compute without the key never matches
    guesses = {hashlib.sha256(f"8-123-{n:04d}".encode()).hexdigest()[:16] for n in range(10_000)}
    assert value not in guesses


def test_key_is_created_on_first_run_owner_only_and_reused(lazy_key: Path) -> None:
    first = query_digest(CEDULA)
    assert lazy_key.is_file()
    assert stat.S_IMODE(lazy_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(lazy_key.parent.stat().st_mode) == 0o700
    digest.configure(None)  # a new process: same file, same digests
    assert query_digest(CEDULA) == first
    assert len(bytes.fromhex(lazy_key.read_text().strip())) == 32


def test_different_keys_give_different_digests() -> None:
    digest.configure(b"k" * 32)
    a = query_digest(CEDULA)
    digest.configure(b"j" * 32)
    assert query_digest(CEDULA) != a
    digest.configure(os.urandom(32))


def test_digest_is_stable_and_normalized() -> None:
    a = query_digest("¿Qué dice el artículo 72?")
    assert len(a) == 16 and all(c in "0123456789abcdef" for c in a)
    assert a == query_digest("  ¿qué   DICE el artículo 72?\n")
    assert a != query_digest("¿Qué dice el artículo 73?")
    assert query_digest("cédula") == query_digest("ce\u0301dula")  # NFC and NFD are the same question


def test_a_key_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "digest.key"
    path.write_text("00" * 32)
    path.chmod(0o644)
    with pytest.raises(DigestKeyError, match="chmod 600"):
        load_or_create_key(path)


def test_malformed_keys_are_refused(tmp_path: Path) -> None:
    for i, text in enumerate(("not hex", "abcd")):
        path = tmp_path / f"k{i}"
        path.write_text(text)
        path.chmod(0o600)
        with pytest.raises(DigestKeyError):
            load_or_create_key(path)


def test_concurrent_first_runs_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "digest.key"
    results: list[bytes] = []
    start = threading.Barrier(8)

    def create() -> None:
        start.wait()
        results.append(load_or_create_key(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and len(set(results)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["digest.key"]  # no temporary file left behind


def test_key_never_reaches_the_logs(lazy_key: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    query_digest(CEDULA)
    key_hex = lazy_key.read_text().strip()
    assert key_hex not in caplog.text


def test_an_unusable_key_file_never_falls_back_to_a_plain_hash(
    lazy_key: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A world-readable key must not break a conversation, nor make digests plain: one error, a temporary key."""
    lazy_key.parent.mkdir(parents=True)
    lazy_key.write_text("11" * 32)
    lazy_key.chmod(0o644)
    with caplog.at_level(logging.ERROR, logger="lexvoz.digest"):
        value = query_digest(CEDULA)
    assert value != hashlib.sha256(CEDULA.encode()).hexdigest()[:16]
    assert "digest key unusable" in caplog.text and "11" * 32 not in caplog.text
